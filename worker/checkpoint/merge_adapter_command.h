// `mobius-worker merge-adapter`: merges a PEFT LoRA adapter into its base model and writes a
// Hugging Face model directory (merge_adapter.h), from the flags in worker_flags.h. Spawned by
// `mobius export --merge` (client/export_command.h); runs by hand as well.
//
//   mobius-worker merge-adapter --adapter DIR --out DIR [--base DIR] [--dtype bf16|fp32|auto]
//       [--max_shard_bytes N]
//
// stdout: one line, "@merged " + a JSON summary {"out", "base", "tensors", "merged_modules",
// "dtype", "scaling", "files", "largest_buffer_bytes"}. stderr: the effective flags (glog INFO),
// warnings as "mobius-worker merge-adapter: warning: <message>", and on failure the error as one
// line "mobius-worker merge-adapter: <message>". Exit codes: 0 written; 2 bad input (usage, the
// adapter or base: INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS for a non-empty --out,
// PERMISSION_DENIED, FAILED_PRECONDITION); 1 other failures (I/O). The process dies with its
// parent (PR_SET_PDEATHSIG).
//
// Call from main() after InitProcess; not thread-safe (reads flags).
#ifndef MOBIUS_WORKER_CHECKPOINT_MERGE_ADAPTER_COMMAND_H_
#define MOBIUS_WORKER_CHECKPOINT_MERGE_ADAPTER_COMMAND_H_

#include <string>
#include <vector>

namespace mobius::checkpoint {

inline constexpr char kMergeAdapterUsage[] =
    "mobius-worker merge-adapter --adapter DIR --out DIR [--base DIR] [--dtype bf16|fp32|auto] "
    "[--max_shard_bytes N]";

// The stdout prefix of the summary line.
inline constexpr char kMergedPrefix[] = "@merged ";

// `args`: positional arguments, argv[0] first ("merge-adapter" second). Returns the exit code.
int RunMergeAdapterCommand(const std::vector<std::string>& args);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_MERGE_ADAPTER_COMMAND_H_
