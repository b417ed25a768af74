// Choosing the next token from a row of logits: greedy (temperature 0) or sampling with
// temperature and top-p (nucleus) from a seeded generator.
//
//   greedy    the id of the largest logit (the lowest such id on ties, as torch.argmax).
//   sampling  p_i proportional to exp((logit_i - max) / temperature), in double; the tokens sorted
//             by p descending (ties: lower id first), and the smallest prefix whose mass reaches
//             top_p * total kept (at least one token); one draw u in [0, kept mass) from
//             std::mt19937_64 seeded with `seed` (53 bits of one output), the first token whose
//             running sum exceeds u. A given seed and logits give the same tokens on every
//             machine; a top_p small enough to keep one token is greedy.
//
// Thread-compatible: one Sampler per sequence.
#ifndef MOBIUS_WORKER_GENERATE_SAMPLER_H_
#define MOBIUS_WORKER_GENERATE_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"

namespace mobius::generate {

struct SamplingOptions {
  double temperature = 0;  // 0: greedy; else > 0
  double top_p = 1;        // (0, 1]
  uint64_t seed = 0;
};

// INVALID_ARGUMENT naming --temperature (negative or not finite) or --top_p (outside (0, 1]).
absl::Status ValidateSampling(const SamplingOptions& options);

class Sampler {
 public:
  // REQUIRES: ValidateSampling(options).ok().
  explicit Sampler(const SamplingOptions& options);

  // The next token of logits [v] (v >= 1; non-finite logits count as -inf).
  int32_t Next(const float* logits, int64_t v);

 private:
  SamplingOptions options_;
  std::mt19937_64 engine_;
  std::vector<std::pair<double, int32_t>> order_;  // scratch: (p, id)
};

// The greedy choice alone.
int32_t Argmax(const float* logits, int64_t v);

}  // namespace mobius::generate

#endif  // MOBIUS_WORKER_GENERATE_SAMPLER_H_
