#include "worker/kernels/cpu/rmsnorm.h"

#include <cmath>
#include <vector>

namespace mobius::kernels::cpu {
namespace {

// Rows per piece: q/k norm has many short rows, the block norms fewer long ones.
int64_t RowGrain(int64_t c) { return std::max<int64_t>(16, 16384 / std::max<int64_t>(c, 1)); }

// T: the 16-bit storage format (storage.h); DInp: T or float.
template <typename T>
void Forward(T* out, float* rstd, const T* inp, const T* weight, int64_t n, int64_t c, float eps,
             ThreadPool* pool) {
  std::vector<float> w(c);
  LoadRow(w.data(), weight, c);
  ParallelForRange(pool, n, RowGrain(c), [&](int64_t begin, int64_t end) {
    std::vector<float> x(c);
    for (int64_t row = begin; row < end; ++row) {
      LoadRow(x.data(), inp + row * c, c);
      float ss = 0.0f;
      for (int64_t i = 0; i < c; ++i) ss += x[i] * x[i];
      const float s = 1.0f / std::sqrt(ss / c + eps);
      // LlamaRMSNorm: weight * (x * rstd), in that order.
      T* y = out + row * c;
      for (int64_t i = 0; i < c; ++i) Store(y, i, w[i] * (x[i] * s));
      rstd[row] = s;
    }
  });
}

template <typename DInp, typename T>
void Backward(DInp* dinp, float* dweight, const T* dout, const T* inp, const T* weight,
              const float* rstd, int64_t n, int64_t c, ThreadPool* pool) {
  std::vector<float> w(c);
  LoadRow(w.data(), weight, c);
  ReduceRows(
      pool, n, c,
      [&](int64_t begin, int64_t end, float* partial) {
        std::vector<float> x(c), dy(c);
        for (int64_t row = begin; row < end; ++row) {
          const float s = rstd[row];
          LoadRow(x.data(), inp + row * c, c);
          LoadRow(dy.data(), dout + row * c, c);
          float gx_sum = 0.0f;
          for (int64_t i = 0; i < c; ++i) gx_sum += w[i] * dy[i] * x[i];
          // dx = s * w * dy - s^3 * x * mean(w * dy * x).
          const float k = s * s * s * (gx_sum / c);
          DInp* dx = dinp + row * c;
          for (int64_t i = 0; i < c; ++i) {
            Store(dx, i, Load(dx, i) + (s * w[i] * dy[i] - k * x[i]));
            partial[i] += dy[i] * x[i] * s;
          }
        }
      },
      [&](int64_t j, float sum) { dweight[j] += sum; });
}

}  // namespace

void rmsnorm_fwd(uint16_t* out, float* rstd, const uint16_t* inp, const uint16_t* weight,
                 int64_t n, int64_t c, float eps, ThreadPool* pool) {
  Forward(out, rstd, inp, weight, n, c, eps, pool);
}
void rmsnorm_fwd(F16* out, float* rstd, const F16* inp, const F16* weight, int64_t n, int64_t c,
                 float eps, ThreadPool* pool) {
  Forward(out, rstd, inp, weight, n, c, eps, pool);
}

void rmsnorm_bwd(uint16_t* dinp, float* dweight, const uint16_t* dout, const uint16_t* inp,
                 const uint16_t* weight, const float* rstd, int64_t n, int64_t c,
                 ThreadPool* pool) {
  Backward(dinp, dweight, dout, inp, weight, rstd, n, c, pool);
}
void rmsnorm_bwd(float* dinp, float* dweight, const uint16_t* dout, const uint16_t* inp,
                 const uint16_t* weight, const float* rstd, int64_t n, int64_t c,
                 ThreadPool* pool) {
  Backward(dinp, dweight, dout, inp, weight, rstd, n, c, pool);
}
void rmsnorm_bwd(F16* dinp, float* dweight, const F16* dout, const F16* inp, const F16* weight,
                 const float* rstd, int64_t n, int64_t c, ThreadPool* pool) {
  Backward(dinp, dweight, dout, inp, weight, rstd, n, c, pool);
}
void rmsnorm_bwd(float* dinp, float* dweight, const F16* dout, const F16* inp, const F16* weight,
                 const float* rstd, int64_t n, int64_t c, ThreadPool* pool) {
  Backward(dinp, dweight, dout, inp, weight, rstd, n, c, pool);
}

}  // namespace mobius::kernels::cpu
