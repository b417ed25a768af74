// The checkpoint directory layout as the daemon, `mobius run` and the workers all see it: which
// directories under a checkpoint root are complete checkpoints and which is the newest. What is
// inside a checkpoint (and how it is written and read) is worker/checkpoint/checkpoint.h's.
//
// ROOT/checkpoint-<step>/ (step zero-padded to 8 digits, so names sort by step) is complete when its
// DONE file exists; DONE is written last, after every other file is fsynced, and the directory is
// renamed into place after that, so a directory without DONE (or a *.tmp-* one) is never taken.
//
// Thread-safety: pure functions of the file system.
#ifndef MOBIUS_COMMON_RUN_CHECKPOINT_DIRS_H_
#define MOBIUS_COMMON_RUN_CHECKPOINT_DIRS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace mobius::checkpoint {

// "checkpoint-00000042".
std::string CheckpointDirName(int64_t step);

// The complete (DONE present) checkpoint directories under `root` by step, oldest first; empty
// for a missing root.
std::vector<std::pair<int64_t, std::string>> CompleteCheckpoints(const std::string& root);

// The complete checkpoint directory of `root` with the highest step. NOT_FOUND when there is none
// (including a missing root).
absl::StatusOr<std::string> LatestCheckpoint(const std::string& root);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_COMMON_RUN_CHECKPOINT_DIRS_H_
