#include "server/daemon/flags.h"

#include "host/launch/job_cgroup.h"

#include "absl/flags/flag.h"
#include "common/paths.h"

ABSL_FLAG(std::string, socket, mobius::kDefaultSocketPath,
          "Unix socket to serve gRPC on. Its directory must exist and be writable.");
ABSL_FLAG(std::string, socket_mode, "0660",
          "Permission bits of the socket file (octal): who may talk to the daemon.");
ABSL_FLAG(std::string, socket_group, "",
          "Group of the socket file (with --socket_mode 0660: the users who may submit jobs); "
          "empty: the daemon's group.");
ABSL_FLAG(std::string, topology_file, "",
          "Load the hardware topology from this hwloc XML file instead of discovering it "
          "(emulate a server you do not have).");
ABSL_FLAG(double, shutdown_grace_seconds, 5.0,
          "On SIGTERM/SIGINT, how long in-flight RPCs may take before they are cancelled.");
ABSL_FLAG(std::string, state_dir, "/var/lib/mobius",
          "Directory of the durable job store (jobs.db, SQLite) and of every job's runs, logs and "
          "default checkpoints. Created if missing.");
ABSL_FLAG(std::string, worker_binary, "",
          "The mobius-worker executable; empty: the one next to mobiusd.");
ABSL_FLAG(std::string, gpus, "",
          "GPU allow-list in CUDA_VISIBLE_DEVICES syntax (indices or UUIDs): the only GPUs jobs may "
          "get. Empty: $CUDA_VISIBLE_DEVICES when set, else every GPU of the topology.");
ABSL_FLAG(std::string, emulate_links, "auto",
          "auto | on | off. Emulate the topology's PCIe links (token buckets) for jobs on the CPU "
          "backend; auto: on when this machine has no usable CUDA device.");
ABSL_FLAG(double, link_scale, 1.0,
          "Multiplies every emulated link's bandwidth (e.g. 0.01 to make a small model "
          "PCIe-bound on a small machine). Outputs say 'emulated' wherever these links count.");
ABSL_FLAG(int64_t, host_memory_bytes, 0,
          "Host RAM jobs may use together; 0: 90% of the topology's NUMA memory. Either way "
          "at most 90% of this machine's memory (MemTotal, the cgroup's memory limit): an "
          "emulated topology never lends memory the machine lacks. A job starts only when its "
          "estimate is free (MemAvailable) at that moment.");
ABSL_FLAG(int64_t, pinned_budget_bytes, 0,
          "Page-locked host memory jobs may use together; 0: half of --host_memory_bytes.");
ABSL_FLAG(std::string, admin_uids, "",
          "Comma-separated uids that may act on every job, drain and set quotas (root always).");
ABSL_FLAG(std::string, admin_group, "",
          "Members of this group are admins too; empty: none.");
ABSL_FLAG(int32_t, max_gpus_per_user, 0,
          "Default quota: GPUs one user's running jobs may hold together; 0: no limit.");
ABSL_FLAG(int32_t, max_queued_jobs_per_user, 0,
          "Default quota: jobs one user may have queued at once (a submit past it is refused); "
          "0: no limit.");
ABSL_FLAG(int64_t, max_host_bytes_per_user, 0,
          "Default quota: host memory (the plans' estimates) one user's running jobs may use "
          "together; 0: no limit.");
ABSL_FLAG(int32_t, max_running_jobs_per_user, 0,
          "Default quota: running jobs per user; 0: no limit.");
ABSL_FLAG(double, kill_grace_seconds, 5.0,
          "Cancel: SIGTERM to a job's workers, SIGKILL after this many seconds.");
ABSL_FLAG(double, heartbeat_timeout_seconds, 60,
          "Watchdog: a worker that sends no heartbeat (one per second) for this long is frozen; "
          "its job fails (and restarts from its checkpoint within max_restarts). 0: off.");
ABSL_FLAG(double, step_timeout_seconds, 1800,
          "Watchdog: a job that completes no step for this long (since its start or its last "
          "step) is hung; it fails (and restarts within max_restarts). 0: off.");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9464",
          "Serve Prometheus metrics at http://ADDRESS/metrics (host:port; port 0 picks a free "
          "one); empty: no metrics endpoint.");
ABSL_FLAG(bool, preemption, false,
          "Let a higher-priority job that cannot start preempt lower-priority running jobs: they "
          "checkpoint, stop and go back to the queue (resuming from that checkpoint).");
ABSL_FLAG(double, preemption_grace_seconds, 60,
          "A preempted job's grace: how long it may take to finish its step and write a "
          "checkpoint before it is stopped (SIGTERM, then SIGKILL after --kill_grace_seconds). "
          "Its accounting stops when its GPUs are free.");
ABSL_FLAG(double, fairshare_half_life_hours, 24 * 7,
          "Fair share: a user's past GPU-seconds count half as much after this long (0: no "
          "decay). Among queued jobs of equal priority, the user who used less goes first "
          "(docs/scheduler.md, Fair share).");
ABSL_FLAG(double, fairshare_weight, 1.0,
          "Fair share: the weight of the fair-share factor (0..1) in the order of equal-priority "
          "jobs; 0: no fair share (first come, first served, unless --fairshare_age_weight).");
ABSL_FLAG(double, fairshare_age_weight, 0.1,
          "Fair share: the weight of a job's waiting time (reaching it at "
          "--fairshare_age_max_hours), so that a heavy user's jobs still move up.");
ABSL_FLAG(double, fairshare_age_max_hours, 24 * 7,
          "Fair share: a job waiting this long earns the whole --fairshare_age_weight.");
ABSL_FLAG(double, usage_interval_seconds, 15,
          "Accounting: running jobs' usage is written this often (steps update it in memory); a "
          "daemon killed mid-run loses at most this much of a run's usage.");
ABSL_FLAG(std::string, job_cgroups, "auto", mobius::launch::kJobCgroupsFlagHelp);
ABSL_FLAG(std::string, listen_tcp, "",
          "Also serve gRPC on this TCP address (HOST:PORT; port 0 picks a free one, logged as "
          "'serving gRPC over TLS on tcp:HOST:PORT'); empty: unix socket only. TLS only: needs "
          "--tls_cert, --tls_key and at least one of --tls_client_ca / --token_file.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) the TCP listener presents; required with --listen_tcp.");
ABSL_FLAG(std::string, tls_key, "",
          "PEM private key of --tls_cert (unencrypted); required with --listen_tcp.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: TCP clients may present a certificate it signed (required unless "
          "--token_file is set); the certificate's subject CN names the user (a user name of "
          "this server or a uid).");
ABSL_FLAG(std::string, token_file, "",
          "Bearer tokens accepted on the TCP listener: lines 'TOKEN USER' (USER: a user name of "
          "this server or a uid; TOKEN: 16+ visible ASCII characters); mode 0600. Read at start.");
