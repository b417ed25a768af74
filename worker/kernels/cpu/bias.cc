#include "worker/kernels/cpu/bias.h"

#include <vector>

namespace mobius::kernels::cpu {
namespace {

// Rows of type R (16-bit, or fp32: a GEMM's fp32 output), bias of type B.
template <typename R, typename B>
void BiasAdd(R* out, const R* inp, const B* bias, int64_t n, int64_t c, ThreadPool* pool) {
  std::vector<float> bv(c);
  LoadRow(bv.data(), bias, c);
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(c, 1));
  ParallelForRange(pool, n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const R* x = inp + row * c;
      R* y = out + row * c;
      for (int64_t j = 0; j < c; ++j) Store(y, j, Load(x, j) + bv[j]);
    }
  });
}

template <typename T>
void BiasBackward(float* dbias, const T* dout, int64_t n, int64_t c, ThreadPool* pool) {
  ReduceRows(
      pool, n, c,
      [&](int64_t begin, int64_t end, float* partial) {
        for (int64_t row = begin; row < end; ++row) {
          const T* dy = dout + row * c;
          for (int64_t j = 0; j < c; ++j) partial[j] += Load(dy, j);
        }
      },
      [&](int64_t j, float sum) { dbias[j] += sum; });
}

}  // namespace

void bias_add_fwd(uint16_t* out, const uint16_t* inp, const uint16_t* bias, int64_t n, int64_t c,
                  ThreadPool* pool) {
  BiasAdd(out, inp, bias, n, c, pool);
}
void bias_add_fwd(F16* out, const F16* inp, const F16* bias, int64_t n, int64_t c,
                  ThreadPool* pool) {
  BiasAdd(out, inp, bias, n, c, pool);
}

void bias_add_fwd(float* out, const float* inp, const uint16_t* bias, int64_t n, int64_t c,
                  ThreadPool* pool) {
  BiasAdd(out, inp, bias, n, c, pool);
}
void bias_add_fwd(float* out, const float* inp, const F16* bias, int64_t n, int64_t c,
                  ThreadPool* pool) {
  BiasAdd(out, inp, bias, n, c, pool);
}

void bias_bwd(float* dbias, const uint16_t* dout, int64_t n, int64_t c, ThreadPool* pool) {
  BiasBackward(dbias, dout, n, c, pool);
}
void bias_bwd(float* dbias, const F16* dout, int64_t n, int64_t c, ThreadPool* pool) {
  BiasBackward(dbias, dout, n, c, pool);
}
void bias_bwd(float* dbias, const float* dout, int64_t n, int64_t c, ThreadPool* pool) {
  BiasBackward(dbias, dout, n, c, pool);
}

}  // namespace mobius::kernels::cpu
