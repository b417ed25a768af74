#include "worker/kernels/cpu/gelu.h"

#include "worker/kernels/cpu/fast_math.h"

namespace mobius::kernels::cpu {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;
constexpr int64_t kBlock = 256;  // fp32 staging block: conversion and math in separate loops

// 0.5 (1 + tanh u) == sigmoid(2u): one FastExp, no cancellation in 1 + tanh for negative u, and
// 0.5 (1 - tanh^2 u) == 2 sigmoid(2u) (1 - sigmoid(2u)) for the gradient. Written once for float
// and F32x8 (same operations, same bits): the vector loops finish with the scalar form.
template <typename V>
MOBIUS_SIMD_INLINE V SigmoidTwoU(V x) {
  const V u = kGeluScale * (x + kCubic * x * x * x);
  return 1.0f / (1.0f + FastExp(-2.0f * u));
}

template <typename V>
MOBIUS_SIMD_INLINE V GeluGrad(V x, V sig) {
  const V du_dx = kGeluScale * (1.0f + 3.0f * kCubic * x * x);
  return sig + 2.0f * x * sig * (1.0f - sig) * du_dx;
}

// T: the storage format (storage.h); one clone set per format.
template <typename T>
MOBIUS_KERNEL_CLONES void GeluFwdRange(T* out, const T* inp, int64_t begin, int64_t end) {
  float x[kBlock];
  for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t len = std::min(kBlock, end - b0);
    LoadRow(x, inp + b0, len);
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
      const F32x8 v = Load8(x + i);
      Store8(x + i, v * SigmoidTwoU(v));
    }
    for (; i < len; ++i) x[i] *= SigmoidTwoU(x[i]);
    StoreRow(out + b0, x, len);
  }
}

template <typename T>
MOBIUS_KERNEL_CLONES void GeluBwdRange(T* dinp, const T* dout, const T* inp, int64_t begin,
                                       int64_t end) {
  float x[kBlock], dy[kBlock], acc[kBlock];
  for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t len = std::min(kBlock, end - b0);
    LoadRow(x, inp + b0, len);
    LoadRow(dy, dout + b0, len);
    LoadRow(acc, dinp + b0, len);
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
      const F32x8 v = Load8(x + i);
      Store8(dy + i, Load8(acc + i) + GeluGrad(v, SigmoidTwoU(v)) * Load8(dy + i));
    }
    for (; i < len; ++i) dy[i] = acc[i] + GeluGrad(x[i], SigmoidTwoU(x[i])) * dy[i];
    StoreRow(dinp + b0, dy, len);
  }
}

template <typename T>
void Forward(T* out, const T* inp, int64_t n, ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain,
                   [&](int64_t begin, int64_t end) { GeluFwdRange(out, inp, begin, end); });
}

template <typename T>
void Backward(T* dinp, const T* dout, const T* inp, int64_t n, ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    GeluBwdRange(dinp, dout, inp, begin, end);
  });
}

}  // namespace

void gelu_fwd(uint16_t* out, const uint16_t* inp, int64_t n, ThreadPool* pool) {
  Forward(out, inp, n, pool);
}
void gelu_fwd(F16* out, const F16* inp, int64_t n, ThreadPool* pool) { Forward(out, inp, n, pool); }

void gelu_bwd(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t n,
              ThreadPool* pool) {
  Backward(dinp, dout, inp, n, pool);
}
void gelu_bwd(F16* dinp, const F16* dout, const F16* inp, int64_t n, ThreadPool* pool) {
  Backward(dinp, dout, inp, n, pool);
}

}  // namespace mobius::kernels::cpu
