// The plain data the admission scheduler (scheduler.h) works on: the node's schedulable resources,
// a queued job's request, a running job's allocation and the per-user quotas.
//
// Units: bytes everywhere (`_bytes`), GPU indices are Topology::gpus indices (PCI bus-id order, the
// order nvidia-smi uses and CUDA uses with CUDA_DEVICE_ORDER=PCI_BUS_ID).
// The daemon fills these from the topology (node_resources.h), the job store and the planner's
// memory estimate (planner/estimator.h); nothing here refers to SQLite, protobuf or gRPC.
//
// Value types; thread-compatible.
#ifndef MOBIUS_HOST_SCHEDULER_RESOURCES_H_
#define MOBIUS_HOST_SCHEDULER_RESOURCES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mobius::jobs {

// One GPU with the topology facts the GPU choice (gpu_choice.h) scores. -1 = unknown / none.
struct GpuResource {
  int index = -1;                 // Topology::gpus index; NodeResources::gpus[i].index == i
  std::string name;               // "NVIDIA GeForce RTX 3090"
  std::string uuid;               // "GPU-8c3e..." when known
  int64_t memory_bytes = 0;       // device memory; 0 = unknown (then not checked against a request)
  int switch_index = -1;          // nearest PCIe switch above it (TopologyFacts::switches)
  int contention_group = -1;      // GPUs sharing one uplink into the root complex; -1 = no sharing
  int root_complex = -1;          // TopologyFacts::root_complexes
  int package = -1;               // CPU package (socket) os_index
  int numa_node = -1;             // NUMA node os_index
  std::vector<int> nvlink_peers;  // GPU indices connected by NVLink, ascending
};

// What the scheduler may hand out on this node.
struct NodeResources {
  std::vector<GpuResource> gpus;  // every GPU of the node, gpus[i].index == i
  std::vector<int> allowed_gpus;  // the allow-list (CUDA_VISIBLE_DEVICES / configured): the only
                                  // GPUs ever handed out; ascending, no duplicates
  int64_t host_bytes = 0;         // host RAM available to jobs (all jobs together)
  int64_t pinned_bytes = 0;       // page-locked host memory budget (all jobs together)
  bool draining = false;          // admin drain: nothing new starts
};

// How a job wants its GPUs laid out (gpu_choice.h has the cost functions).
enum class Placement {
  // Mobius with cross-mapped stages: each GPU prefetches its stages from host memory, so GPUs on
  // different uplinks (contention groups) give the job more host bandwidth. Default.
  kSpread,
  // GPUs close together (NVLink, one switch, one socket): jobs whose traffic is GPU-to-GPU.
  kPack,
};

// A queued job as the scheduler sees it.
struct JobRequest {
  std::string job_id;         // "j-000123"; unique among queued and running jobs
  uint32_t uid = 0;           // the submitter (quotas are per uid)
  int32_t priority = 0;       // higher runs first
  int64_t submit_seq = 0;     // submission order: FIFO within a priority and score (then job_id)
  // Within one priority, higher first (the daemon's fair-share and age score,
  // server/jobs/accounting/accounting.h); equal scores (all 0 by default): FIFO.
  double order_score = 0;
  int gpus = 0;               // GPUs wanted; 0 = all free GPUs (at least 1)
  int64_t host_bytes = 0;     // host RAM the job needs (planner estimate)
  int64_t pinned_bytes = 0;   // pinned host memory the job needs (planner estimate)
  int64_t per_gpu_bytes = 0;  // the most device memory the plan needs on any one GPU
  Placement placement = Placement::kSpread;
};

// A job holding resources (running, or stopping after a preemption).
struct RunningJob {
  std::string job_id;
  uint32_t uid = 0;
  int32_t priority = 0;
  int64_t submit_seq = 0;
  std::vector<int> gpus;  // GPU indices it holds
  int64_t host_bytes = 0;
  int64_t pinned_bytes = 0;
  bool preempting = false;  // already asked to checkpoint and stop for a preemption
};

// Per-user limits; 0 = no limit.
struct UserQuota {
  int32_t max_gpus = 0;          // GPUs held by the user's running jobs together
  int32_t max_running_jobs = 0;  // running jobs of the user
  int64_t max_host_bytes = 0;    // host memory of the user's running jobs together (estimates)
  // Queued jobs of the user: enforced when a job is submitted (the job store counts them), not by
  // the scheduler.
  int32_t max_queued_jobs = 0;
};

struct Quotas {
  UserQuota defaults;  // for every uid without its own entry
  std::map<uint32_t, UserQuota> per_uid;

  const UserQuota& For(uint32_t uid) const {
    auto it = per_uid.find(uid);
    return it == per_uid.end() ? defaults : it->second;
  }
};

// "spread", "pack".
const char* PlacementName(Placement placement);

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_SCHEDULER_RESOURCES_H_
