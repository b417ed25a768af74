// Test helper: running a command line (a built binary, usually) and capturing what it prints.
#ifndef MOBIUS_TEST_TESTING_SHELL_H_
#define MOBIUS_TEST_TESTING_SHELL_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace mobius::testing {

struct ShellResult {
  int exit_code = -1;  // -1: not started, or killed by a signal
  std::string output;  // stdout (append "2>&1" to the command for stderr too)
};

// Runs `command` with /bin/sh and waits for it.
inline ShellResult RunShell(const std::string& command) {
  ShellResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace mobius::testing

#endif  // MOBIUS_TEST_TESTING_SHELL_H_
