#include "worker/kernels/cpu/attention_sink.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mobius::kernels::cpu {
namespace {

float LoadOne(const uint16_t* p) { float x; LoadRow(&x, p, 1); return x; }
float LoadOne(const F16* p) { float x; LoadRow(&x, p, 1); return x; }

// Rows (b, t) split over the pool; each scales its H head rows.
template <typename T>
void Forward(T* out, float* lse, const T* sinks, int64_t b, int64_t t, int64_t heads,
             int64_t hd, ThreadPool* pool) {
  std::vector<float> z(static_cast<size_t>(heads));
  LoadRow(z.data(), sinks, heads);
  ParallelForRange(pool, b * t, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(hd));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / t, ti = r % t;
      for (int64_t h = 0; h < heads; ++h) {
        float& l = lse[(bi * heads + h) * t + ti];
        const float m = std::max(l, z[h]);
        const float l2 = m + std::log(std::exp(l - m) + std::exp(z[h] - m));
        const float f = std::exp(l - l2);
        T* o = out + (r * heads + h) * hd;
        LoadRow(row.data(), o, hd);
        for (float& x : row) x *= f;
        StoreRow(o, row.data(), hd);
        l = l2;
      }
    }
  });
}

// Heads split over the pool; each sums its (b, t) rows in order.
template <typename T>
void Backward(float* dsinks, const T* out, const T* dout, const float* lse, const T* sinks,
              int64_t b, int64_t t, int64_t heads, int64_t hd, ThreadPool* pool) {
  ParallelFor(pool, heads, [&](int64_t h) {
    const float z = LoadOne(sinks + h);
    std::vector<float> o(static_cast<size_t>(hd)), d(static_cast<size_t>(hd));
    float sum = 0;
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t ti = 0; ti < t; ++ti) {
        const int64_t at = ((bi * t + ti) * heads + h) * hd;
        LoadRow(o.data(), out + at, hd);
        LoadRow(d.data(), dout + at, hd);
        float dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += o[i] * d[i];
        sum += std::exp(z - lse[(bi * heads + h) * t + ti]) * dot;
      }
    }
    dsinks[h] -= sum;
  });
}

}  // namespace

void attention_sink_fwd(uint16_t* out, float* lse, const uint16_t* sinks, int64_t b, int64_t t,
                        int64_t heads, int64_t head_dim, ThreadPool* pool) {
  Forward(out, lse, sinks, b, t, heads, head_dim, pool);
}
void attention_sink_fwd(F16* out, float* lse, const F16* sinks, int64_t b, int64_t t,
                        int64_t heads, int64_t head_dim, ThreadPool* pool) {
  Forward(out, lse, sinks, b, t, heads, head_dim, pool);
}
void attention_sink_bwd(float* dsinks, const uint16_t* out, const uint16_t* dout,
                        const float* lse, const uint16_t* sinks, int64_t b, int64_t t,
                        int64_t heads, int64_t head_dim, ThreadPool* pool) {
  Backward(dsinks, out, dout, lse, sinks, b, t, heads, head_dim, pool);
}
void attention_sink_bwd(float* dsinks, const F16* out, const F16* dout, const float* lse,
                        const F16* sinks, int64_t b, int64_t t, int64_t heads, int64_t head_dim,
                        ThreadPool* pool) {
  Backward(dsinks, out, dout, lse, sinks, b, t, heads, head_dim, pool);
}

}  // namespace mobius::kernels::cpu
