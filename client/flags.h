// The `mobius` CLI's flags, all in one place (defined in flags.cc). Flags may be written with
// dashes or underscores (--topology-file == --topology_file).
#ifndef MOBIUS_CLIENT_FLAGS_H_
#define MOBIUS_CLIENT_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, socket);
ABSL_DECLARE_FLAG(double, timeout_seconds);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(bool, xml);
ABSL_DECLARE_FLAG(std::string, topology_file);

#endif  // MOBIUS_CLIENT_FLAGS_H_
