#include "host/planner/nodes/nodes.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace mobius::planner {
namespace {

absl::Status Prefixed(const std::string& field, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(field, ": ", s.message()));
}

}  // namespace

absl::Status CheckNodeSplit(const JobShape& job, int nodes) {
  if (nodes < 1) return absl::InvalidArgumentError(absl::StrCat("must be >= 1 (got ", nodes, ")"));
  if (job.microbatch < 1 || job.global_batch < 1) return absl::OkStatus();  // MakePlan says why
  if (job.global_batch % job.microbatch != 0) return absl::OkStatus();      // ditto
  const int64_t microbatches = job.global_batch / job.microbatch;
  if (microbatches % nodes == 0) return absl::OkStatus();
  std::vector<int64_t> fit;  // node counts that split it: the divisors of M, up to a few
  for (int64_t n = 1; n <= microbatches && fit.size() < 8; ++n) {
    if (microbatches % n == 0) fit.push_back(n);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      nodes, " nodes do not split the global batch of ", job.global_batch, " sequences (",
      microbatches, " microbatches of ", job.microbatch,
      ") into whole microbatches per node; node counts that do: ", absl::StrJoin(fit, ", "),
      fit.size() == 8 ? ", ..." : "", " (or a global batch that is a multiple of ",
      int64_t{nodes} * job.microbatch, ")"));
}

absl::StatusOr<NodesReport> PlanNodes(const model::ModelDescription& model,
                                      const topology::Topology& topology,
                                      const topology::TopologyFacts& facts, const JobShape& job,
                                      const PlanOptions& options, const NodesOptions& nodes) {
  if (nodes.nodes.empty()) return absl::InvalidArgumentError("nodes: no node count given");
  for (int n : nodes.nodes) {
    if (absl::Status s = CheckNodeSplit(job, n); !s.ok()) return Prefixed("nodes", s);
    sim::InterNodeConfig c;
    c.nodes = n;
    c.link = nodes.link;
    c.bucket_bytes = nodes.bucket_bytes;
    MOBIUS_RETURN_IF_ERROR(sim::ValidateInterNode(c));
  }
  NodesReport r;
  r.options = nodes;
  PlanOptions reference = options;
  reference.internode = {};
  reference.compare = false;
  reference.trace = false;
  MOBIUS_ASSIGN_OR_RETURN(r.single_node, MakePlan(model, topology, facts, job, reference));
  for (int n : nodes.nodes) {
    NodeScaling row;
    row.nodes = n;
    row.node_batch = job.global_batch / n;
    JobShape share = job;
    share.global_batch = row.node_batch;
    PlanOptions o = options;
    o.internode.nodes = n;
    o.internode.link = nodes.link;
    o.internode.bucket_bytes = nodes.bucket_bytes;
    absl::StatusOr<PlanReport> plan = MakePlan(model, topology, facts, share, o);
    if (!plan.ok()) {
      return absl::Status(plan.status().code(),
                          absl::StrCat(n, " nodes (", row.node_batch, " sequences per node): ",
                                       plan.status().message()));
    }
    row.plan = *std::move(plan);
    row.step_seconds = row.plan.step_seconds;
    row.tokens_per_second =
        row.step_seconds > 0
            ? static_cast<double>(job.global_batch * job.seq_len) / row.step_seconds
            : 0;
    row.speedup = row.step_seconds > 0 ? r.single_node.step_seconds / row.step_seconds : 0;
    row.efficiency = row.speedup / n;
    r.rows.push_back(std::move(row));
  }
  return r;
}

}  // namespace mobius::planner
