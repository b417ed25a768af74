#include "common/run/step_report.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace mobius::runtime {

using nlohmann::json;

std::string WorkerReportToLine(const WorkerStepReport& r) {
  json j = {{"rank", r.rank},
            {"step", r.step},
            {"total_steps", r.total_steps},
            {"lr", r.lr},
            {"grad_norm", r.grad_norm},
            {"loss_scale", r.loss_scale},
            {"skipped", r.skipped},
            {"tokens", r.tokens},
            {"step_seconds", r.step_seconds},
            {"compute_seconds", r.compute_seconds},
            {"stall_seconds", r.stall_seconds},
            {"optimizer_seconds", r.optimizer_seconds},
            {"h2d_bytes", r.h2d_bytes},
            {"d2h_bytes", r.d2h_bytes},
            {"peer_bytes", r.peer_bytes}, {"internode_bytes", r.internode_bytes},
            {"passes", r.passes},
            {"uploads_on_demand", r.uploads_on_demand},
            {"checkpoint", r.checkpoint},
            {"checkpoint_step", r.checkpoint_step}};
  if (r.loss) j["loss"] = *r.loss;
  if (r.eval_loss) j["eval_loss"] = *r.eval_loss;
  return absl::StrCat(kReportPrefix, j.dump());
}

absl::StatusOr<WorkerStepReport> ParseWorkerReportLine(absl::string_view line) {
  if (!absl::StartsWith(line, kReportPrefix)) {
    return absl::InvalidArgumentError("not a report line");
  }
  line.remove_prefix(sizeof(kReportPrefix) - 1);
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("report line: not a JSON object");
  }
  WorkerStepReport r;
  try {
    r.rank = j.at("rank").get<int>();
    r.step = j.at("step").get<int64_t>();
    r.total_steps = j.value("total_steps", int64_t{0});
    r.lr = j.value("lr", 0.0);
    r.grad_norm = j.value("grad_norm", 0.0);
    r.loss_scale = j.value("loss_scale", 0.0f);
    r.skipped = j.value("skipped", false);
    r.tokens = j.value("tokens", int64_t{0});
    r.step_seconds = j.value("step_seconds", 0.0);
    r.compute_seconds = j.value("compute_seconds", 0.0);
    r.stall_seconds = j.value("stall_seconds", 0.0);
    r.optimizer_seconds = j.value("optimizer_seconds", 0.0);
    r.h2d_bytes = j.value("h2d_bytes", uint64_t{0});
    r.d2h_bytes = j.value("d2h_bytes", uint64_t{0});
    r.peer_bytes = j.value("peer_bytes", uint64_t{0});
    r.internode_bytes = j.value("internode_bytes", uint64_t{0});
    r.passes = j.value("passes", 0);
    r.uploads_on_demand = j.value("uploads_on_demand", 0);
    r.checkpoint = j.value("checkpoint", std::string());
    r.checkpoint_step = j.value("checkpoint_step", int64_t{0});
    if (j.contains("loss")) r.loss = j.at("loss").get<float>();
    if (j.contains("eval_loss")) r.eval_loss = j.at("eval_loss").get<float>();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("report line: ", e.what()));
  }
  return r;
}

StepReport AggregateStep(const std::vector<WorkerStepReport>& ranks, double step_seconds,
                         bool emulated) {
  StepReport a;
  a.emulated = emulated;
  a.step_seconds = step_seconds;
  for (const WorkerStepReport& r : ranks) {
    a.step = r.step;
    a.total_steps = r.total_steps;
    a.lr = r.lr;
    a.grad_norm = std::max(a.grad_norm, r.grad_norm);  // identical on every rank
    a.loss_scale = std::max(a.loss_scale, r.loss_scale);  // the summing rank's
    a.skipped = a.skipped || r.skipped;
    a.tokens = r.tokens;
    if (r.loss) a.loss = *r.loss;
    if (r.eval_loss) a.eval_loss = r.eval_loss;
    a.compute_seconds = std::max(a.compute_seconds, r.compute_seconds);
    a.stall_seconds = std::max(a.stall_seconds, r.stall_seconds);
    a.optimizer_seconds = std::max(a.optimizer_seconds, r.optimizer_seconds);
    a.h2d_bytes += r.h2d_bytes;
    a.d2h_bytes += r.d2h_bytes;
    a.peer_bytes += r.peer_bytes;
    a.internode_bytes += r.internode_bytes;
    a.uploads_on_demand += r.uploads_on_demand;
    if (!r.checkpoint.empty()) {
      a.checkpoint = r.checkpoint;
      a.checkpoint_step = r.checkpoint_step;
    }
  }
  a.tokens_per_second = step_seconds > 0 ? a.tokens / step_seconds : 0;
  a.ranks = ranks;
  std::sort(a.ranks.begin(), a.ranks.end(),
            [](const WorkerStepReport& x, const WorkerStepReport& y) { return x.rank < y.rank; });
  return a;
}

std::string FormatStepReport(const StepReport& r) {
  std::string line = absl::StrFormat(
      "step %d/%d | loss %.4f | lr %.2e | grad_norm %.3f | tok/s %.0f | %.0f ms | stall %.0f ms | "
      "h2d %.1f MB | d2h %.1f MB",
      r.step, r.total_steps, r.loss, r.lr, r.grad_norm, r.tokens_per_second, r.step_seconds * 1e3,
      r.stall_seconds * 1e3, r.h2d_bytes / 1e6, r.d2h_bytes / 1e6);
  if (r.peer_bytes > 0) line += absl::StrFormat(" | peer %.1f MB", r.peer_bytes / 1e6);
  if (r.internode_bytes > 0) {
    line += absl::StrFormat(" | to other nodes %.1f MB", r.internode_bytes / 1e6);
  }
  if (r.eval_loss) line += absl::StrFormat(" | eval loss %.4f", *r.eval_loss);
  if (r.skipped) {
    line += absl::StrFormat(" | skipped (overflow at loss scale %g)", r.loss_scale);
  } else if (r.loss_scale > 0) {
    line += absl::StrFormat(" | loss scale %g", r.loss_scale);
  }
  if (r.emulated) line += " | emulated links";
  return line;
}

}  // namespace mobius::runtime
