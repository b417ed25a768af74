// Launcher: runs one pipeline job: checks the run config against the model and data, creates the
// job's host store, spawns one `mobius-worker run` process per rank, relays their logs and step
// reports, and tears everything down when the job ends or any worker fails. Used by the daemon's
// supervisor and by the one-shot `mobius run`.
//
// Guarantees:
//   - the workers run as LaunchOptions::identity (the daemon: the job's submitter) and get the run
//     config through a sealed memory file (kWorkerConfigFd), the store through another: nothing
//     of the job is a file in a place another user could read, replace or pre-create; a named
//     store (shm_dir) gets an unguessable name, created O_EXCL, mode 0600;
//   - bad input (a plan that does not cover the model, wrong GPU count, missing model or data, a
//     token file shorter than one batch) is reported by Start(), before any worker exists, with the
//     field and the numbers; so is a job that needs more host memory than the machine has now; a device cap that cannot hold two stages is found by the workers while
//     they allocate, before any step, and Wait() returns it as RESOURCE_EXHAUSTED;
//   - when a worker exits with an error or is killed, the launcher reports which rank and why (exit
//     code or signal, and its last log lines) within a poll interval, sets the store's abort word,
//     kills every other worker (SIGKILL after the grace period) and reaps them;
//   - a frozen rank (no heartbeat) or a hung job (no step within step_timeout) is treated like a
//     failed worker: reported with the rank or the last step, everything killed;
//   - the store is gone when Wait() returns, whatever happened: an anonymous store (the default)
//     with the last process holding it; workers die with the launcher process
//     (PR_SET_PDEATHSIG), so not even a SIGKILLed launcher leaves one behind. (A named store file
//     is removed, and CleanOrphanStores removes one a SIGKILLed launcher left.)
//
// Thread-safety: Start, then Wait from one thread; Cancel may be called from any thread at any time.
// The callbacks run on the thread that called Wait.
#ifndef MOBIUS_HOST_LAUNCH_LAUNCHER_H_
#define MOBIUS_HOST_LAUNCH_LAUNCHER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/inspect/launch_checks.h"
#include "common/model/model_config.h"
#include "common/os/identity.h"
#include "common/run/run_config.h"
#include "common/run/step_report.h"

namespace mobius::runtime {

inline constexpr int kWorkerStoreFd = 3;   // the anonymous store's descriptor in every worker
inline constexpr int kWorkerConfigFd = 4;  // the run config (sealed memory file): `run fd:4 RANK`

struct LaunchOptions {
  RunConfig run;                    // store_path: chosen by the launcher when empty
  std::string worker_binary;        // mobius-worker
  std::string run_dir;              // the job's directory: a record of run.json goes here (0700)
  // The workers run as this user (the job's submitter: common/subprocess.h), with `umask`; the
  // store is then theirs (owner and group, mode 0600). Unset: as this process.
  std::optional<Identity> identity;
  int umask = 077;  // with run.training.checkpoint_group: its group bits cleared (umask & 027)
  // The job's model config, read by whoever could read it (the daemon's check child); unset:
  // Start reads model_dir/config.json itself (`mobius run`, running as the user).
  std::optional<model::ModelConfig> model_config;
  // The run config passed ValidateLaunch already, as the job's user (the daemon's check child,
  // common/inspect/inspection.h): Start does not open the job's files again.
  bool validated = false;
  // A cgroup.procs descriptor each worker moves itself into before exec (host/launch/
  // job_cgroup.h); -1: none.
  int cgroup_procs_fd = -1;
  // Empty (default): the store is an anonymous memory file (host_store.h) whose descriptor the
  // workers inherit as kWorkerStoreFd. Otherwise a named file in this directory.
  std::string shm_dir;
  absl::Duration kill_grace = absl::Seconds(5);  // SIGTERM -> SIGKILL on Cancel
  // Watchdog (zero: off). A rank that has started heartbeating (every second, from a thread of
  // its own) and then sends none for `heartbeat_timeout` is frozen (stopped, stuck in the kernel);
  // no completed step for `step_timeout` (since the start or the last step) means the job hangs,
  // e.g. a deadlock. Either fails the job like a crashed worker (INTERNAL: retryable).
  absl::Duration heartbeat_timeout = absl::Seconds(60);
  absl::Duration step_timeout = absl::ZeroDuration();
  // The host memory the job's processes will use together (the planner's estimate,
  // MemoryEstimate::host_bytes); 0: the store's size alone. Start() refuses the job
  // (RESOURCE_EXHAUSTED, with the numbers) when it exceeds what this machine has available now
  // (common/host_memory.h), before any worker exists.
  int64_t host_bytes_needed = 0;
  // How long Start() waits for that memory to become available (polling every second; e.g. a
  // previous job's processes still being torn down) before refusing. Zero: refuse at once.
  absl::Duration host_memory_wait = absl::ZeroDuration();
  std::function<void(const StepReport&)> on_step;
  std::function<void(int rank, const std::string& line)> on_log;  // worker stderr lines
};

struct LinkTraffic {
  std::string name;
  uint64_t h2d_bytes = 0, d2h_bytes = 0;
};

struct LaunchResult {
  absl::Status status;              // OK, or why the job failed (rank, exit code/signal, last lines)
  std::vector<StepReport> steps;    // one per completed step
  std::vector<LinkTraffic> links;   // bytes per emulated link (empty without emulation)
  bool cancelled = false;
  bool stopped = false;             // stopped after a checkpoint on RequestCheckpointAndStop()
};

class Launcher {
 public:
  // Validates, creates the store, spawns the workers. Errors: INVALID_ARGUMENT / NOT_FOUND /
  // RESOURCE_EXHAUSTED for bad input (nothing is left behind), INTERNAL for spawn failures.
  static absl::StatusOr<std::unique_ptr<Launcher>> Start(LaunchOptions options);
  ~Launcher();  // kills and reaps any worker still running, removes the store

  // Relays reports and logs until every worker exited; then removes the store.
  LaunchResult Wait();

  // Asks the workers to stop: SIGTERM now, SIGKILL after kill_grace. Wait() then returns
  // CANCELLED.
  void Cancel();

  // Asks the workers to finish their current step, write a checkpoint and exit (the daemon's
  // shutdown; preemption). Wait() then returns ABORTED with `stopped` set. If they have not
  // stopped after `grace`, they are cancelled (SIGTERM, then SIGKILL after kill_grace).
  void RequestCheckpointAndStop(absl::Duration grace);

  std::vector<pid_t> worker_pids() const;
  const std::string& store_path() const;

  struct State;

 private:
  explicit Launcher(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace mobius::runtime

#endif  // MOBIUS_HOST_LAUNCH_LAUNCHER_H_
