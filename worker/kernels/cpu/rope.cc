#include "worker/kernels/cpu/rope.h"

#include <cmath>
#include <vector>

namespace mobius::kernels::cpu {
namespace {

// Rows of NH * head_dim elements per piece.
int64_t RowGrain(int64_t row_elems) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(row_elems, 1));
}

template <typename T>
void Forward(T* out, const T* inp, const float* cos, const float* sin, int64_t b, int64_t t,
             int64_t nh, int64_t head_dim, ThreadPool* pool) {
  const int64_t half = head_dim / 2, row = nh * head_dim;
  ParallelForRange(pool, b * t, RowGrain(row), [&](int64_t begin, int64_t end) {
    std::vector<float> x(head_dim), y(head_dim);
    for (int64_t bt = begin; bt < end; ++bt) {
      const float* c = cos + (bt % t) * half;
      const float* s = sin + (bt % t) * half;
      for (int64_t h = 0; h < nh; ++h) {
        const int64_t off = bt * row + h * head_dim;
        LoadRow(x.data(), inp + off, head_dim);
        for (int64_t i = 0; i < half; ++i) {
          y[i] = x[i] * c[i] - x[i + half] * s[i];
          y[i + half] = x[i + half] * c[i] + x[i] * s[i];
        }
        StoreRow(out + off, y.data(), head_dim);
      }
    }
  });
}

template <typename T>
void Backward(T* dinp, const T* dout, const float* cos, const float* sin, int64_t b, int64_t t,
              int64_t nh, int64_t head_dim, ThreadPool* pool) {
  const int64_t half = head_dim / 2, row = nh * head_dim;
  ParallelForRange(pool, b * t, RowGrain(row), [&](int64_t begin, int64_t end) {
    std::vector<float> dy(head_dim), dx(head_dim);
    for (int64_t bt = begin; bt < end; ++bt) {
      const float* c = cos + (bt % t) * half;
      const float* s = sin + (bt % t) * half;
      for (int64_t h = 0; h < nh; ++h) {
        const int64_t off = bt * row + h * head_dim;
        LoadRow(dy.data(), dout + off, head_dim);
        LoadRow(dx.data(), dinp + off, head_dim);
        for (int64_t i = 0; i < half; ++i) {
          dx[i] += dy[i] * c[i] + dy[i + half] * s[i];
          dx[i + half] += dy[i + half] * c[i] - dy[i] * s[i];
        }
        StoreRow(dinp + off, dx.data(), head_dim);
      }
    }
  });
}

}  // namespace

void rope_tables(float* cos, float* sin, const float* inv_freq, int64_t t, int64_t half,
                 float scale) {
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      cos[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle))) * scale;
      sin[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle))) * scale;
    }
  }
}

void rope_fwd(uint16_t* out, const uint16_t* inp, const float* cos, const float* sin, int64_t b,
              int64_t t, int64_t nh, int64_t head_dim, ThreadPool* pool) {
  Forward(out, inp, cos, sin, b, t, nh, head_dim, pool);
}
void rope_fwd(F16* out, const F16* inp, const float* cos, const float* sin, int64_t b, int64_t t,
              int64_t nh, int64_t head_dim, ThreadPool* pool) {
  Forward(out, inp, cos, sin, b, t, nh, head_dim, pool);
}

void rope_bwd(uint16_t* dinp, const uint16_t* dout, const float* cos, const float* sin, int64_t b,
              int64_t t, int64_t nh, int64_t head_dim, ThreadPool* pool) {
  Backward(dinp, dout, cos, sin, b, t, nh, head_dim, pool);
}
void rope_bwd(F16* dinp, const F16* dout, const float* cos, const float* sin, int64_t b, int64_t t,
              int64_t nh, int64_t head_dim, ThreadPool* pool) {
  Backward(dinp, dout, cos, sin, b, t, nh, head_dim, pool);
}

}  // namespace mobius::kernels::cpu
