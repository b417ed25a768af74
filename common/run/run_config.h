// RunConfig: everything one pipeline run needs, written by the launcher as a JSON file and read by
// every `mobius-worker run` process of the job (one per emulated or real GPU).
//
//   training     the same options as the standalone trainer (trainer_options.h), so that a
//                pipeline run and a standalone run of one config are comparable step by step;
//   schedule     "mobius" / "resident": one partition for both passes, stages bound to ranks:
//     stages       the plan's partition: consecutive layer-unit ranges [begin, end) covering the
//                  model;
//     stage_rank   the worker (rank) that runs each stage: the plan's stage -> GPU mapping;
//                  a rank runs the forward of its stages ascending, then their backward descending.
//   schedule     "roundrobin" (RoundPipe): separate partitions, passes rotating over the ranks
//                (`stages` and `stage_rank` stay empty):
//     forward_stages   S_F ranges covering the model, ascending: the forward pass's stages;
//     backward_stages  S_B ranges covering the model, ascending: the backward pass's stages (with
//                      recompute), run S_B-1 .. 0;
//     pass_rank        [pass] -> rank, S_F + S_B entries. The pass stream of a step is
//                      j = 0 .. S_F+S_B-1: pass j < S_F is forward stage j, pass j >= S_F is
//                      backward stage S_F+S_B-1-j (PassAt). The plan's mapping gives
//                      pass_rank[j] = j mod N. The rotation carries over steps, as one stream:
//                      step r's pass j runs on rank (pass_rank[j] + (r-1)(S_F+S_B)) mod N
//                      (PassRank), so when N does not divide the pass count the next step's
//                      first pass goes to the rank after the one that ran this step's last.
//                      pass_rank itself (step 1) says which rank fills and checkpoints each
//                      backward stage's state and runs the eval passes of each forward stage.
//                      Every rank runs its passes in stream order.
//   store_path   the job's shared host model store (host_store.h), created by the launcher: a named
//                file, or "memfd:<name>" with store_fd the descriptor every worker inherits;
//   backend      "auto" (CUDA where the worker has it and the rank's device exists, else CPU,
//                logged), "cpu" or "cuda" (rank_backend.h); rank_device: [rank] -> CUDA ordinal
//                (empty: rank_gpu, else the rank);
//   transport    how boundary activations and their gradients move between ranks (transport.h):
//                "host" (staged through the host store; works everywhere), "nccl" (NCCL
//                send/recv between the ranks' GPUs; needs every rank on CUDA), "auto" (nccl
//                when every rank is on CUDA, the worker has NCCL and the GPUs have P2P, else
//                host) or "emulated" (the CPU backend's stand-in for nccl: rendezvous
//                send/recv through the host store, for testing the runtime's use of a device
//                transport without a GPU);
//   links        emulated PCIe links (token buckets, link_emulator.h) and, per rank, the links a
//                copy from that rank's "GPU" crosses; empty: no emulation (real links or none).
//   nodes        several nodes (data parallel, docs/multinode.md): this node runs the same
//                pipeline on its share of every global batch (training.batch is the global
//                batch: each node reads it whole and takes rows [node*B/N, (node+1)*B/N)), and
//                each backward stage's gradients are all-reduced across the nodes (Gloo, on the
//                host store) before its optimizer step; rank k of every node forms one group.
//                count 1: one node, nothing else is read.
//
// Value type; thread-compatible.
#ifndef MOBIUS_COMMON_RUN_RUN_CONFIG_H_
#define MOBIUS_COMMON_RUN_RUN_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/run/schedule.h"
#include "common/run/trainer_options.h"

namespace mobius::runtime {

struct StageRange {
  int64_t begin = 0, end = 0;  // layer units [begin, end)
};

struct EmulatedLink {
  std::string name;                 // "gpu3", "switch0.uplink"
  double bytes_per_second = 0;      // per direction (PCIe is full duplex), after scaling
};

// Several nodes of one job (see `nodes` above). Every field but `rank` is identical on all nodes
// (the rendezvous checks it: NodeGroupFingerprint, worker/runtime/node_collective.h).
struct NodeGroup {
  int count = 1;               // nodes in the job, 1..1024
  int rank = 0;                // this node, 0..count-1; node 0 writes the checkpoints
  std::string rendezvous;      // "HOST:PORT" of node 0's rendezvous store (common/run/rendezvous.h)
  std::string job_key;         // the job's name in the rendezvous (keys are prefixed with it)
  double timeout_seconds = 300;  // connecting, and each collective: a silent peer fails the step
  int64_t bucket_bytes = 25 << 20;  // gradients are all-reduced in buckets of this size
  // The emulated inter-node link (the CPU backend's stand-in for a NIC, like `links` for PCIe):
  // each all-reduce of B bytes occupies this node's link for 2(N-1)/N * B / bytes_per_second +
  // 2(N-1) * latency (a ring), FIFO over the node's ranks. 0: not emulated.
  double link_bytes_per_second = 0;
  double link_latency_seconds = 0;
};

struct RunConfig {
  std::string job_id;               // names the store and the log lines
  train::TrainerOptions training;   // threads: per worker; device_memory_bytes: per worker's device
  std::vector<StageRange> stages;
  std::vector<int> stage_rank;      // [stage] -> rank in [0, num_workers)
  int num_workers = 0;
  Schedule schedule = Schedule::kMobius;  // schedule.h; JSON: its name. kMobius: stages cycle
                                          // over the GPUs; kResident: S == G, mobius's passes, each
                                          // stage and its optimizer state kept on its GPU;
                                          // kRoundRobin (see above); kZeroOffload is refused
  // Schedules with separate_pass_partitions (roundrobin) only (see above).
  std::vector<StageRange> forward_stages;
  std::vector<StageRange> backward_stages;
  std::vector<int> pass_rank;       // [pass] -> rank in [0, num_workers)
  std::string dispatch = "static";  // roundrobin: "static" | "pool" (see above)
  std::string store_path;           // "memfd:mobius-store-<job>" (or a file path)
  int store_fd = -1;                // >= 0: the worker's inherited descriptor of the store
  std::vector<EmulatedLink> links;
  std::vector<std::vector<int>> rank_links;  // [rank] -> indices into links (empty: no emulation)
  double link_scale = 1.0;          // recorded for the reports (links are already scaled)
  std::vector<int> rank_gpu;        // [rank] -> the node GPU index it emulates or uses (reports)
  // [rank] -> the CPUs (os indexes) of its GPU's NUMA node: the worker pins itself there (those
  // usable on this machine; numa_affinity.h). Empty (or an empty list): not pinned.
  std::vector<std::vector<int>> rank_cpus;
  std::string backend = "auto";     // "auto" | "cpu" | "cuda"
  std::vector<int> rank_device;     // [rank] -> CUDA device ordinal; empty: rank_gpu
  std::string transport = "auto";   // "auto" | "host" | "nccl" | "emulated"
  NodeGroup nodes;
};

// A directed channel of the boundary-gradient transport: rank `from` sends to rank `to`.
struct PeerChannel {
  int from = 0, to = 0;
  bool operator==(const PeerChannel& o) const { return from == o.from && to == o.to; }
};

// Structural checks that need no files: stages (roundrobin: forward_stages and backward_stages)
// cover [0, units) in order with no gaps or overlaps, stage_rank (pass_rank) has one valid rank
// per stage (pass) and every rank runs at least one, schedule-specific rules, link indices valid.
// INVALID_ARGUMENT naming the field.
absl::Status ValidateRunConfig(const RunConfig& config, int64_t num_units);

std::string RunConfigToJson(const RunConfig& config);
// INVALID_ARGUMENT naming the field for malformed JSON or wrong types.
absl::StatusOr<RunConfig> RunConfigFromJson(const std::string& json);
absl::Status WriteRunConfig(const std::string& path, const RunConfig& config);

// The stages a rank runs, ascending (mobius / resident).
std::vector<int> StagesOfRank(const RunConfig& config, int rank);

// ---- The schedule, uniformly for every schedule (REQUIRES: a config that validated) ----

// One stage pass: the forward or the backward of a stage of that pass's partition.
struct Pass {
  bool backward = false;
  int stage = 0;  // index into ForwardStages() or BackwardStages()
  bool operator==(const Pass& o) const { return backward == o.backward && stage == o.stage; }
};

// The forward and the backward partition: `stages` for mobius and resident (the same ranges for
// both passes), forward_stages / backward_stages for roundrobin.
const std::vector<StageRange>& ForwardStages(const RunConfig& config);
const std::vector<StageRange>& BackwardStages(const RunConfig& config);

// Roundrobin: the pass at position `pass` of the stream (j < S_F: forward j, else backward
// S_F+S_B-1-j).
Pass PassAt(const RunConfig& config, int pass);

// Roundrobin (static dispatch): the rank that runs pass `pass` of run-local step `step` (above).
int PassRank(const RunConfig& config, int pass, uint32_t step);
// Roundrobin: whether that rank changes from step to step (N does not divide S_F + S_B).
bool RankOfPassVaries(const RunConfig& config);

// The passes rank `rank` runs in step `step` (run-local, 1-based), in execution order. Mobius:
// the forward of its stages ascending, then their backward descending (every step); roundrobin:
// its passes of the stream in stream order. Step 1's are the rank's own stages (run_config.h).
std::vector<Pass> PassesOfRank(const RunConfig& config, int rank, uint32_t step = 1);

// The units whose input the forward writes to host memory as an activation checkpoint, ascending:
// every unit that starts a forward or a backward stage, unit 0 excepted. Mobius: the stage
// boundaries.
std::vector<int64_t> CheckpointUnits(const RunConfig& config);

// The rank that runs the backward of backward stage b in step `step` (mobius/resident:
// stage_rank[b]; roundrobin: the rank of its pass; step 1: the rank that owns the stage's state).
int BackwardRank(const RunConfig& config, int b, uint32_t step = 1);

// Whether passes go to the next free rank (roundrobin with dispatch "pool").
bool PoolDispatch(const RunConfig& config);

// The channels the activation gradients cross: (BackwardRank(b, r), BackwardRank(b - 1, r)) for
// every backward boundary and step phase whose two ranks differ, without duplicates, sorted by
// (from, to). Gradients
// between passes on the same rank stay on the host path. None with pool dispatch (which rank runs
// a pass is decided at run time; gradients go through the store).
std::vector<PeerChannel> DgradChannels(const RunConfig& config);

}  // namespace mobius::runtime

#endif  // MOBIUS_COMMON_RUN_RUN_CONFIG_H_
