// Data parallelism across servers (issue 20), as the simulator models it; the runtime's side is
// worker/runtime/node_collective.h (docs/multinode.md). docs/planner.md, "Several nodes".
//
// N identical nodes each run the same single-node plan on global_batch / N sequences. After a
// stage's backward has offloaded its gradients to host memory (where the CPU optimizer reads them),
// the stage's gradients are all-reduced across the nodes with a ring all-reduce before the stage's
// optimizer step. Nodes are symmetric and in lockstep, so "done on every node" is "done on this
// one": one node is simulated, the all-reduces run on an extra list-scheduled stream (the node's
// inter-node link: one all-reduce at a time, in the order the stages' gradients become ready).
//
// Ring all-reduce of B bytes over N nodes (reduce-scatter then all-gather, 2 (N - 1) steps of
// B / N bytes each; Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
// Operations in MPICH", IJHPCA 2005; the ring algorithm of NCCL and Gloo):
//
//   t(B, N) = 2 (N - 1) / N x B / bytes_per_s + 2 (N - 1) x latency_seconds
//
// bytes_per_s is what one node sends (and at the same time receives) per second: a full-duplex
// link's rate in one direction, i.e. what nccl-tests' all_reduce_perf reports as "busbw". The
// reduction arithmetic (B (N - 1) / N additions per node) is not charged.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_SIM_INTERNODE_H_
#define MOBIUS_HOST_PLANNER_SIM_INTERNODE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace mobius::planner::sim {

// 25 Gb/s Ethernet (IEEE 802.3by, the common add-on NIC of commodity GPU servers): its line rate
// in bytes/s per direction. TCP over a 1500-byte MTU carries ~95% of it as payload; give a
// measured busbw where there is one.
inline constexpr double kDefaultInterNodeBytesPerSecond = 25e9 / 8;
// One message's one-way latency on switched 10/25 GbE through the kernel's TCP stack (tens of
// microseconds; RDMA: a few). Irrelevant for buckets of megabytes.
inline constexpr double kDefaultInterNodeLatencySeconds = 20e-6;

struct InterNodeLink {
  double bytes_per_s = kDefaultInterNodeBytesPerSecond;  // per direction, per node; +inf: ideal
  double latency_seconds = kDefaultInterNodeLatencySeconds;  // per ring step (one message)
};

struct InterNodeConfig {
  int nodes = 1;  // 1: no all-reduce at all (the single-node simulation, unchanged)
  InterNodeLink link;
  // > 0: each stage's gradients are all-reduced in buckets of at most this many bytes, bucket i
  // once the gradient offload chunks holding its bytes are in host memory; 0: one bucket per stage
  // (after the stage's whole offload).
  int64_t bucket_bytes = 0;

  bool enabled() const { return nodes > 1; }
};

// The ring formula above; 0 for nodes <= 1 or bytes <= 0.
double RingAllReduceSeconds(int64_t bytes, int nodes, const InterNodeLink& link);
// What each node sends (and receives) for one all-reduce: 2 (N - 1) / N x bytes (0 for N <= 1).
int64_t RingAllReduceSentBytes(int64_t bytes, int nodes);
// A stage's buckets: `bytes` cut into pieces of at most bucket_bytes (0: one piece); none for 0.
std::vector<int64_t> AllReduceBuckets(int64_t bytes, int64_t bucket_bytes);
// The ring time of a stage's gradients in its buckets (the latency term once per bucket).
double StageAllReduceSeconds(int64_t bytes, const InterNodeConfig& config);

// INVALID_ARGUMENT naming the field (internode.nodes, internode.bytes_per_s,
// internode.latency_seconds, internode.bucket_bytes): nodes < 1, a rate not > 0 (NaN included),
// a negative or non-finite latency, a negative bucket size.
absl::Status ValidateInterNode(const InterNodeConfig& config);

}  // namespace mobius::planner::sim

#endif  // MOBIUS_HOST_PLANNER_SIM_INTERNODE_H_
