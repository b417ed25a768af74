// Token (and learned position) embeddings: out[b, t] = wte[tokens[b, t]] (+ wpe[t]).
// Storage: tables and activations bf16 (uint16_t) or fp16 (F16, storage.h), table gradients fp32.
// Oracle: reference ops_embedding.h.
//
// The backward is deterministic without atomics: positions are grouped by token id and each table
// row is accumulated by one piece of work, in position order (the reference's order, so the
// gradients match it bitwise).
//
// Thread-safety: reentrant; work is split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_EMBEDDING_H_
#define MOBIUS_WORKER_KERNELS_CPU_EMBEDDING_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// out [B, T, C]; tokens [B, T]; wte [V, C]; wpe [P, C] or nullptr (RoPE models); the 16-bit
// tensors all bf16 or all fp16. With wpe the sum is formed in fp32 and rounded once.
// REQUIRES: tokens in [0, V), T <= P.
void embedding_fwd(uint16_t* out, const int32_t* tokens, const uint16_t* wte, const uint16_t* wpe,
                   int64_t b, int64_t t, int64_t c, ThreadPool* pool);
void embedding_fwd(F16* out, const int32_t* tokens, const F16* wte, const F16* wpe, int64_t b,
                   int64_t t, int64_t c, ThreadPool* pool);

// dwte[tokens[b, t]] += dout[b, t]; dwpe[t] += dout[b, t] (dwpe may be nullptr). dwte [V, C] and
// dwpe [P, C] fp32; dout [B, T, C] bf16 or fp16.
void embedding_bwd(float* dwte, float* dwpe, const uint16_t* dout, const int32_t* tokens,
                   int64_t b, int64_t t, int64_t c, ThreadPool* pool);
void embedding_bwd(float* dwte, float* dwpe, const F16* dout, const int32_t* tokens, int64_t b,
                   int64_t t, int64_t c, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_EMBEDDING_H_
