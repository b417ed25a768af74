// Softmax cross-entropy over the vocabulary, fused with the softmax, on the GPU. Same contract as
// worker/kernels/cpu/cross_entropy.h (backend::CrossEntropyParams / CrossEntropyBackwardParams):
// torch.nn.functional.cross_entropy(reduction="mean", ignore_index=-100), except that a batch with
// every target ignored has loss 0 (torch: NaN). The forward saves lse = logsumexp(row) [N] and
// never materialises the probabilities; the backward recomputes softmax = exp(logit - lse).
//
// A target outside [0, V) that is not kIgnoreIndex is data the op cannot check when enqueued: its
// row is treated as ignored (loss, lse and gradient 0, not counted in the mean) and, when
// `invalid_count` (device int32, may be null) is given, counted there so that the backend can
// report the op's error.
//
// One block per row; the mean is summed in double in a fixed order (deterministic).
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_CROSS_ENTROPY_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_CROSS_ENTROPY_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

inline constexpr int32_t kIgnoreIndex = -100;

// Chunks (backend::CrossEntropyRows): with total_rows > 0 the call computes rows
// [row0, row0 + N) of a microbatch of total_rows rows; targets, losses and lse point at row row0
// and the mean and the backward's count cover all total_rows rows (read from targets - row0 and
// losses - row0). A row's results do not depend on the chunking.
//
// logits [N, V] of logits_type (bf16 or fp16), or fp32; targets [N]; losses, lse [N] fp32 (0 where
// ignored); mean_loss [1] fp32 (device) = mean over counted rows, 0 when none; nullptr: no mean.
KernelStatus cross_entropy_fwd(HalfType logits_type, float* losses, float* lse, float* mean_loss,
                               const uint16_t* logits, const int32_t* targets, int64_t n, int64_t v,
                               int32_t* invalid_count, cudaStream_t stream, int64_t row0 = 0,
                               int64_t total_rows = 0);
KernelStatus cross_entropy_fwd(float* losses, float* lse, float* mean_loss, const float* logits,
                               const int32_t* targets, int64_t n, int64_t v, int32_t* invalid_count,
                               cudaStream_t stream, int64_t row0 = 0, int64_t total_rows = 0);

// Writes (not accumulates) dlogits [N, V] = (softmax - onehot) * dloss / count on counted rows,
// 0 elsewhere; count = rows with a target in [0, V) (of the whole microbatch when chunked).
// dlogits has the logits' type and may alias logits (in place).
KernelStatus cross_entropy_bwd(HalfType logits_type, uint16_t* dlogits, const uint16_t* logits,
                               const float* lse, const int32_t* targets, int64_t n, int64_t v,
                               float dloss, cudaStream_t stream, int64_t row0 = 0,
                               int64_t total_rows = 0);
KernelStatus cross_entropy_bwd(float* dlogits, const float* logits, const float* lse,
                               const int32_t* targets, int64_t n, int64_t v, float dloss,
                               cudaStream_t stream, int64_t row0 = 0, int64_t total_rows = 0);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_CROSS_ENTROPY_CUH_
