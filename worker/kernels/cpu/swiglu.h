// SwiGLU (Llama family MLP), element-wise over bf16 or fp16 buffers (storage.h) with fp32
// arithmetic:
//   out = silu(gate) * up,  silu(g) = g * sigmoid(g).
// Oracle: reference::SwiGluForward/SwiGluBackward.
//
// Thread-safety: reentrant; elements are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_SWIGLU_H_
#define MOBIUS_WORKER_KERNELS_CPU_SWIGLU_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// out, gate, up [N] bf16 (or all fp16); out may alias gate or up.
void swiglu_fwd(uint16_t* out, const uint16_t* gate, const uint16_t* up, int64_t n,
                ThreadPool* pool);
void swiglu_fwd(F16* out, const F16* gate, const F16* up, int64_t n, ThreadPool* pool);

// dgate, dup [N] += (one rounding per element); all bf16 or all fp16.
// REQUIRES: dgate and dup alias neither each other nor any input.
void swiglu_bwd(uint16_t* dgate, uint16_t* dup, const uint16_t* dout, const uint16_t* gate,
                const uint16_t* up, int64_t n, ThreadPool* pool);
void swiglu_bwd(F16* dgate, F16* dup, const F16* dout, const F16* gate, const F16* up, int64_t n,
                ThreadPool* pool);

// gpt-oss's clamped SwiGLU over interleaved pairs (backend::ClampedSwiGluParams): gate_up [N, 2W]
// (gate at even columns, up at odd), out [N, W]; dgate_up [N, 2W] written (zero where a clamp
// holds). Rows split over `pool`; bitwise identical for any pool size.
void clamped_swiglu_fwd(uint16_t* out, const uint16_t* gate_up, int64_t n, int64_t width,
                        float alpha, float limit, ThreadPool* pool);
void clamped_swiglu_fwd(F16* out, const F16* gate_up, int64_t n, int64_t width, float alpha,
                        float limit, ThreadPool* pool);
void clamped_swiglu_bwd(uint16_t* dgate_up, const uint16_t* dout, const uint16_t* gate_up,
                        int64_t n, int64_t width, float alpha, float limit, ThreadPool* pool);
void clamped_swiglu_bwd(F16* dgate_up, const F16* dout, const F16* gate_up, int64_t n,
                        int64_t width, float alpha, float limit, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_SWIGLU_H_
