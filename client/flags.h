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
ABSL_DECLARE_FLAG(std::string, tokenizer);
ABSL_DECLARE_FLAG(std::string, format);
ABSL_DECLARE_FLAG(std::string, text_field);
ABSL_DECLARE_FLAG(std::string, prompt_field);
ABSL_DECLARE_FLAG(std::string, completion_field);
ABSL_DECLARE_FLAG(bool, skip_bad_lines);
ABSL_DECLARE_FLAG(int, eos_id);
ABSL_DECLARE_FLAG(int, threads);

#endif  // MOBIUS_CLIENT_FLAGS_H_
