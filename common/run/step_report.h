// Step reports: how a worker tells its launcher what a step did, and what the launcher makes of
// all ranks' reports for one step.
//
// Wire format: a worker writes one line per step on stdout, "@report " + a JSON object
// (WorkerReportToLine); everything else a worker prints is log. The launcher parses the lines
// (ParseWorkerReportLine) and, once every rank reported step k, aggregates them (AggregateStep):
// loss and grad norm from the ranks that know them, compute / stall / optimizer seconds as the
// maximum over ranks (the slowest rank sets the pace), bytes summed.
//
// Value types; pure functions.
#ifndef MOBIUS_COMMON_RUN_STEP_REPORT_H_
#define MOBIUS_COMMON_RUN_STEP_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mobius::runtime {

// One rank's account of one step (the launcher aggregates them; step_report.h).
struct WorkerStepReport {
  int rank = 0;
  int64_t step = 0;            // global step number (resumed runs continue the count)
  int64_t total_steps = 0;
  std::optional<float> loss;   // from the rank that runs the head
  std::optional<float> eval_loss;  // the head's rank, on eval steps: held-out loss after the update
  double lr = 0;
  double grad_norm = 0;
  // fp16 (train/loss_scaler.h), from the rank that summed the norm: the loss scale the step used
  // and whether it was skipped (its gradients overflowed; nothing was updated). 0 / false else.
  float loss_scale = 0;
  bool skipped = false;
  int64_t tokens = 0;          // B * T (the same on every rank)
  double step_seconds = 0;     // this rank's wall time for the step
  double compute_seconds = 0;  // waiting for its own compute queue
  double stall_seconds = 0;    // waiting for weights (prefetch), activations, gradients, updates
  double optimizer_seconds = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0;
  uint64_t peer_bytes = 0;     // activation gradients sent + received over the PeerTransport
  uint64_t internode_bytes = 0;  // several nodes: gradient all-reduce bytes this rank sent
  int passes = 0;              // stage passes (forwards + backwards) this rank ran in the step
  // Of those, passes whose weights were not prefetched while the previous pass computed: their
  // upload started when the pass came, which waited for the whole copy (the first pass of a run
  // always; after that a sign of a pipeline waiting on updates or on a full slot).
  int uploads_on_demand = 0;
  // Rank 0: a checkpoint completed since its previous report, if any (checkpoints are written
  // while training goes on: the one of step k completes during a later step, the last one before
  // the last report).
  std::string checkpoint;
  int64_t checkpoint_step = 0;  // the step it holds
};

inline constexpr char kReportPrefix[] = "@report ";

std::string WorkerReportToLine(const WorkerStepReport& report);
// INVALID_ARGUMENT unless `line` is kReportPrefix + a report's JSON.
absl::StatusOr<WorkerStepReport> ParseWorkerReportLine(absl::string_view line);

struct StepReport {
  int64_t step = 0, total_steps = 0;
  float loss = 0;
  std::optional<float> eval_loss;  // eval steps only
  double lr = 0, grad_norm = 0;
  float loss_scale = 0;          // fp16: the step's loss scale (0: bf16)
  bool skipped = false;          // fp16: the step's gradients overflowed, nothing was updated
  int64_t tokens = 0;
  double step_seconds = 0;       // launcher wall time between consecutive completed steps
  double tokens_per_second = 0;
  double compute_seconds = 0, stall_seconds = 0, optimizer_seconds = 0;  // max over ranks
  uint64_t h2d_bytes = 0, d2h_bytes = 0;                                 // all ranks
  uint64_t peer_bytes = 0;       // all ranks (each transfer counted by sender and receiver)
  uint64_t internode_bytes = 0;  // all ranks of this node: sent to other nodes (all-reduces)
  int uploads_on_demand = 0;     // all ranks (WorkerStepReport::uploads_on_demand)
  std::string checkpoint;        // completed since the previous report (WorkerStepReport)
  int64_t checkpoint_step = 0;
  bool emulated = false;         // link emulation was on
  std::vector<WorkerStepReport> ranks;  // the per-rank reports this aggregates, by rank
  // Bytes that crossed each emulated link (RunConfig::links order) since the job started, all
  // ranks: {host -> device, device -> host}. Empty without emulation.
  std::vector<std::pair<uint64_t, uint64_t>> link_bytes;
};

// REQUIRES: `ranks` holds one report per rank for the same step.
StepReport AggregateStep(const std::vector<WorkerStepReport>& ranks, double step_seconds,
                         bool emulated);

// "step 12/100 | loss 3.4521 | lr 3.00e-04 | grad_norm 1.234 | tok/s 1234 | 456 ms |
//  stall 12 ms | h2d 1.2 GB" (+ " | peer 3.4 MB" with a PeerTransport, " | eval loss 3.5012" on
//  eval steps)
std::string FormatStepReport(const StepReport& report);

}  // namespace mobius::runtime

#endif  // MOBIUS_COMMON_RUN_STEP_REPORT_H_
