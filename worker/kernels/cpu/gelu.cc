#include "worker/kernels/cpu/gelu.h"

#include <cmath>

namespace mobius::kernels::cpu {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;
constexpr int64_t kBlock = 256;  // fp32 staging block: conversion and math in separate loops

}  // namespace

void gelu_fwd(uint16_t* out, const uint16_t* inp, int64_t n, ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    float x[kBlock];
    for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
      const int64_t len = std::min(kBlock, end - b0);
      LoadRow(x, inp + b0, len);
      for (int64_t i = 0; i < len; ++i) {
        const float u = kGeluScale * (x[i] + kCubic * x[i] * x[i] * x[i]);
        x[i] = 0.5f * x[i] * (1.0f + std::tanh(u));
      }
      for (int64_t i = 0; i < len; ++i) out[b0 + i] = numeric::Fp32ToBf16(x[i]);
    }
  });
}

void gelu_bwd(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t n,
              ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    float x[kBlock], dy[kBlock];
    for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
      const int64_t len = std::min(kBlock, end - b0);
      LoadRow(x, inp + b0, len);
      LoadRow(dy, dout + b0, len);
      for (int64_t i = 0; i < len; ++i) {
        const float u = kGeluScale * (x[i] + kCubic * x[i] * x[i] * x[i]);
        const float th = std::tanh(u);
        const float du_dx = kGeluScale * (1.0f + 3.0f * kCubic * x[i] * x[i]);
        const float grad = 0.5f * (1.0f + th) + 0.5f * x[i] * (1.0f - th * th) * du_dx;
        dy[i] = numeric::Bf16ToFp32(dinp[b0 + i]) + grad * dy[i];
      }
      for (int64_t i = 0; i < len; ++i) dinp[b0 + i] = numeric::Fp32ToBf16(dy[i]);
    }
  });
}

}  // namespace mobius::kernels::cpu
