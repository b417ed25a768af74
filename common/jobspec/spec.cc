#include "common/jobspec/spec.h"

namespace mobius::jobspec {

bool IsTextFormat(const std::string& format) { return format != "tokens"; }

const std::string& TokenizerPath(const JobSpec& spec) {
  return spec.dataset.tokenizer.empty() ? spec.model_dir : spec.dataset.tokenizer;
}

void Normalize(JobSpec& spec) {
  spec.training.microbatch = spec.training.EffectiveMicrobatch();
  DatasetSpec& ds = spec.dataset;
  if (ds.path.empty() && ds.paths.size() == 1) {
    ds.path = ds.paths.front();
    ds.paths.clear();
  }
  if (IsTextFormat(ds.format)) ds.tokenizer = TokenizerPath(spec);
}

}  // namespace mobius::jobspec
