// The dataset cache's key: what determines the token file of a text dataset (each input's path,
// device, inode, size and mtime; the tokenizer files' and the model config's; the format and its
// fields; the cache version), and the cache's layout: CACHE/<key>.tok is the token file,
// CACHE/<key>.json its descriptor, written after it (an entry counts only when both are there
// and the descriptor matches). Computed where the dataset's user can read the files: the
// daemon's check child (inspection.h) or `mobius run` itself.
//
// Thread-safety: pure functions of the file system.
#ifndef MOBIUS_COMMON_INSPECT_DATASET_DESCRIPTOR_H_
#define MOBIUS_COMMON_INSPECT_DATASET_DESCRIPTOR_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/jobspec/spec.h"

namespace mobius::inspect {

// The descriptor of a spec's text dataset (JSON text). Errors: a missing or unreadable input,
// tokenizer file or model config, naming it and the system error.
absl::StatusOr<std::string> DatasetDescriptor(const jobspec::JobSpec& spec);

// CACHE/<key> for `descriptor` (append ".tok" / ".json").
std::string DatasetCacheBase(const std::string& cache_dir, const std::string& descriptor);

// The cached token file for `descriptor` in `cache_dir`, or "" when there is no complete entry.
std::string LookUpDatasetCache(const std::string& cache_dir, const std::string& descriptor);

}  // namespace mobius::inspect

#endif  // MOBIUS_COMMON_INSPECT_DATASET_DESCRIPTOR_H_
