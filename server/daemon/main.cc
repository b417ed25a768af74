// mobiusd: one daemon per GPU server. Parse flags, create the daemon, serve until SIGTERM/SIGINT,
// stop gracefully.
//
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration (flags, topology file,
// socket taken or unusable).
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "common/init.h"
#include "glog/logging.h"
#include "server/daemon/daemon.h"
#include "server/daemon/flags.h"

int main(int argc, char** argv) {
  std::vector<std::string> args = mobius::InitProcess(
      argc, argv, "mobiusd: the Mobius fine-tuning daemon.\nUsage: mobiusd [--socket PATH] "
                  "[--topology_file FILE.xml]");
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
