// Softmax cross-entropy over the vocabulary with ignore_index -100, fused with the softmax, as
// torch.nn.functional.cross_entropy(reduction="mean", ignore_index=-100) except that a batch with
// every target ignored has loss 0 (torch: NaN). Oracle: reference ops_loss.h.
//
// The forward never materialises the probabilities: it saves lse = logsumexp(logits row) [N] fp32,
// and the backward recomputes softmax = exp(logit - lse).
//
// Thread-safety: reentrant; rows are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_CROSS_ENTROPY_H_
#define MOBIUS_WORKER_KERNELS_CPU_CROSS_ENTROPY_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

inline constexpr int32_t kIgnoreIndex = -100;

// Chunks (backend::CrossEntropyRows): with total_rows > 0 the call computes rows
// [row0, row0 + N) of a microbatch of total_rows rows; targets, losses and lse point at row row0,
// and the mean and the backward's count cover all total_rows rows (readable from targets - row0
// and losses - row0). A row's loss, lse and gradient do not depend on the chunking; the mean is
// formed over all rows in order, so the last chunk's mean is bitwise the unchunked one.

// logits [N, V] bf16, fp16 (storage.h) or fp32; targets [N] in [0, V) or kIgnoreIndex; losses
// [N] fp32 (0 where ignored); lse [N] fp32 (saved; 0 where ignored). Returns the mean loss over
// non-ignored rows (of the whole microbatch when chunked: meaningful once every chunk ran), 0 when
// every row is ignored. REQUIRES: targets valid.
float cross_entropy_fwd(float* losses, float* lse, const uint16_t* logits, const int32_t* targets,
                        int64_t n, int64_t v, ThreadPool* pool, int64_t row0 = 0,
                        int64_t total_rows = 0);
float cross_entropy_fwd(float* losses, float* lse, const F16* logits, const int32_t* targets,
                        int64_t n, int64_t v, ThreadPool* pool, int64_t row0 = 0,
                        int64_t total_rows = 0);
float cross_entropy_fwd(float* losses, float* lse, const float* logits, const int32_t* targets,
                        int64_t n, int64_t v, ThreadPool* pool, int64_t row0 = 0,
                        int64_t total_rows = 0);

// Writes (not accumulates) dlogits [N, V] = (softmax(logits) - onehot(target)) * dloss / count for
// non-ignored rows and 0 for ignored rows, count = number of non-ignored rows (of the whole
// microbatch when chunked; all 0 when count is 0). dlogits has the logits' type and may alias
// logits (in-place).
void cross_entropy_bwd(uint16_t* dlogits, const uint16_t* logits, const float* lse,
                       const int32_t* targets, int64_t n, int64_t v, float dloss,
                       ThreadPool* pool, int64_t row0 = 0, int64_t total_rows = 0);
void cross_entropy_bwd(F16* dlogits, const F16* logits, const float* lse, const int32_t* targets,
                       int64_t n, int64_t v, float dloss, ThreadPool* pool, int64_t row0 = 0,
                       int64_t total_rows = 0);
void cross_entropy_bwd(float* dlogits, const float* logits, const float* lse,
                       const int32_t* targets, int64_t n, int64_t v, float dloss,
                       ThreadPool* pool, int64_t row0 = 0, int64_t total_rows = 0);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_CROSS_ENTROPY_H_
