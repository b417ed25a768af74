// Token (and learned position) embeddings on the GPU: out[b, t] = wte[tokens[b, t]] (+ wpe[t]).
// Same contract as worker/kernels/cpu/embedding.h (backend::EmbeddingParams): tables and
// activations bf16 or fp16 (half_type.h), table gradients fp32, the wte + wpe sum formed in fp32
// and rounded once (bitwise the CPU result).
//
// Token ids are data: they cannot be checked when the op is enqueued. An id outside [0, vocab) is
// never read through: its output row is written as zeros (forward) or skipped (backward), and when
// `invalid_count` (device int32, may be null) is given it is incremented once per such position so
// that the backend can report the op's error at Synchronize.
//
// Backward: dwte rows are accumulated with fp32 atomics (positions sharing a token add in no fixed
// order: the last bits may differ from run to run); dwpe is summed over the batch in order, one
// thread per element (deterministic).
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_EMBEDDING_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_EMBEDDING_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// out [B, T, C]; tokens [B, T] int32; wte [V, C]; wpe [P, C] or nullptr; the tables and out of
// `type`. REQUIRES: T <= P when wpe is set.
KernelStatus embedding_fwd(HalfType type, uint16_t* out, const int32_t* tokens, const uint16_t* wte,
                           const uint16_t* wpe, int64_t b, int64_t t, int64_t c, int64_t vocab,
                           int32_t* invalid_count, cudaStream_t stream);

// dwte [V, C] fp32 += scatter of dout [B, T, C] (of `type`) by tokens; dwpe [P, C] fp32 += (may
// be null).
KernelStatus embedding_bwd(HalfType type, float* dwte, float* dwpe, const uint16_t* dout,
                           const int32_t* tokens, int64_t b, int64_t t, int64_t c, int64_t vocab,
                           int32_t* invalid_count, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_EMBEDDING_CUH_
