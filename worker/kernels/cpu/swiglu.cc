#include "worker/kernels/cpu/swiglu.h"

#include "worker/kernels/cpu/fast_math.h"

namespace mobius::kernels::cpu {
namespace {

constexpr int64_t kBlock = 256;  // fp32 staging block

inline float Sigmoid(float x) { return 1.0f / (1.0f + FastExp(-x)); }

MOBIUS_KERNEL_CLONES
void SwigluFwdRange(uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t begin,
                    int64_t end) {
  float g[kBlock], u[kBlock];
  for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t len = std::min(kBlock, end - b0);
    LoadRow(g, gate + b0, len);
    LoadRow(u, up + b0, len);
    for (int64_t i = 0; i < len; ++i) g[i] = g[i] * Sigmoid(g[i]) * u[i];
    for (int64_t i = 0; i < len; ++i) out[b0 + i] = numeric::Fp32ToBf16(g[i]);
  }
}

MOBIUS_KERNEL_CLONES
void SwigluBwdRange(uint16_t* dgate, uint16_t* dup, const uint16_t* dout, const uint16_t* gate,
                    const uint16_t* up, int64_t begin, int64_t end) {
  float g[kBlock], u[kBlock], dy[kBlock];
  for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t len = std::min(kBlock, end - b0);
    LoadRow(g, gate + b0, len);
    LoadRow(u, up + b0, len);
    LoadRow(dy, dout + b0, len);
    for (int64_t i = 0; i < len; ++i) {
      const float sig = Sigmoid(g[i]);
      const float silu = g[i] * sig;
      const float dsilu = sig * (1.0f + g[i] * (1.0f - sig));
      g[i] = numeric::Bf16ToFp32(dgate[b0 + i]) + dy[i] * u[i] * dsilu;
      u[i] = numeric::Bf16ToFp32(dup[b0 + i]) + dy[i] * silu;
    }
    for (int64_t i = 0; i < len; ++i) {
      dgate[b0 + i] = numeric::Fp32ToBf16(g[i]);
      dup[b0 + i] = numeric::Fp32ToBf16(u[i]);
    }
  }
}

}  // namespace

void swiglu_fwd(uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n,
                ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    SwigluFwdRange(out, gate, up, begin, end);
  });
}

void swiglu_bwd(uint16_t* dgate, uint16_t* dup, const uint16_t* dout, const uint16_t* gate,
                const uint16_t* up, int64_t n, ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    SwigluBwdRange(dgate, dup, dout, gate, up, begin, end);
  });
}

}  // namespace mobius::kernels::cpu
