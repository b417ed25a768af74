// mobiusd: one daemon per GPU server. Parse flags, create the daemon, serve until SIGTERM/SIGINT,
// stop gracefully.
//
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration (flags, topology file,
// socket taken or unusable, TCP listener without TLS or authentication, unusable TLS/token files).
#include <grp.h>
#include <pthread.h>
#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <sys/stat.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/init.h"
#include "glog/logging.h"
#include "server/daemon/daemon.h"
#include "server/daemon/flags.h"

namespace {

constexpr char kUsage[] =
    "mobiusd: the Mobius fine-tuning daemon (one per GPU server): the job API on a unix socket\n"
    "(and TCP with TLS), a queue shared by the machine's users, one worker process per GPU.\n"
    "Usage: mobiusd [--socket PATH] [--state_dir DIR] [--topology_file FILE.xml] [flags]";

// `mobiusd --help`: the usage and every flag of server/daemon/flags.cc (absl's own --help lists
// the flags of a file named like the binary: none).
int PrintHelp() {
  std::cout << kUsage << "\n\nFlags (dashes or underscores: --state-dir == --state_dir):\n";
  for (const std::string& name : mobius::FlagsDefinedIn("server/daemon/flags.cc")) {
    std::cout << mobius::FlagHelpLine(name);
  }
  std::cout << "\nExit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration.\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mobius::HelpRequest help = mobius::TakeHelpFlags(argc, argv);
  if (help.asked) return PrintHelp();
  std::vector<std::string> args = mobius::InitProcess(argc, argv, kUsage);
  if (args.size() > 1) {
    LOG(ERROR) << "unexpected argument '" << args[1] << "' (mobiusd takes flags only; see --help)";
    return 2;
  }
  LOG(INFO) << "mobiusd starting; effective configuration:\n"
            << mobius::EffectiveFlags("server/daemon/flags");

  mobius::DaemonOptions options;
  options.socket_path = absl::GetFlag(FLAGS_socket);
  options.topology_file = absl::GetFlag(FLAGS_topology_file);
  const std::string mode = absl::GetFlag(FLAGS_socket_mode);
  char* end = nullptr;
  unsigned long parsed = std::strtoul(mode.c_str(), &end, 8);
  options.socket_mode = static_cast<unsigned>(parsed);
  if (mode.empty() || end == nullptr || *end != '\0' || parsed > 0777) {
    LOG(ERROR) << "--socket_mode '" << absl::GetFlag(FLAGS_socket_mode)
               << "' is not an octal permission mode such as 0660";
    return 2;
  }

  // What the daemon creates (its state, run records) is its own: 0600 / 0700 unless it says
  // otherwise (the socket's mode is --socket_mode).
  umask(077);
  options.state_dir = absl::GetFlag(FLAGS_state_dir);
  options.worker_binary = absl::GetFlag(FLAGS_worker_binary);
  if (options.worker_binary.empty()) {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    options.worker_binary = (self.parent_path() / "mobius-worker").string();
  }
  if (!absl::GetFlag(FLAGS_gpus).empty()) {
    options.gpu_allow_list = absl::GetFlag(FLAGS_gpus);
  } else if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES"); env != nullptr) {
    options.gpu_allow_list = std::string(env);
  }
  options.emulate_links = absl::GetFlag(FLAGS_emulate_links);
  if (options.emulate_links != "auto" && options.emulate_links != "on" &&
      options.emulate_links != "off") {
    LOG(ERROR) << "--emulate_links must be auto, on or off (got '" << options.emulate_links << "')";
    return 2;
  }
  options.link_scale = absl::GetFlag(FLAGS_link_scale);
  if (!(options.link_scale > 0)) {
    LOG(ERROR) << "--link_scale must be positive (got " << options.link_scale << ")";
    return 2;
  }
  options.host_memory_bytes = absl::GetFlag(FLAGS_host_memory_bytes);
  options.pinned_budget_bytes = absl::GetFlag(FLAGS_pinned_budget_bytes);
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_admin_uids), ',',
                                               absl::SkipWhitespace())) {
    uint32_t uid = 0;
    if (!absl::SimpleAtoi(part, &uid)) {
      LOG(ERROR) << "--admin_uids: '" << part << "' is not a uid";
      return 2;
    }
    options.admin_uids.insert(uid);
  }
  if (const std::string group = absl::GetFlag(FLAGS_socket_group); !group.empty()) {
    struct group* g = getgrnam(group.c_str());
    if (g == nullptr) {
      LOG(ERROR) << "--socket_group: no group named '" << group << "'";
      return 2;
    }
    options.socket_gid = g->gr_gid;
  }
  if (const std::string group = absl::GetFlag(FLAGS_admin_group); !group.empty()) {
    struct group* g = getgrnam(group.c_str());
    if (g == nullptr) {
      LOG(ERROR) << "--admin_group: no group named '" << group << "'";
      return 2;
    }
    options.admin_gid = g->gr_gid;
  }
  options.max_gpus_per_user = absl::GetFlag(FLAGS_max_gpus_per_user);
  options.max_running_jobs_per_user = absl::GetFlag(FLAGS_max_running_jobs_per_user);
  options.max_queued_jobs_per_user = absl::GetFlag(FLAGS_max_queued_jobs_per_user);
  options.max_host_bytes_per_user = absl::GetFlag(FLAGS_max_host_bytes_per_user);
  if (options.max_gpus_per_user < 0 || options.max_running_jobs_per_user < 0 ||
      options.max_queued_jobs_per_user < 0 || options.max_host_bytes_per_user < 0) {
    LOG(ERROR) << "--max_*_per_user quotas must be >= 0 (0: no limit)";
    return 2;
  }
  options.kill_grace = absl::Seconds(absl::GetFlag(FLAGS_kill_grace_seconds));
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"kill_grace_seconds", absl::GetFlag(FLAGS_kill_grace_seconds)},
        {"heartbeat_timeout_seconds", absl::GetFlag(FLAGS_heartbeat_timeout_seconds)},
        {"step_timeout_seconds", absl::GetFlag(FLAGS_step_timeout_seconds)},
        {"preemption_grace_seconds", absl::GetFlag(FLAGS_preemption_grace_seconds)},
        {"fairshare_half_life_hours", absl::GetFlag(FLAGS_fairshare_half_life_hours)},
        {"fairshare_weight", absl::GetFlag(FLAGS_fairshare_weight)},
        {"fairshare_age_weight", absl::GetFlag(FLAGS_fairshare_age_weight)},
        {"fairshare_age_max_hours", absl::GetFlag(FLAGS_fairshare_age_max_hours)},
        {"usage_interval_seconds", absl::GetFlag(FLAGS_usage_interval_seconds)}}) {
    if (!(value >= 0) || !std::isfinite(value)) {
      LOG(ERROR) << "--" << name << " must be a finite number >= 0 (got " << value << ")";
      return 2;
    }
  }
  options.heartbeat_timeout = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_timeout_seconds));
  options.step_timeout = absl::Seconds(absl::GetFlag(FLAGS_step_timeout_seconds));
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.preemption = absl::GetFlag(FLAGS_preemption);
  options.preemption_grace = absl::Seconds(absl::GetFlag(FLAGS_preemption_grace_seconds));
  options.fair_share.half_life =
      absl::Hours(absl::GetFlag(FLAGS_fairshare_half_life_hours));
  options.fair_share.weight = absl::GetFlag(FLAGS_fairshare_weight);
  options.fair_share.age_weight = absl::GetFlag(FLAGS_fairshare_age_weight);
  options.fair_share.age_max = absl::Hours(absl::GetFlag(FLAGS_fairshare_age_max_hours));
  if (absl::GetFlag(FLAGS_usage_interval_seconds) <= 0) {
    LOG(ERROR) << "--usage_interval_seconds must be > 0";
    return 2;
  }
  options.usage_interval = absl::Seconds(absl::GetFlag(FLAGS_usage_interval_seconds));
  options.job_cgroups = absl::GetFlag(FLAGS_job_cgroups);
  options.listen_tcp = absl::GetFlag(FLAGS_listen_tcp);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.token_file = absl::GetFlag(FLAGS_token_file);

  // Block the stop signals in every thread (gRPC's included) and wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto daemon = mobius::Daemon::Create(options);
  if (!daemon.ok()) {
    LOG(ERROR) << "mobiusd cannot start: " << daemon.status();
    return 2;
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  LOG(INFO) << "received " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", shutting down";
  (*daemon)->Shutdown(absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  daemon->reset();
  LOG(INFO) << "mobiusd stopped";
  return 0;
}
