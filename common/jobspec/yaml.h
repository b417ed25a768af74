// Reading a job spec written by a human in YAML (reference: docs/job-spec.md).
//
//   name: tiny-llama-sft
//   model_dir: ../models/tiny-llama
//   dataset: {path: data/train.tok}
//   training: {steps: 100, global_batch: 8, microbatch: 2, seq_len: 256}
//   resources: {gpus: all, device_memory_bytes: 20GiB}
//
// Strict, so that a typo fails before a job is queued: unknown keys are errors (with a "did you
// mean" hint), numbers must be plain numbers (a quoted "100" is a string), a mapping key may
// appear only once, and the text must be exactly one YAML document. A key whose value is null
// (`key:` or `key: ~`) counts as absent. Every error names the field path and, when the YAML says
// where, line:column (1-based):
//
//   job.yaml:7:15: training.microbatch: must be an integer (got "two")
//   job.yaml:3:3: dataset.fromat: unknown key (did you mean "format"?)
//   job.yaml:4:12: YAML syntax error: illegal map value
//
// Structural problems are all reported together; when there are none the spec is normalized
// (spec.h Normalize) and, unless disabled, validated (validate.h), whose problems are reported
// with the line of the offending field. All errors are INVALID_ARGUMENT, one problem per line.
// yaml-cpp's exceptions never leave this module.
//
// Thread-safe: pure functions (ParseJobSpecFile reads the file system).
#ifndef MOBIUS_COMMON_JOBSPEC_YAML_H_
#define MOBIUS_COMMON_JOBSPEC_YAML_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/jobspec/spec.h"
#include "common/jobspec/validate.h"

namespace mobius::jobspec {

inline constexpr int64_t kMaxJobSpecBytes = int64_t{1} << 20;

struct YamlOptions {
  // Names the text in errors; empty: "job spec" (ParseJobSpecFile: the file's path).
  std::string origin;
  // Relative model_dir, dataset.path, dataset.tokenizer and checkpoint.dir are resolved against
  // this directory (lexically: "a/../b" becomes "b"); empty: they are left as written.
  // ParseJobSpecFile: the file's directory, made absolute, when empty.
  std::string base_dir;
  // Run ValidateJobSpec(validate_options) on the parsed spec.
  bool validate = true;
  ValidateOptions validate_options;
};

// Parses YAML text (at most kMaxJobSpecBytes) into a normalized JobSpec.
absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view yaml_text, const YamlOptions& options = {});

// Reads and parses a YAML file. NOT_FOUND / PERMISSION_DENIED naming the file when it cannot be
// read; INVALID_ARGUMENT for a directory or a file over kMaxJobSpecBytes.
absl::StatusOr<JobSpec> ParseJobSpecFile(const std::string& path, YamlOptions options = {});

}  // namespace mobius::jobspec

#endif  // MOBIUS_COMMON_JOBSPEC_YAML_H_
