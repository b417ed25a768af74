// `mobius plan`'s comparison of a LoRA plan with the other frozen base (plan_command_internal.h).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/plan_command_internal.h"

namespace mobius::cli::plan_internal {
namespace {

constexpr double kBytesPerGiB = double(int64_t{1} << 30);

}  // namespace

std::optional<BaseComparison> CompareBase(const model::ModelDescription& m, const Server& server,
                                          const planner::JobShape& job,
                                          const planner::PlanOptions& options) {
  if (!options.lora.enabled()) return std::nullopt;
  planner::PlanOptions other = options;
  other.lora.base_nf4 = !options.lora.base_nf4;
  other.trace = false;
  return BaseComparison{other.lora.base_nf4,
                        planner::MakePlan(m, server.topology, server.facts, job, other)};
}

std::string BaseLine(const BaseComparison& c, const planner::PlanReport& r) {
  const char* name = c.nf4 ? "an NF4 base" : "a bf16 base";
  if (!c.report.ok()) {
    return absl::StrCat("With ", name, " instead: does not plan (", c.report.status().message(),
                        ")\n");
  }
  const planner::PlanReport& o = *c.report;
  return absl::StrFormat(
      "With %s instead: %.0f tokens/s (%.2fx), host %.1f GiB (%.1f GiB here), weight uploads "
      "%.1f GiB/step (%.1f here)\n",
      name, o.tokens_per_second, o.tokens_per_second / std::max(r.tokens_per_second, 1e-9),
      o.plan.memory.host_bytes / kBytesPerGiB, r.plan.memory.host_bytes / kBytesPerGiB,
      o.weight_upload_bytes / kBytesPerGiB, r.weight_upload_bytes / kBytesPerGiB);
}

nlohmann::ordered_json BaseJson(const BaseComparison& c) {
  nlohmann::ordered_json j = {{"base", c.nf4 ? "nf4" : "bf16"}};
  if (!c.report.ok()) {
    j["error"] = std::string(c.report.status().message());
    return j;
  }
  j["tokens_per_second"] = c.report->tokens_per_second;
  j["host_bytes"] = c.report->plan.memory.host_bytes;
  j["weight_upload_bytes"] = c.report->weight_upload_bytes;
  return j;
}

}  // namespace mobius::cli::plan_internal
