// RunConfig: everything one pipeline run needs, written by the launcher as a JSON file and read by
// every `mobius-worker run` process of the job (one per emulated or real GPU).
//
//   training     the same options as the standalone trainer (trainer_options.h), so that a
//                pipeline run and a standalone run of one config are comparable step by step;
//   stages       the plan's partition: consecutive layer-unit ranges [begin, end) covering the model;
//   stage_rank   the worker (rank) that runs each stage: the plan's stage -> GPU mapping;
//   store_path   the job's shared host model store (host_store.h), created by the launcher;
//   links        emulated PCIe links (token buckets, link_emulator.h) and, per rank, the links a
//                copy from that rank's "GPU" crosses; empty: no emulation (real links or none).
//
// Value type; thread-compatible.
#ifndef MOBIUS_WORKER_RUNTIME_RUN_CONFIG_H_
#define MOBIUS_WORKER_RUNTIME_RUN_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/train/trainer_options.h"

namespace mobius::runtime {

struct StageRange {
  int64_t begin = 0, end = 0;  // layer units [begin, end)
};

struct EmulatedLink {
  std::string name;                 // "gpu3", "switch0.uplink"
  double bytes_per_second = 0;      // per direction (PCIe is full duplex), after scaling
};

struct RunConfig {
  std::string job_id;               // names the store and the log lines
  train::TrainerOptions training;   // threads: per worker; device_memory_bytes: per worker's device
  std::vector<StageRange> stages;
  std::vector<int> stage_rank;      // [stage] -> rank in [0, num_workers)
  int num_workers = 0;
  std::string schedule = "mobius";  // "mobius" (stages cycle over the GPUs) | "resident" (S == G;
                                    // runs as mobius with one stage per GPU)
  std::string store_path;           // /dev/shm/mobius-store-<job>-<pid>
  std::vector<EmulatedLink> links;
  std::vector<std::vector<int>> rank_links;  // [rank] -> indices into links (empty: no emulation)
  double link_scale = 1.0;          // recorded for the reports (links are already scaled)
  std::vector<int> rank_gpu;        // [rank] -> the node GPU index it emulates or uses (reports)
  // [rank] -> the CPUs (os indexes) of its GPU's NUMA node: the worker pins itself there (those
  // usable on this machine; numa_affinity.h). Empty (or an empty list): not pinned.
  std::vector<std::vector<int>> rank_cpus;
};

// Structural checks that need no files: stages cover [0, units) in order with no gaps or
// overlaps, stage_rank has one valid rank per stage and every rank runs at least one stage,
// schedule-specific rules, link indices valid. INVALID_ARGUMENT naming the field.
absl::Status ValidateRunConfig(const RunConfig& config, int64_t num_units);

std::string RunConfigToJson(const RunConfig& config);
// INVALID_ARGUMENT naming the field for malformed JSON or wrong types.
absl::StatusOr<RunConfig> RunConfigFromJson(const std::string& json);
absl::Status WriteRunConfig(const std::string& path, const RunConfig& config);
absl::StatusOr<RunConfig> ReadRunConfig(const std::string& path);

// The stages a rank runs, ascending.
std::vector<int> StagesOfRank(const RunConfig& config, int rank);

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_RUN_CONFIG_H_
