#include "worker/kernels/cpu/layernorm.h"

#include <cmath>
#include <vector>

namespace mobius::kernels::cpu {
namespace {

constexpr int64_t kRowGrain = 16;

// T: the 16-bit storage format (storage.h); DInp: T or float.
template <typename T>
void Forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias,
             int64_t n, int64_t c, float eps, ThreadPool* pool) {
  std::vector<float> w(c), bvec(c, 0.0f);
  LoadRow(w.data(), weight, c);
  if (bias != nullptr) LoadRow(bvec.data(), bias, c);
  ParallelForRange(pool, n, kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> x(c);
    for (int64_t row = begin; row < end; ++row) {
      LoadRow(x.data(), inp + row * c, c);
      float sum = 0.0f;
      for (int64_t i = 0; i < c; ++i) sum += x[i];
      const float m = sum / c;
      float var = 0.0f;
      for (int64_t i = 0; i < c; ++i) var += (x[i] - m) * (x[i] - m);
      const float s = 1.0f / std::sqrt(var / c + eps);
      T* y = out + row * c;
      for (int64_t i = 0; i < c; ++i) Store(y, i, (x[i] - m) * s * w[i] + bvec[i]);
      mean[row] = m;
      rstd[row] = s;
    }
  });
}

template <typename DInp, typename T>
void Backward(DInp* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
              const T* weight, const float* mean, const float* rstd, int64_t n, int64_t c,
              ThreadPool* pool) {
  std::vector<float> w(c);
  LoadRow(w.data(), weight, c);
  // Partial sums side by side: [dweight (C) | dbias (C)].
  ReduceRows(
      pool, n, 2 * c,
      [&](int64_t begin, int64_t end, float* partial) {
        std::vector<float> xhat(c), dy(c);
        for (int64_t row = begin; row < end; ++row) {
          const float m = mean[row], s = rstd[row];
          LoadRow(dy.data(), dout + row * c, c);
          const T* x = inp + row * c;
          float g_sum = 0.0f, gx_sum = 0.0f;
          for (int64_t i = 0; i < c; ++i) {
            xhat[i] = (Load(x, i) - m) * s;
            const float g = w[i] * dy[i];
            g_sum += g;
            gx_sum += g * xhat[i];
          }
          // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = weight * dy.
          const float g_mean = g_sum / c, gx_mean = gx_sum / c;
          DInp* dx = dinp + row * c;
          for (int64_t i = 0; i < c; ++i) {
            Store(dx, i, Load(dx, i) + s * (w[i] * dy[i] - g_mean - xhat[i] * gx_mean));
            partial[i] += dy[i] * xhat[i];
            partial[c + i] += dy[i];
          }
        }
      },
      [&](int64_t j, float sum) {
        if (j < c) {
          dweight[j] += sum;
        } else if (dbias != nullptr) {
          dbias[j - c] += sum;
        }
      });
}

}  // namespace

void layernorm_fwd(uint16_t* out, float* mean, float* rstd, const uint16_t* inp,
                   const uint16_t* weight, const uint16_t* bias, int64_t n, int64_t c, float eps,
                   ThreadPool* pool) {
  Forward(out, mean, rstd, inp, weight, bias, n, c, eps, pool);
}
void layernorm_fwd(F16* out, float* mean, float* rstd, const F16* inp, const F16* weight,
                   const F16* bias, int64_t n, int64_t c, float eps, ThreadPool* pool) {
  Forward(out, mean, rstd, inp, weight, bias, n, c, eps, pool);
}

void layernorm_bwd(uint16_t* dinp, float* dweight, float* dbias, const uint16_t* dout,
                   const uint16_t* inp, const uint16_t* weight, const float* mean,
                   const float* rstd, int64_t n, int64_t c, ThreadPool* pool) {
  Backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, c, pool);
}
void layernorm_bwd(float* dinp, float* dweight, float* dbias, const uint16_t* dout,
                   const uint16_t* inp, const uint16_t* weight, const float* mean,
                   const float* rstd, int64_t n, int64_t c, ThreadPool* pool) {
  Backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, c, pool);
}
void layernorm_bwd(F16* dinp, float* dweight, float* dbias, const F16* dout, const F16* inp,
                   const F16* weight, const float* mean, const float* rstd, int64_t n, int64_t c,
                   ThreadPool* pool) {
  Backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, c, pool);
}
void layernorm_bwd(float* dinp, float* dweight, float* dbias, const F16* dout, const F16* inp,
                   const F16* weight, const float* mean, const float* rstd, int64_t n, int64_t c,
                   ThreadPool* pool) {
  Backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, c, pool);
}

}  // namespace mobius::kernels::cpu
