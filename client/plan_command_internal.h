// Internal to `mobius plan` (client/plan_command.cc and client/plan_nodes.cc): what the
// multi-node output shares with the single-node one. Not an interface for other verbs.
#ifndef MOBIUS_CLIENT_PLAN_COMMAND_INTERNAL_H_
#define MOBIUS_CLIENT_PLAN_COMMAND_INTERNAL_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "client/plan_command.h"
#include "common/model/layer_units.h"
#include "host/planner/api/make_plan.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::cli::plan_internal {

struct Server {
  topology::Topology topology;
  topology::TopologyFacts facts;
};

// Where the profile came from, for the output.
struct ProfileChoice {
  std::optional<planner::Profile> profile;  // nullopt: analytic
  std::string path;                         // the measured profile's file
  std::string backend;
};

std::string Gib(int64_t bytes);  // "1.23 GiB"
// "analytic (RTX 4090), gradients fp32 (4 bytes/parameter)" and the like.
std::string ProfileLine(const planner::PlanReport& r, const ProfileChoice& c);
// "Model: TYPE (PATH), 8.03B parameters", and for a mixture of experts what a token uses and that
// the runtime cannot train it yet (issue 32), newline-terminated.
std::string ModelLine(const model::ModelDescription& m, const std::string& path,
                      int64_t parameters);
// The training mode: full fine-tuning or LoRA's rank, targets and host bytes per parameter.
std::string TrainingLine(const planner::PlanReport& r);
// The single-node plan as `mobius plan --json` prints it.
nlohmann::ordered_json ToJson(const PlanCommandOptions& o, const model::ModelDescription& m,
                              const planner::PlanReport& r, const ProfileChoice& profile);
// Planning is local: an error about the input is a usage error (exit 2).
int PlanExitCode(const absl::Status& s);
// INVALID_ARGUMENT naming the path when it cannot be written.
absl::Status WriteTrace(const std::string& path, const std::string& json);

// A LoRA plan's job made with the other frozen base (bf16 <-> NF4) at the same configuration
// (plan_base.cc): nullopt without LoRA. BaseLine: one line, "With an NF4 base instead: ..." or
// why it does not plan; BaseJson: the same for --json ("other_base").
struct BaseComparison {
  bool nf4 = false;  // the other base's kind
  absl::StatusOr<planner::PlanReport> report;
};
std::optional<BaseComparison> CompareBase(const model::ModelDescription& m, const Server& server,
                                          const planner::JobShape& job,
                                          const planner::PlanOptions& options);
std::string BaseLine(const BaseComparison& c, const planner::PlanReport& r);
nlohmann::ordered_json BaseJson(const BaseComparison& c);

// `mobius plan --nodes N|1,2,4` (plan_nodes.cc): the job planned per node over N nodes with the
// per-stage gradient all-reduce (host/planner/nodes/nodes.h); the documented exit code.
int RunPlanNodes(const PlanCommandOptions& o, const model::ModelDescription& model,
                 const Server& server, const planner::JobShape& job,
                 const planner::PlanOptions& options, const ProfileChoice& profile,
                 std::ostream& out, std::ostream& err);

}  // namespace mobius::cli::plan_internal

#endif  // MOBIUS_CLIENT_PLAN_COMMAND_INTERNAL_H_
