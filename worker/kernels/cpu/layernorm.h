// LayerNorm over the last dimension of [N, C] rows (GPT-2), as torch.nn.functional.layer_norm:
//   out = (x - mean) * rstd * weight + bias,  rstd = 1 / sqrt(biased var + eps).
// Storage: activations and weights bf16 (uint16_t bits) or fp16 (F16, storage.h), the same format
// for all of a call's 16-bit tensors; statistics and parameter gradients fp32; arithmetic fp32.
// Oracle: reference::LayerNormForward/Backward.
//
// Thread-safety: reentrant; rows are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_LAYERNORM_H_
#define MOBIUS_WORKER_KERNELS_CPU_LAYERNORM_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// out, inp [N, C]; weight, bias [C] (bias may be nullptr); mean, rstd [N] fp32 (saved).
// out may alias inp.
void layernorm_fwd(uint16_t* out, float* mean, float* rstd, const uint16_t* inp,
                   const uint16_t* weight, const uint16_t* bias, int64_t n, int64_t c, float eps,
                   ThreadPool* pool);
void layernorm_fwd(F16* out, float* mean, float* rstd, const F16* inp, const F16* weight,
                   const F16* bias, int64_t n, int64_t c, float eps, ThreadPool* pool);

// dinp [N, C] += d/dinp (the 16-bit format or fp32: the residual stream's gradient may be kept in
// either); dweight, dbias [C] fp32 += (dbias may be nullptr). dout, inp [N, C]; mean, rstd from the
// forward. REQUIRES: dinp does not alias dout or inp.
void layernorm_bwd(uint16_t* dinp, float* dweight, float* dbias, const uint16_t* dout,
                   const uint16_t* inp, const uint16_t* weight, const float* mean,
                   const float* rstd, int64_t n, int64_t c, ThreadPool* pool);
void layernorm_bwd(float* dinp, float* dweight, float* dbias, const uint16_t* dout,
                   const uint16_t* inp, const uint16_t* weight, const float* mean,
                   const float* rstd, int64_t n, int64_t c, ThreadPool* pool);
void layernorm_bwd(F16* dinp, float* dweight, float* dbias, const F16* dout, const F16* inp,
                   const F16* weight, const float* mean, const float* rstd, int64_t n, int64_t c,
                   ThreadPool* pool);
void layernorm_bwd(float* dinp, float* dweight, float* dbias, const F16* dout, const F16* inp,
                   const F16* weight, const float* mean, const float* rstd, int64_t n, int64_t c,
                   ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_LAYERNORM_H_
