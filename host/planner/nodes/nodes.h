// Several nodes: a job's global batch split over N identical servers (data parallelism, issue 20),
// planned and predicted (`mobius plan --nodes`); the runtime: docs/multinode.md. docs/planner.md,
// "Several nodes".
//
//   global batch B, nodes N -> each node: MakePlan at B / N sequences with PlanOptions::internode
//   (the same single-node planner and simulator; each stage's gradients all-reduced across the
//   nodes before its optimizer step, sim/internode.h) -> the multi-node step = that node's step
//   -> against one node running all of B (MakePlan, no all-reduce): speedup and efficiency.
//
//   tokens/s   = B x seq / step_N
//   speedup    = step_1 / step_N            (the same global batch, strong scaling)
//   efficiency = speedup / N
//
// The model assumes identical nodes in lockstep (no straggler, no skew), a dedicated inter-node
// link per node (a non-blocking switch), the all-reduce on the host copy of the gradients (after
// the gradient offload, where the CPU optimizer reads them), every node updating its full replica
// (no optimizer sharding), and nothing of the all-reduce on the DRAM or PCIe links.
//
// Pure (no I/O); thread-safe.
#ifndef MOBIUS_HOST_PLANNER_NODES_NODES_H_
#define MOBIUS_HOST_PLANNER_NODES_NODES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "host/planner/api/make_plan.h"
#include "host/planner/sim/internode.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::planner {

struct NodesOptions {
  std::vector<int> nodes = {1};  // node counts to plan, each >= 1 (e.g. {1, 2, 4, 8})
  sim::InterNodeLink link;       // defaults: 25 GbE, 20 us (sim/internode.h)
  int64_t bucket_bytes = 0;      // sim::InterNodeConfig::bucket_bytes
};

// One node count.
struct NodeScaling {
  int nodes = 1;
  int64_t node_batch = 0;      // sequences per node per step (global batch / nodes)
  // What every node runs: MakePlan at node_batch with the all-reduce (internode.nodes = nodes;
  // for 1 node exactly MakePlan of the whole job). step_seconds is the multi-node step;
  // internode has the all-reduce's bytes, time and exposure; tokens_per_second is ONE node's.
  PlanReport plan;
  double step_seconds = 0;        // the predicted multi-node step
  double tokens_per_second = 0;   // all nodes: global batch x seq / step
  double speedup = 0;             // single-node step of the whole batch / step_seconds
  double efficiency = 0;          // speedup / nodes
};

struct NodesReport {
  PlanReport single_node;         // the whole global batch on one node (the reference)
  NodesOptions options;
  std::vector<NodeScaling> rows;  // in the order of NodesOptions::nodes
};

// OK when `nodes` identical nodes split the job's global batch into whole microbatches each;
// otherwise INVALID_ARGUMENT whose message (without a field name; PlanNodes prefixes "nodes: ")
// gives the numbers and node counts that would work.
absl::Status CheckNodeSplit(const JobShape& job, int nodes);

// INVALID_ARGUMENT naming the field: no node count, a count < 1 or that does not split the batch
// ("nodes: ..."), a bad link ("internode.bytes_per_s", "internode.latency_seconds",
// "internode.bucket_bytes"); the schedule resident or zero with a count > 1; and whatever
// MakePlan returns for the whole job or a node's share (a node's share that does not fit, ...).
// `options.compare` is honoured for the per-node plans only (the reference never compares).
absl::StatusOr<NodesReport> PlanNodes(const model::ModelDescription& model,
                                      const topology::Topology& topology,
                                      const topology::TopologyFacts& facts, const JobShape& job,
                                      const PlanOptions& options, const NodesOptions& nodes);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_NODES_NODES_H_
