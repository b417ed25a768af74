// RMSNorm over the last dimension of [N, C] rows (Llama family), as LlamaRMSNorm in fp32:
//   out = weight * x * rstd,  rstd = 1 / sqrt(mean(x^2) + eps).
// Qwen3's q/k norm is the same op over rows of head_dim: [B*T*heads, head_dim].
// Storage: activations and weights bf16 (uint16_t bits) or fp16 (F16, storage.h), the same format
// for all of a call's 16-bit tensors; rstd and parameter gradients fp32; arithmetic fp32.
// Oracle: reference::RmsNormForward/Backward.
//
// Thread-safety: reentrant; rows are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_RMSNORM_H_
#define MOBIUS_WORKER_KERNELS_CPU_RMSNORM_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// out, inp [N, C]; weight [C]; rstd [N] fp32 (saved). out may alias inp.
void rmsnorm_fwd(uint16_t* out, float* rstd, const uint16_t* inp, const uint16_t* weight,
                 int64_t n, int64_t c, float eps, ThreadPool* pool);
void rmsnorm_fwd(F16* out, float* rstd, const F16* inp, const F16* weight, int64_t n, int64_t c,
                 float eps, ThreadPool* pool);

// dinp [N, C] += d/dinp (the 16-bit format or fp32); dweight [C] fp32 +=. dout, inp [N, C].
// REQUIRES: dinp does not alias dout or inp.
void rmsnorm_bwd(uint16_t* dinp, float* dweight, const uint16_t* dout, const uint16_t* inp,
                 const uint16_t* weight, const float* rstd, int64_t n, int64_t c,
                 ThreadPool* pool);
void rmsnorm_bwd(float* dinp, float* dweight, const uint16_t* dout, const uint16_t* inp,
                 const uint16_t* weight, const float* rstd, int64_t n, int64_t c,
                 ThreadPool* pool);
void rmsnorm_bwd(F16* dinp, float* dweight, const F16* dout, const F16* inp, const F16* weight,
                 const float* rstd, int64_t n, int64_t c, ThreadPool* pool);
void rmsnorm_bwd(float* dinp, float* dweight, const F16* dout, const F16* inp, const F16* weight,
                 const float* rstd, int64_t n, int64_t c, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_RMSNORM_H_
