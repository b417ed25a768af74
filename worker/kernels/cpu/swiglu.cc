#include "worker/kernels/cpu/swiglu.h"

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

}  // namespace

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
