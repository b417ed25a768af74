// The job verbs of the `mobius` CLI, against mobiusd's JobService, AdminService and NodeService:
//
//   mobius submit job.yaml [--wait] [--submission-id ID]   queue a job (YAML spec, docs/job-spec.md);
//                          --wait shows a live progress bar (step/total, loss, tokens/s, ETA) and
//                          ends with a summary; Ctrl-C detaches without cancelling
//   mobius ls [--state S] [--all-users]                   jobs, newest last
//   mobius describe JOB                                    one job in full
//   mobius logs [-f] JOB                                   its log (follow until it ends)
//   mobius watch JOB                                       the progress bar of a submitted job
//   mobius cancel JOB
//   mobius queue                                           queued and running jobs, why they wait
//   mobius node                                            GPUs (free / used by), memory budgets
//   mobius drain | undrain                                 (admins) stop / resume starting jobs
//   mobius quota set UID [--max-gpus N] [--max-running-jobs N] [--max-queued-jobs N]
//                        [--max-host-memory SIZE] | mobius quota ls   (admins)
//   mobius usage [--user U] [--since WHEN] [--runs]        GPU-hours, memory, tokens per user
//                                                          (usage_command.h)
// Every read verb takes --json (one JSON object or array, protobuf's JSON mapping).
// Exit codes (exit_codes.h): 0 ok; 1 the job waited for did not succeed; 2 usage or invalid spec
// (the field path is in the message); 3 daemon unreachable, or silent past the call's deadline
// (--timeout-seconds) or a stream's idle limit (--stream-idle-seconds); 4 daemon error.
//
// Not thread-safe; called from main().
#ifndef MOBIUS_CLIENT_JOB_COMMANDS_H_
#define MOBIUS_CLIENT_JOB_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/daemon_endpoint.h"

namespace mobius::cli {

struct JobCommandOptions {
  DaemonEndpoint daemon;       // unix socket or tcp:// (client/daemon_endpoint.h)
  absl::Duration timeout = absl::Seconds(10);  // per unary call (DEADLINE_EXCEEDED: exit 3)
  // watch, logs, submit --wait: the stream fails (exit 3) when the daemon sends nothing for this
  // long; it sends a heartbeat every 10 s (server/rpc/job_service.cc). Zero: no limit.
  absl::Duration stream_idle = absl::Seconds(30);
  bool json = false;
  bool wait = false;
  bool follow = false;
  bool all_users = false;
  std::string submission_id;   // empty: a random one
  std::string state;           // ls filter: queued | running | succeeded | failed | cancelled
  int max_gpus = 0, max_running_jobs = 0, max_queued_jobs = 0;
  std::string max_host_memory;  // quota set: a byte size ("64GiB"); empty: no limit
  std::string user;            // usage: a name or uid; empty: the caller (admins: everyone)
  std::string since;           // usage: the window's start (usage_command.h)
  bool runs = false;           // usage: every run too
};

// `args` are the positional arguments from the verb on ("submit", "job.yaml"). Returns the exit
// code; output goes to `out`, errors and the progress bar to `err`.
int RunJobCommand(const std::vector<std::string>& args, const JobCommandOptions& options,
                  std::ostream& out, std::ostream& err);

// True if `verb` is one RunJobCommand handles.
bool IsJobVerb(const std::string& verb);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_JOB_COMMANDS_H_
