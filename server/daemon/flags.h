// mobiusd's knobs, all in one place (defined in flags.cc with help text and defaults).
#ifndef MOBIUS_SERVER_DAEMON_FLAGS_H_
#define MOBIUS_SERVER_DAEMON_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, socket);
ABSL_DECLARE_FLAG(std::string, socket_mode);
ABSL_DECLARE_FLAG(std::string, topology_file);
ABSL_DECLARE_FLAG(double, shutdown_grace_seconds);

#endif  // MOBIUS_SERVER_DAEMON_FLAGS_H_
