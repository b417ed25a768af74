// `mobius-worker run CONFIG.json RANK`: one rank of a pipeline run (PipelineWorker), started by the
// launcher (launcher.h), never by hand in normal use.
//
// stdout: one step_report.h line per step ("@report {...}"); stderr: log lines.
// The process dies with its parent (PR_SET_PDEATHSIG = SIGKILL), so a launcher that disappears
// leaves no worker behind.
// When every step is done, rank 0 writes the completion record into the checkpoint directory
// (common/run/completion_record.h) before it exits 0; one it cannot write is logged, and the exit
// code stays 0.
// Exit codes: 0 all steps done; 2 bad input found before any step (config, model, data, a device
// cap that cannot hold two stages); 1 a failure while running (including ABORTED: another rank
// failed first); 3 stopped on the launcher's request after writing a checkpoint.
#ifndef MOBIUS_WORKER_RUNTIME_RUN_COMMAND_H_
#define MOBIUS_WORKER_RUNTIME_RUN_COMMAND_H_

#include <string>
#include <vector>

namespace mobius::runtime {

inline constexpr char kRunUsage[] = "mobius-worker run CONFIG.json RANK";

// `args` are the positional arguments, argv[0] first ("run" second). Returns the exit code.
int RunWorkerCommand(const std::vector<std::string>& args);

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_RUN_COMMAND_H_
