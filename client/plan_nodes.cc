// `mobius plan --nodes`: the multi-node prediction's options, text and JSON (plan_command_internal.h).
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/exit_codes.h"
#include "client/plan_command_internal.h"
#include "common/run/schedule.h"
#include "nlohmann/json.hpp"
#include "host/planner/nodes/nodes.h"

namespace mobius::cli::plan_internal {
namespace {

using planner::PlanReport;

// --- Several nodes (--nodes) ---

constexpr char kNodesPlannedOnly[] =
    "predicted; run it with one `mobius run` per node (docs/multinode.md)";

absl::StatusOr<planner::NodesOptions> MakeNodesOptions(const PlanCommandOptions& o,
                                                       const planner::JobShape& job) {
  planner::NodesOptions n;
  n.nodes.clear();
  for (absl::string_view part : absl::StrSplit(o.nodes, ',')) {
    int count = 0;
    if (!absl::SimpleAtoi(part, &count)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nodes: '", std::string(part),
          "' is not a node count (expected N or a list, e.g. --nodes 1,2,4,8)"));
    }
    if (count < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--nodes: must be >= 1 (got ", count, ")"));
    }
    // --schedule as typed (the edge: "auto" or a name; MakeOptions parses it for the planner).
    const runtime::ScheduleTraits* t = runtime::TraitsOfName(o.schedule);
    if (count > 1 && t != nullptr && (t->weights_resident || !t->runs_on_pipeline_runtime)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nodes ", count, " with --schedule ", o.schedule,
          ": several nodes are planned for the mobius and roundrobin schedules only"));
    }
    if (absl::Status s = planner::CheckNodeSplit(job, count); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--nodes: ", s.message()));
    }
    n.nodes.push_back(count);
  }
  if (!(o.internode_gbps > 0) || !std::isfinite(o.internode_gbps)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--internode-gbps: the inter-node link's rate must be > 0 Gb/s (got ", o.internode_gbps,
        ")"));
  }
  if (!(o.internode_latency_us >= 0) || !std::isfinite(o.internode_latency_us)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--internode-latency-us: must be >= 0 microseconds (got ", o.internode_latency_us, ")"));
  }
  if (!(o.allreduce_bucket_mib >= 0) || !std::isfinite(o.allreduce_bucket_mib)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--allreduce-bucket-mib: must be >= 0, 0 for one bucket per stage (got ",
        o.allreduce_bucket_mib, ")"));
  }
  n.link.bytes_per_s = o.internode_gbps * 1e9 / 8;
  n.link.latency_seconds = o.internode_latency_us * 1e-6;
  n.bucket_bytes = static_cast<int64_t>(o.allreduce_bucket_mib * (1 << 20));
  return n;
}

std::string LinkLine(const planner::NodesOptions& n) {
  std::string line = absl::StrFormat(
      "%.1f Gb/s per direction per node (%.3f GB/s), latency %.1f us; a ring all-reduce of each "
      "stage's gradients after their offload to host memory, before the stage's optimizer step",
      n.link.bytes_per_s * 8 / 1e9, n.link.bytes_per_s / 1e9, n.link.latency_seconds * 1e6);
  if (n.bucket_bytes > 0) {
    absl::StrAppend(&line, absl::StrFormat(", in buckets of %.1f MiB",
                                           n.bucket_bytes / double(1 << 20)));
  }
  return line;
}

void PrintNodesText(const PlanCommandOptions& o, const model::ModelDescription& m,
                    const planner::NodesReport& r, const ProfileChoice& profile,
                    std::ostream& out) {
  const PlanReport& one = r.single_node;
  out << "Several nodes: " << kNodesPlannedOnly << "\n";
  out << ModelLine(m, o.model, one.parameters);
  out << absl::StrFormat(
      "Job: global batch %d sequences x %d tokens, microbatch %d; each node %d GPUs (%s)\n",
      o.batch, o.seq, o.microbatch, one.num_gpus, one.device);
  out << absl::StrFormat("Profile: %s\n", ProfileLine(one, profile));
  out << absl::StrFormat("Training: %s\n", TrainingLine(one));
  out << "Inter-node link: " << LinkLine(r.options) << "\n";
  out << absl::StrFormat(
      "One node, the whole batch: %.3f s/step, %.0f tokens/s (schedule %s, %d stages)\n\n",
      one.step_seconds, one.tokens_per_second, runtime::ScheduleName(one.plan.schedule),
      one.plan.num_stages());
  out << absl::StrFormat("  %5s %10s %6s %10s %10s %10s %9s %9s %9s %10s %8s %10s\n", "nodes",
                         "batch/node", "stages", "node s", "reduced", "sent", "ring s",
                         "exposed s", "step s", "tokens/s", "speedup", "efficiency");
  for (const planner::NodeScaling& row : r.rows) {
    const planner::InterNodeReport& in = row.plan.internode;
    const double alone =
        row.nodes > 1 ? in.step_without_allreduce_seconds : row.step_seconds;
    out << absl::StrFormat("  %5d %10d %6d %10.3f %10s %10s %9.3f %9.3f %9.3f %10.0f %7.2fx %9.1f%%\n",
                           row.nodes, row.node_batch, row.plan.plan.num_stages(), alone,
                           Gib(in.allreduce_bytes), Gib(in.sent_bytes), in.allreduce_seconds,
                           in.exposed_seconds, row.step_seconds, row.tokens_per_second,
                           row.speedup, 100 * row.efficiency);
  }
  out << "  (node s: one node's step on its share without the all-reduce; reduced: the gradient "
         "bytes all-reduced per step; sent: what each node sends and receives; ring s: the "
         "link's busy time; exposed s: what the all-reduce adds to the step)\n";
  for (const planner::NodeScaling& row : r.rows) {
    if (row.nodes > 1 && row.step_seconds > one.step_seconds) {
      out << absl::StrFormat(
          "Slower than one node at %d nodes: %.3f s exposed all-reduce outweighs the smaller "
          "share; a faster link, LoRA (adapter gradients only) or a larger global batch\n",
          row.nodes, row.plan.internode.exposed_seconds);
    }
  }
  if (r.rows.size() != 1 || r.rows[0].nodes < 2) return;
  const planner::NodeScaling& row = r.rows[0];
  const planner::InterNodeReport& in = row.plan.internode;
  out << absl::StrFormat(
      "\n%d nodes: %d sequences per node, %.3f s per node without the all-reduce; the "
      "all-reduce reduces %s per step (%d bytes/gradient), each node sends and receives %s, "
      "%.3f s on the link, %.3f s exposed; predicted step %.3f s, %.0f tokens/s, %.2fx one "
      "node (scaling efficiency %.1f%%)\n",
      row.nodes, row.node_batch, in.step_without_allreduce_seconds, Gib(in.allreduce_bytes),
      one.gradient_bytes_per_parameter, Gib(in.sent_bytes), in.allreduce_seconds,
      in.exposed_seconds, row.step_seconds, row.tokens_per_second, row.speedup,
      100 * row.efficiency);
  out << "\nAll-reduce per stage (times in s from the simulated start; stages in the order their "
         "backward ends):\n";
  out << absl::StrFormat("  %-5s %12s %9s %12s %20s %13s\n", "stage", "gradients", "ring s",
                         "backward end", "all-reduce", "optimizer end");
  std::vector<planner::StageAllReduce> by_end = in.stages;
  std::stable_sort(by_end.begin(), by_end.end(), [](const auto& a, const auto& b) {
    return a.backward_end < b.backward_end;
  });
  for (const planner::StageAllReduce& s : by_end) {
    out << absl::StrFormat("  %-5d %12s %9.3f %12.3f %20s %13.3f\n", s.stage, Gib(s.bytes),
                           s.seconds, s.backward_end,
                           s.bytes > 0 ? absl::StrFormat("%.3f - %.3f", s.start, s.end)
                                       : std::string("-"),
                           s.optimizer_end);
  }
}

nlohmann::ordered_json NodesToJson(const PlanCommandOptions& o, const model::ModelDescription& m,
                                   const planner::NodesReport& r, const ProfileChoice& profile) {
  using nlohmann::ordered_json;
  const PlanReport& one = r.single_node;
  ordered_json j;
  j["model"] = {{"path", o.model}, {"model_type", m.config.model_type},
                {"parameters", one.parameters}, {"units", m.num_units()}};
  j["job"] = {{"global_batch", o.batch}, {"microbatch", o.microbatch}, {"seq_len", o.seq}};
  ordered_json rows = ordered_json::array();
  for (const planner::NodeScaling& row : r.rows) {
    const planner::InterNodeReport& in = row.plan.internode;
    ordered_json stages = ordered_json::array();
    for (const planner::StageAllReduce& s : in.stages) {
      stages.push_back({{"stage", s.stage}, {"bytes", s.bytes}, {"seconds", s.seconds},
                        {"backward_end", s.backward_end}, {"start", s.start}, {"end", s.end},
                        {"optimizer_end", s.optimizer_end}});
    }
    PlanCommandOptions share = o;
    share.batch = row.node_batch;
    rows.push_back(
        {{"nodes", row.nodes},
         {"node_batch", row.node_batch},
         {"node_step_seconds",
          row.nodes > 1 ? in.step_without_allreduce_seconds : row.step_seconds},
         {"allreduce_bytes", in.allreduce_bytes},
         {"sent_bytes", in.sent_bytes},
         {"allreduce_seconds", in.allreduce_seconds},
         {"exposed_seconds", in.exposed_seconds},
         {"step_seconds", row.step_seconds},
         {"tokens_per_second", row.tokens_per_second},
         {"speedup", row.speedup},
         {"efficiency", row.efficiency},
         {"stages", stages},
         {"plan", ToJson(share, m, row.plan, profile)}});
  }
  j["nodes"] = {{"planned_only", true},
                {"note", kNodesPlannedOnly},
                {"link",
                 {{"gbps", r.options.link.bytes_per_s * 8 / 1e9},
                  {"bytes_per_s", r.options.link.bytes_per_s},
                  {"latency_seconds", r.options.link.latency_seconds},
                  {"bucket_bytes", r.options.bucket_bytes}}},
                {"single_node",
                 {{"step_seconds", one.step_seconds},
                  {"tokens_per_second", one.tokens_per_second},
                  {"num_stages", one.plan.num_stages()}}},
                {"rows", rows}};
  return j;
}


}  // namespace

int RunPlanNodes(const PlanCommandOptions& o, const model::ModelDescription& model,
                 const Server& server, const planner::JobShape& job,
                 const planner::PlanOptions& options, const ProfileChoice& profile,
                 std::ostream& out, std::ostream& err) {
  absl::StatusOr<planner::NodesOptions> nodes = MakeNodesOptions(o, job);
  if (!nodes.ok()) {
    err << "mobius plan: " << nodes.status().message() << "\n";
    return kExitUsage;
  }
  planner::PlanOptions per_node = options;
  per_node.compare = false;  // the comparison table is the single-node output's
  auto report =
      planner::PlanNodes(model, server.topology, server.facts, job, per_node, *nodes);
  if (!report.ok()) {
    err << "mobius plan: " << report.status().message() << "\n";
    return PlanExitCode(report.status());
  }
  if (!o.trace.empty()) {
    if (absl::Status s = WriteTrace(o.trace, report->rows.back().plan.chrome_trace_json);
        !s.ok()) {
      err << "mobius plan: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  if (o.json) {
    out << NodesToJson(o, model, *report, profile).dump(2) << "\n";
  } else {
    PrintNodesText(o, model, *report, profile, out);
    if (!o.trace.empty()) {
      out << "\nTrace (" << report->rows.back().nodes << " nodes, one node's step with its "
          << "all-reduces): " << o.trace << " (open in https://ui.perfetto.dev)\n";
    }
  }
  return kExitOk;
}


}  // namespace mobius::cli::plan_internal
