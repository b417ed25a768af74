// Canonical JSON of a JobSpec: what the job store keeps, and what "the same spec" means.
//
// JobSpecToJson normalizes the spec (spec.h Normalize) and writes every field, defaults included,
// with the keys of docs/job-spec.md in sorted order and no whitespace, so two specs that mean the
// same produce byte-identical text. Doubles are written in the shortest form that reads back
// exactly; device_memory_bytes is a plain integer and gpus is 0 for "all free". The optional
// `adapter` section is written only when the spec has one (then with all its fields): a spec
// without it keeps the text it had before the section existed, so stored jobs still compare
// equal to their resubmissions.
//
//   {"checkpoint":{"dir":"","every_steps":0},"dataset":{"eval_fraction":0.0,"format":"tokens",...
//
// JobSpecFromJson reads that text back (and any subset of it: absent keys take their defaults).
// Unknown keys and wrong types (null included) are INVALID_ARGUMENT naming the field path: the text is written by
// this code, so anything else means a corrupt or foreign record. It does not validate; callers
// run ValidateJobSpec.
//
// Thread-safe: pure functions.
#ifndef MOBIUS_COMMON_JOBSPEC_JSON_H_
#define MOBIUS_COMMON_JOBSPEC_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/jobspec/spec.h"

namespace mobius::jobspec {

// Canonical text. Strings that are not UTF-8 are written with U+FFFD replacements (a validated
// spec has none).
std::string JobSpecToJson(const JobSpec& spec);

// INVALID_ARGUMENT "job spec JSON: field.path: what is wrong" for text that is not JSON, not an
// object, or has unknown keys or wrong types. The result is normalized.
absl::StatusOr<JobSpec> JobSpecFromJson(absl::string_view json_text);

// JobSpecToJson(a) == JobSpecToJson(b): the idempotent-submit comparison.
bool SameJobSpec(const JobSpec& a, const JobSpec& b);

}  // namespace mobius::jobspec

#endif  // MOBIUS_COMMON_JOBSPEC_JSON_H_
