// The generation loop: a prompt prefilled into a Decoder in one forward, then one token at a
// time, each chosen by a Sampler from the last logits and fed back, until max_new_tokens or a
// stop token (the model's eos_token_id: stop_ids), which is kept as the last token as Hugging
// Face's generate keeps it.
//
// Thread-compatible (one Decoder per call).
#ifndef MOBIUS_WORKER_GENERATE_GENERATE_H_
#define MOBIUS_WORKER_GENERATE_GENERATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/generate/decoder.h"
#include "worker/generate/sampler.h"

namespace mobius::generate {

struct GenerateOptions {
  int64_t max_new_tokens = 0;  // >= 1
  std::vector<int32_t> stop_ids;
  SamplingOptions sampling;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens, a stop token included
  bool stopped = false;         // ended at a stop token (else at max_new_tokens)
  // The logits [V] each new token was chosen from (when GenerateOptions asked for them).
  std::vector<std::vector<float>> logits;
};

// Resets `decoder` and generates after `prompt` (>= 1 token). REQUIRES: decoder.capacity() >=
// prompt.size() + max_new_tokens - 1. INVALID_ARGUMENT for bad options (naming the flag) or
// prompt ids outside the vocabulary; errors of the decoder as they come. `keep_logits` fills
// GenerateResult::logits.
absl::StatusOr<GenerateResult> Generate(Decoder& decoder, const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options, bool keep_logits = false);

// The model directory's stop tokens: generation_config.json's eos_token_id when it has one (an id
// or a list), else config.json's (ditto); empty when neither names one. INVALID_ARGUMENT naming
// the file for ids that are not integers in [0, vocab_size).
absl::StatusOr<std::vector<int32_t>> StopTokenIds(const std::string& model_dir,
                                                  int64_t vocab_size);

}  // namespace mobius::generate

#endif  // MOBIUS_WORKER_GENERATE_GENERATE_H_
