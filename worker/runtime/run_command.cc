#include "worker/runtime/run_command.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/run/checkpoint_dirs.h"
#include "common/run/checkpoint_owner.h"
#include "common/run/completion_record.h"
#include "common/run/run_config.h"
#include "common/run/step_report.h"
#include "common/subprocess.h"
#include "glog/logging.h"
#include "worker/runtime/pipeline_worker.h"

namespace mobius::runtime {
namespace {

// Rank 0, after every step is done: the completion record beside the checkpoints
// (completion_record.h), written with this process's own identity. The run has succeeded either
// way: a record that cannot be written (a full disk) is logged, not an error.
void RecordCompletion(const RunConfig& config) {
  const train::TrainerOptions& o = config.training;
  if (o.checkpoint_dir.empty()) return;  // nowhere to put it; nothing to resume from either
  if (config.nodes.rank != 0) return;    // several nodes: node 0 writes the checkpoints
  CompletionRecord record;
  record.job_id = config.job_id;
  record.steps_done = o.steps;
  if (absl::StatusOr<std::string> latest = checkpoint::LatestCheckpoint(o.checkpoint_dir);
      latest.ok()) {
    record.final_checkpoint = *latest;
  }
  record.finished_unix_ms = absl::ToUnixMillis(absl::Now());
  if (absl::Status st = WriteCompletionRecord(o.checkpoint_dir, record); !st.ok()) {
    LOG(WARNING) << "rank 0: all steps done, but the completion record was not written: " << st;
    return;
  }
  LOG(INFO) << "rank 0: completion record " << CompletionRecordPath(o.checkpoint_dir) << " ("
            << DescribeCompletionRecord(record) << ")";
}

}  // namespace

int RunWorkerCommand(const std::vector<std::string>& args) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;  // the launcher died before the line above took effect
  int rank = -1;
  if (args.size() != 4 || !absl::SimpleAtoi(args[3], &rank)) {
    std::cerr << "usage: " << kRunUsage << "\n";
    return 2;
  }
  absl::StatusOr<std::string> text = ReadArgumentText(args[2]);
  absl::StatusOr<RunConfig> config =
      text.ok() ? RunConfigFromJson(*text) : absl::StatusOr<RunConfig>(text.status());
  if (!config.ok()) {
    std::cerr << "error: run config " << args[2] << ": " << config.status() << "\n";
    return 2;
  }
  // Rank 0 claims the checkpoint directory for this job before anything is written there
  // (common/run/checkpoint_owner.h): another job's directory is refused. Several nodes: node 0's
  // rank 0, the only writer.
  if (rank == 0 && config->nodes.rank == 0 && !config->training.checkpoint_dir.empty()) {
    absl::Status claimed =
        checkpoint::ClaimCheckpointDir(config->training.checkpoint_dir, config->job_id,
                                       config->training.checkpoint_group);
    if (!claimed.ok()) {
      std::cerr << "error: rank 0: " << claimed << "\n";
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<PipelineWorker>> worker = PipelineWorker::Create(*config, rank);
  if (!worker.ok()) {
    std::cerr << "error: rank " << rank << ": " << worker.status() << "\n";
    return 2;
  }
  LOG(INFO) << "rank " << rank << " of job " << config->job_id << " ready (CPU backend"
            << (config->links.empty() ? "" : ", emulated PCIe links") << ")";
  absl::Status st = (*worker)->Run([](const WorkerStepReport& report) {
    std::cout << WorkerReportToLine(report) << std::endl;
  });
  if (absl::IsAborted(st) && st.message().find("stopped on request") != absl::string_view::npos) {
    LOG(INFO) << "rank " << rank << ": " << st.message();
    return 3;
  }
  if (!st.ok()) {
    std::cerr << "error: rank " << rank << ": " << st << "\n";
    return 1;
  }
  if (rank == 0) RecordCompletion(*config);
  return 0;
}

}  // namespace mobius::runtime
