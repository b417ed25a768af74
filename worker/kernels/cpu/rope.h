// Rotary position embeddings, Hugging Face convention (LlamaRotaryEmbedding + rotate_half), over
// bf16 or fp16 (storage.h) [B, T, NH, head_dim] with fp32 arithmetic. Oracle: reference
// ops_rope.h.
//
// For position p and angle a_i = p * inv_freq[i], dimensions i and i + head_dim/2 form a pair:
//   out[i]       = x[i] cos a_i - x[i + d/2] sin a_i
//   out[i + d/2] = x[i + d/2] cos a_i + x[i] sin a_i
// Positions are 0 .. T-1 within each sequence. inv_freq (including linear / llama3 rope_scaling)
// comes from reference::RopeInverseFrequencies (worker/reference/ops_rope.h).
//
// Thread-safety: reentrant; (b, t) rows are split over `pool` (nullptr: calling thread). Results
// are bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_ROPE_H_
#define MOBIUS_WORKER_KERNELS_CPU_ROPE_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// cos, sin [T, half] fp32 for positions 0 .. T-1 from inv_freq [half]; bitwise what
// reference::RopeTables computes (fp32 angle as HF forms it, cos/sin taken in double).
// `scale` multiplies every entry (YaRN's attention factor; 1 otherwise).
void rope_tables(float* cos, float* sin, const float* inv_freq, int64_t t, int64_t half,
                 float scale = 1.0f);

// out, inp [B, T, NH, head_dim] bf16 (or both fp16); cos, sin [T, head_dim / 2]. out may alias
// inp.
// REQUIRES: head_dim even.
void rope_fwd(uint16_t* out, const uint16_t* inp, const float* cos, const float* sin, int64_t b,
              int64_t t, int64_t nh, int64_t head_dim, ThreadPool* pool);
void rope_fwd(F16* out, const F16* inp, const float* cos, const float* sin, int64_t b, int64_t t,
              int64_t nh, int64_t head_dim, ThreadPool* pool);

// dinp [B, T, NH, head_dim] += R^T dout (the rotation by -a), one rounding per element.
// dinp and dout bf16 or both fp16. REQUIRES: dinp does not alias dout.
void rope_bwd(uint16_t* dinp, const uint16_t* dout, const float* cos, const float* sin, int64_t b,
              int64_t t, int64_t nh, int64_t head_dim, ThreadPool* pool);
void rope_bwd(F16* dinp, const F16* dout, const float* cos, const float* sin, int64_t b, int64_t t,
              int64_t nh, int64_t head_dim, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_ROPE_H_
