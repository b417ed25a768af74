// Softmax cross-entropy over the vocabulary with an ignore index, as
// torch.nn.functional.cross_entropy(reduction="mean", ignore_index=-100): the loss is the mean over
// positions whose target is not kIgnoreIndex.
#ifndef MOBIUS_WORKER_REFERENCE_OPS_LOSS_H_
#define MOBIUS_WORKER_REFERENCE_OPS_LOSS_H_

#include <cstdint>

namespace mobius::reference {

inline constexpr int32_t kIgnoreIndex = -100;

// logits, probs [N, V]; targets [N] in [0, V) or kIgnoreIndex; losses [N] (0 where ignored).
// Returns the mean loss over counted positions, 0 when every target is ignored (torch: NaN).
// REQUIRES: targets valid.
float CrossEntropyForward(float* probs, float* losses, const float* logits, const int32_t* targets,
                          int64_t n, int64_t v);

// Number of positions whose target is not kIgnoreIndex.
int64_t CountTargets(const int32_t* targets, int64_t n);

// dlogits += dloss * d(mean loss)/d logits = dloss * (probs - onehot(target)) / count; ignored
// rows get nothing.
void CrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int64_t n,
                          int64_t v, float dloss);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_OPS_LOSS_H_
