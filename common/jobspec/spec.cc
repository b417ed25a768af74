#include "common/jobspec/spec.h"

namespace mobius::jobspec {

void Normalize(JobSpec& spec) {
  if (spec.training.microbatch == 0) spec.training.microbatch = spec.training.global_batch;
  const bool tokenized_here = spec.dataset.format == "jsonl" || spec.dataset.format == "text";
  if (tokenized_here && spec.dataset.tokenizer.empty()) spec.dataset.tokenizer = spec.model_dir;
}

}  // namespace mobius::jobspec
