#include "worker/generate/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace mobius::generate {

absl::Status ValidateSampling(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--temperature must be >= 0 (0: greedy), got ", o.temperature));
  }
  if (!(o.top_p > 0 && o.top_p <= 1)) {  // also refuses NaN
    return absl::InvalidArgumentError(absl::StrCat("--top_p must be in (0, 1], got ", o.top_p));
  }
  return absl::OkStatus();
}

int32_t Argmax(const float* logits, int64_t v) {
  int64_t best = 0;
  for (int64_t i = 1; i < v; ++i) {
    if (logits[i] > logits[best] || (std::isnan(logits[best]) && !std::isnan(logits[i]))) best = i;
  }
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), engine_(options.seed) {}

int32_t Sampler::Next(const float* logits, int64_t v) {
  if (options_.temperature == 0) return Argmax(logits, v);
  const float max = logits[Argmax(logits, v)];
  order_.clear();
  double total = 0;
  for (int64_t i = 0; i < v; ++i) {
    const double p = std::isfinite(logits[i])
                         ? std::exp((double{logits[i]} - max) / options_.temperature)
                         : 0.0;
    order_.push_back({p, static_cast<int32_t>(i)});
    total += p;
  }
  std::sort(order_.begin(), order_.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  // The nucleus: the smallest prefix reaching top_p of the mass (the top token at least).
  double kept = 0;
  size_t n = 0;
  while (n < order_.size() && (n == 0 || kept < options_.top_p * total)) kept += order_[n++].first;
  const double u = static_cast<double>(engine_() >> 11) * 0x1.0p-53 * kept;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    sum += order_[i].first;
    if (u < sum) return order_[i].second;
  }
  return order_[n - 1].second;  // u rounded up to the kept mass
}

}  // namespace mobius::generate
