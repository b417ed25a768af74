// mobiusd's server object: owns the topology snapshot, the claimed socket, the job manager and the
// gRPC server (NodeService, JobService, AdminService, health, reflection) on the unix socket and,
// when `listen_tcp` is set, on a TLS-only TCP port whose callers authenticate with a client
// certificate or a bearer token (server/rpc/tcp_auth.h).
//
//   auto d = Daemon::Create(options);   // loads topology, claims the socket, starts serving
//   d->Shutdown(grace);                 // stops serving, removes the socket
//
// Create() errors: INVALID_ARGUMENT for an incomplete or unusable TCP/TLS configuration (naming the
// flag and file), INVALID_ARGUMENT / NOT_FOUND for a bad topology file or allow-list, the job
// store's errors for an unusable state directory, FAILED_PRECONDITION /
// PERMISSION_DENIED for a socket that is taken or whose directory is unusable. Shutdown() may be
// called from any one thread, once.
#ifndef MOBIUS_SERVER_DAEMON_DAEMON_H_
#define MOBIUS_SERVER_DAEMON_DAEMON_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/jobs/accounting/accounting.h"

namespace mobius {

struct DaemonOptions {
  std::string socket_path;
  unsigned socket_mode = 0660;
  gid_t socket_gid = static_cast<gid_t>(-1);  // group of the socket file; -1: the daemon's
  std::string topology_file;  // empty: live hwloc discovery
  // The job service (server/jobs/service/job_manager.h).
  std::string state_dir;               // jobs.db and per-job directories
  std::string worker_binary;           // mobius-worker
  std::optional<std::string> gpu_allow_list;  // CUDA_VISIBLE_DEVICES syntax; nullopt: all GPUs
  std::string emulate_links = "auto";  // auto | on | off
  double link_scale = 1.0;
  int64_t host_memory_bytes = 0;       // 0: 90% of the topology's NUMA memory
  int64_t pinned_budget_bytes = 0;     // 0: half the host budget
  std::set<uid_t> admin_uids;
  gid_t admin_gid = static_cast<gid_t>(-1);
  int32_t max_gpus_per_user = 0, max_running_jobs_per_user = 0, max_queued_jobs_per_user = 0;
  int64_t max_host_bytes_per_user = 0;
  absl::Duration kill_grace = absl::Seconds(5);
  absl::Duration heartbeat_timeout = absl::Seconds(60);  // watchdog (launcher.h); zero: off
  absl::Duration step_timeout = absl::Seconds(1800);     // watchdog (launcher.h); zero: off
  std::string metrics_address;         // Prometheus exposer "host:port"; empty: none
  bool preemption = false;             // higher priority may preempt (checkpoint + requeue)
  absl::Duration preemption_grace = absl::Seconds(60);  // a preempted job's time to checkpoint
  jobs::FairShareOptions fair_share;   // the order of equal priorities (accounting.h)
  absl::Duration usage_interval = absl::Seconds(15);  // accounting writes of running jobs
  std::string job_cgroups = "auto";    // per-job cgroup v2 isolation (host/launch/job_cgroup.h)
  // The TCP listener: "HOST:PORT" (port 0: any free port, logged); empty: none. Needs the TLS
  // certificate and key and at least one of client CA / token file.
  std::string listen_tcp;
  std::string tls_cert_file, tls_key_file, tls_client_ca_file, token_file;
};

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const DaemonOptions& options);
  virtual ~Daemon() = default;
  virtual void Shutdown(absl::Duration grace) = 0;
};

}  // namespace mobius

#endif  // MOBIUS_SERVER_DAEMON_DAEMON_H_
