#include "worker/reference/ops_loss.h"

#include <algorithm>
#include <cmath>

namespace mobius::reference {

int64_t CountTargets(const int32_t* targets, int64_t n) {
  return std::count_if(targets, targets + n, [](int32_t t) { return t != kIgnoreIndex; });
}

float CrossEntropyForward(float* probs, float* losses, const float* logits, const int32_t* targets,
                          int64_t n, int64_t v) {
  double total = 0.0;
  for (int64_t row = 0; row < n; ++row) {
    const float* z = logits + row * v;
    const double max_z = *std::max_element(z, z + v);
    double sum = 0.0;
    for (int64_t i = 0; i < v; ++i) sum += std::exp(z[i] - max_z);
    for (int64_t i = 0; i < v; ++i)
      probs[row * v + i] = static_cast<float>(std::exp(z[i] - max_z) / sum);
    losses[row] = 0.0f;
    if (targets[row] != kIgnoreIndex) {
      // -log softmax(z)[target] = log(sum exp(z - max)) - (z[target] - max)
      const double loss = std::log(sum) - (z[targets[row]] - max_z);
      losses[row] = static_cast<float>(loss);
      total += loss;
    }
  }
  const int64_t count = CountTargets(targets, n);
  return count == 0 ? 0.0f : static_cast<float>(total / count);
}

void CrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int64_t n,
                          int64_t v, float dloss) {
  const int64_t count = CountTargets(targets, n);
  if (count == 0) return;
  const double scale = static_cast<double>(dloss) / count;
  for (int64_t row = 0; row < n; ++row) {
    if (targets[row] == kIgnoreIndex) continue;
    for (int64_t i = 0; i < v; ++i) {
      const double onehot = i == targets[row] ? 1.0 : 0.0;
      dlogits[row * v + i] += static_cast<float>(scale * (probs[row * v + i] - onehot));
    }
  }
}

}  // namespace mobius::reference
