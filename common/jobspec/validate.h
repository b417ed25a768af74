// Checking a JobSpec: every range, cross-field rule and (server side) file the spec names.
//
// The client validates after parsing YAML (so a typo fails before anything is sent) and the
// server validates again whatever arrives on the wire, with stricter options: the paths must be
// absolute (the server does not know the client's working directory) and the files must exist.
// Every problem is reported, not only the first, each as "field.path: what is wrong (value)":
//
//   training.microbatch: must divide training.global_batch 8 (got 3)
//   resources.gpus: must be in [0, 1024]; 0 means all free GPUs (got -2)
//   model_dir: no config.json in /models/llama (No such file or directory)
//
// What needs the model's config.json is checked where it is read (jobs::PlanJob): an adapter's
// target_modules against the family's modules and its rank against their dimensions
// (model::ValidateLora).
//
// Thread-safe: pure functions, apart from reading the file system with check_files_exist.
#ifndef MOBIUS_COMMON_JOBSPEC_VALIDATE_H_
#define MOBIUS_COMMON_JOBSPEC_VALIDATE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/jobspec/spec.h"

namespace mobius::jobspec {

struct ValidateOptions {
  // Server side: model_dir, dataset.path, dataset.tokenizer, checkpoint.dir and
  // adapter.init_from must be absolute.
  bool require_absolute_paths = false;
  // Server side: model_dir is a directory with a readable config.json and at least one
  // *.safetensors file; dataset.path is a readable regular file (for "tokens", one that starts
  // with the token file's magic); the tokenizer directory holds tokenizer.json or tokenizer.model;
  // adapter.init_from is a directory with readable adapter_config.json and
  // adapter_model.safetensors.
  bool check_files_exist = false;
};

struct FieldError {
  std::string field;    // dotted path, e.g. "training.microbatch"; "labels.<key>" for a label
  std::string message;  // what is wrong, with the offending value: "must be > 0 (got -1)"

  friend bool operator==(const FieldError&, const FieldError&) = default;
};

// Every problem, in field order (the order of docs/job-spec.md); empty when the spec is valid.
std::vector<FieldError> FindJobSpecErrors(const JobSpec& spec, const ValidateOptions& options = {});

// OK, or INVALID_ARGUMENT whose message lists every problem as "field: message", one per line.
absl::Status ValidateJobSpec(const JobSpec& spec, const ValidateOptions& options = {});

// "field: message" lines joined by '\n' (what ValidateJobSpec puts in its status).
std::string FormatFieldErrors(const std::vector<FieldError>& errors);

}  // namespace mobius::jobspec

#endif  // MOBIUS_COMMON_JOBSPEC_VALIDATE_H_
