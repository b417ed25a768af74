// mobius-worker's knobs, all in one place (defined in worker_flags.cc with help text and
// defaults). Today they are the `init-model` subcommand's; `devices` takes none.
#ifndef MOBIUS_WORKER_CHECKPOINT_WORKER_FLAGS_H_
#define MOBIUS_WORKER_CHECKPOINT_WORKER_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, family);
ABSL_DECLARE_FLAG(std::string, preset);
ABSL_DECLARE_FLAG(int64_t, layers);
ABSL_DECLARE_FLAG(int64_t, hidden);
ABSL_DECLARE_FLAG(int64_t, heads);
ABSL_DECLARE_FLAG(int64_t, kv_heads);
ABSL_DECLARE_FLAG(int64_t, head_dim);
ABSL_DECLARE_FLAG(int64_t, intermediate);
ABSL_DECLARE_FLAG(int64_t, vocab);
ABSL_DECLARE_FLAG(int64_t, max_positions);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, dtype);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(bool, force);
ABSL_DECLARE_FLAG(bool, generation_config);

#endif  // MOBIUS_WORKER_CHECKPOINT_WORKER_FLAGS_H_
