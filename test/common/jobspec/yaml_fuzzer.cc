// libFuzzer entry point for the job spec YAML reader, plus the properties every accepted spec must
// have: it validates, and it survives the JSON and proto round trips unchanged. Built as a
// libFuzzer binary with -DMOBIUS_FUZZ=ON (clang); jobspec_yaml_fuzz_smoke runs it in every ctest
// over deterministic mutations of test/data/specs/ (test/testing/fuzz_smoke_main.cc).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/jobspec/json.h"
#include "common/jobspec/validate.h"
#include "common/jobspec/yaml.h"
#include "common/rpc/jobspec_convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mobius::jobspec;
  YamlOptions options;
  options.base_dir = "/base";
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(absl::string_view(reinterpret_cast<const char*>(data), size), options);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  if (!ValidateJobSpec(*spec).ok()) __builtin_trap();  // accepted what the validator rejects
  absl::StatusOr<JobSpec> from_json = JobSpecFromJson(JobSpecToJson(*spec));
  if (!from_json.ok() || !(*from_json == *spec)) __builtin_trap();
  if (!(mobius::JobSpecFromProto(mobius::JobSpecToProto(*spec)) == *spec)) __builtin_trap();
  return 0;
}
