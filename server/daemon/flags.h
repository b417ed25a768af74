// mobiusd's knobs, all in one place (defined in flags.cc with help text and defaults).
#ifndef MOBIUS_SERVER_DAEMON_FLAGS_H_
#define MOBIUS_SERVER_DAEMON_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, socket);
ABSL_DECLARE_FLAG(std::string, socket_mode);
ABSL_DECLARE_FLAG(std::string, socket_group);
ABSL_DECLARE_FLAG(std::string, topology_file);
ABSL_DECLARE_FLAG(double, shutdown_grace_seconds);
ABSL_DECLARE_FLAG(std::string, state_dir);
ABSL_DECLARE_FLAG(std::string, worker_binary);
ABSL_DECLARE_FLAG(std::string, gpus);
ABSL_DECLARE_FLAG(std::string, emulate_links);
ABSL_DECLARE_FLAG(double, link_scale);
ABSL_DECLARE_FLAG(int64_t, host_memory_bytes);
ABSL_DECLARE_FLAG(int64_t, pinned_budget_bytes);
ABSL_DECLARE_FLAG(std::string, admin_uids);
ABSL_DECLARE_FLAG(std::string, admin_group);
ABSL_DECLARE_FLAG(int32_t, max_gpus_per_user);
ABSL_DECLARE_FLAG(int32_t, max_running_jobs_per_user);
ABSL_DECLARE_FLAG(int32_t, max_queued_jobs_per_user);
ABSL_DECLARE_FLAG(int64_t, max_host_bytes_per_user);
ABSL_DECLARE_FLAG(double, kill_grace_seconds);
ABSL_DECLARE_FLAG(double, heartbeat_timeout_seconds);
ABSL_DECLARE_FLAG(double, step_timeout_seconds);
ABSL_DECLARE_FLAG(std::string, metrics_address);
ABSL_DECLARE_FLAG(bool, preemption);
ABSL_DECLARE_FLAG(double, preemption_grace_seconds);
ABSL_DECLARE_FLAG(double, fairshare_half_life_hours);
ABSL_DECLARE_FLAG(double, fairshare_weight);
ABSL_DECLARE_FLAG(double, fairshare_age_weight);
ABSL_DECLARE_FLAG(double, fairshare_age_max_hours);
ABSL_DECLARE_FLAG(double, usage_interval_seconds);
ABSL_DECLARE_FLAG(std::string, job_cgroups);
ABSL_DECLARE_FLAG(std::string, listen_tcp);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_client_ca);
ABSL_DECLARE_FLAG(std::string, token_file);

#endif  // MOBIUS_SERVER_DAEMON_FLAGS_H_
