// GELU, tanh approximation (HF "gelu_new", GPT-2), element-wise over bf16 or fp16 buffers
// (storage.h) with fp32 arithmetic: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Oracle: reference::GeluForward/GeluBackward.
//
// Thread-safety: reentrant; elements are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_GELU_H_
#define MOBIUS_WORKER_KERNELS_CPU_GELU_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// out, inp [N] bf16 (or both fp16); out may alias inp.
void gelu_fwd(uint16_t* out, const uint16_t* inp, int64_t n, ThreadPool* pool);
void gelu_fwd(F16* out, const F16* inp, int64_t n, ThreadPool* pool);

// dinp [N] += gelu'(inp) * dout (one rounding per element); all bf16 or all fp16.
// REQUIRES: dinp does not alias dout or inp.
void gelu_bwd(uint16_t* dinp, const uint16_t* dout, const uint16_t* inp, int64_t n,
              ThreadPool* pool);
void gelu_bwd(F16* dinp, const F16* dout, const F16* inp, int64_t n, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_GELU_H_
