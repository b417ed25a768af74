#include "worker/runtime/run_command.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <iostream>

#include "absl/strings/numbers.h"
#include "glog/logging.h"
#include "worker/runtime/pipeline_worker.h"
#include "common/run/checkpoint_owner.h"
#include "common/run/run_config.h"
#include "common/subprocess.h"
#include "common/run/step_report.h"

namespace mobius::runtime {

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
  // (common/run/checkpoint_owner.h): another job's directory is refused.
  if (rank == 0 && !config->training.checkpoint_dir.empty()) {
    absl::Status claimed =
        checkpoint::ClaimCheckpointDir(config->training.checkpoint_dir, config->job_id);
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
  return 0;
}

}  // namespace mobius::runtime
