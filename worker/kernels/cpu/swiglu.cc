#include "worker/kernels/cpu/swiglu.h"

#include <algorithm>

#include "worker/kernels/cpu/fast_math.h"

namespace mobius::kernels::cpu {
namespace {

constexpr int64_t kBlock = 256;  // fp32 staging block

inline float Sigmoid(float x) { return 1.0f / (1.0f + FastExp(-x)); }

// T: the storage format (storage.h); one clone set per format.
template <typename T>
MOBIUS_KERNEL_CLONES void SwigluFwdRange(T* out, const T* gate, const T* up, int64_t begin,
                                         int64_t end) {
  float g[kBlock], u[kBlock];
  for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t len = std::min(kBlock, end - b0);
    LoadRow(g, gate + b0, len);
    LoadRow(u, up + b0, len);
    for (int64_t i = 0; i < len; ++i) g[i] = g[i] * Sigmoid(g[i]) * u[i];
    StoreRow(out + b0, g, len);
  }
}

template <typename T>
MOBIUS_KERNEL_CLONES void SwigluBwdRange(T* dgate, T* dup, const T* dout, const T* gate,
                                         const T* up, int64_t begin, int64_t end) {
  float g[kBlock], u[kBlock], dy[kBlock], dg[kBlock], du[kBlock];
  for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t len = std::min(kBlock, end - b0);
    LoadRow(g, gate + b0, len);
    LoadRow(u, up + b0, len);
    LoadRow(dy, dout + b0, len);
    LoadRow(dg, dgate + b0, len);
    LoadRow(du, dup + b0, len);
    for (int64_t i = 0; i < len; ++i) {
      const float sig = Sigmoid(g[i]);
      const float silu = g[i] * sig;
      const float dsilu = sig * (1.0f + g[i] * (1.0f - sig));
      dg[i] += dy[i] * u[i] * dsilu;
      du[i] += dy[i] * silu;
    }
    StoreRow(dgate + b0, dg, len);
    StoreRow(dup + b0, du, len);
  }
}

template <typename T>
void Forward(T* out, const T* gate, const T* up, int64_t n, ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    SwigluFwdRange(out, gate, up, begin, end);
  });
}

template <typename T>
void Backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n,
              ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    SwigluBwdRange(dgate, dup, dout, gate, up, begin, end);
  });
}

// One row at a time (width W <= a few thousand: staged in blocks).
template <typename T>
void ClampedFwd(T* out, const T* gate_up, int64_t n, int64_t width, float alpha, float limit,
                ThreadPool* pool) {
  ParallelForRange(pool, n, 1, [&](int64_t r0, int64_t r1) {
    float gu[2 * kBlock], y[kBlock];
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c0 = 0; c0 < width; c0 += kBlock) {
        const int64_t len = std::min(kBlock, width - c0);
        LoadRow(gu, gate_up + r * 2 * width + 2 * c0, 2 * len);
        for (int64_t i = 0; i < len; ++i) {
          const float g = std::min(gu[2 * i], limit);
          const float u = std::min(std::max(gu[2 * i + 1], -limit), limit);
          y[i] = (u + 1.0f) * (g * Sigmoid(alpha * g));
        }
        StoreRow(out + r * width + c0, y, len);
      }
    }
  });
}

template <typename T>
void ClampedBwd(T* dgate_up, const T* dout, const T* gate_up, int64_t n, int64_t width,
                float alpha, float limit, ThreadPool* pool) {
  ParallelForRange(pool, n, 1, [&](int64_t r0, int64_t r1) {
    float gu[2 * kBlock], dy[kBlock], d[2 * kBlock];
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c0 = 0; c0 < width; c0 += kBlock) {
        const int64_t len = std::min(kBlock, width - c0);
        LoadRow(gu, gate_up + r * 2 * width + 2 * c0, 2 * len);
        LoadRow(dy, dout + r * width + c0, len);
        for (int64_t i = 0; i < len; ++i) {
          const float gate = gu[2 * i], up = gu[2 * i + 1];
          const float g = std::min(gate, limit);
          const float u = std::min(std::max(up, -limit), limit);
          const float s = Sigmoid(alpha * g);
          const float dglu = dy[i] * (u + 1.0f);
          d[2 * i] = gate <= limit ? dglu * (s + alpha * g * s * (1.0f - s)) : 0.0f;
          d[2 * i + 1] = up >= -limit && up <= limit ? dy[i] * (g * s) : 0.0f;
        }
        StoreRow(dgate_up + r * 2 * width + 2 * c0, d, 2 * len);
      }
    }
  });
}

}  // namespace

void clamped_swiglu_fwd(uint16_t* out, const uint16_t* gate_up, int64_t n, int64_t width,
                        float alpha, float limit, ThreadPool* pool) {
  ClampedFwd(out, gate_up, n, width, alpha, limit, pool);
}
void clamped_swiglu_fwd(F16* out, const F16* gate_up, int64_t n, int64_t width, float alpha,
                        float limit, ThreadPool* pool) {
  ClampedFwd(out, gate_up, n, width, alpha, limit, pool);
}
void clamped_swiglu_bwd(uint16_t* dgate_up, const uint16_t* dout, const uint16_t* gate_up,
                        int64_t n, int64_t width, float alpha, float limit, ThreadPool* pool) {
  ClampedBwd(dgate_up, dout, gate_up, n, width, alpha, limit, pool);
}
void clamped_swiglu_bwd(F16* dgate_up, const F16* dout, const F16* gate_up, int64_t n,
                        int64_t width, float alpha, float limit, ThreadPool* pool) {
  ClampedBwd(dgate_up, dout, gate_up, n, width, alpha, limit, pool);
}

void swiglu_fwd(uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n,
                ThreadPool* pool) {
  Forward(out, gate, up, n, pool);
}
void swiglu_fwd(F16* out, const F16* gate, const F16* up, int64_t n, ThreadPool* pool) {
  Forward(out, gate, up, n, pool);
}

void swiglu_bwd(uint16_t* dgate, uint16_t* dup, const uint16_t* dout, const uint16_t* gate,
                const uint16_t* up, int64_t n, ThreadPool* pool) {
  Backward(dgate, dup, dout, gate, up, n, pool);
}
void swiglu_bwd(F16* dgate, F16* dup, const F16* dout, const F16* gate, const F16* up, int64_t n,
                ThreadPool* pool) {
  Backward(dgate, dup, dout, gate, up, n, pool);
}

}  // namespace mobius::kernels::cpu
