#include "common/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

extern char** environ;

namespace mobius {
namespace {

// What failed in the child before exec, sent to the parent over a close-on-exec pipe.
enum ChildStep : int { kDup = 1, kCgroup, kGroups, kGid, kUid, kNoNewPrivs, kDeathSig, kExec };

const char* StepName(int step) {
  switch (step) {
    case kDup:
      return "set up its descriptors";
    case kCgroup:
      return "join its cgroup";
    case kGroups:
      return "set its supplementary groups";
    case kGid:
      return "set its gid";
    case kUid:
      return "set its uid";
    case kNoNewPrivs:
      return "set no_new_privs";
    case kDeathSig:
      return "set its parent-death signal";
    default:
      return "exec";
  }
}

[[noreturn]] void ChildFail(int report_fd, int step) {
  const int report[2] = {step, errno};
  ssize_t ignored = write(report_fd, report, sizeof(report));
  (void)ignored;
  _exit(127);
}

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace

absl::StatusOr<SpawnedProcess> SpawnWithPipes(const std::vector<std::string>& argv_in,
                                              const SpawnOptions& options) {
  if (argv_in.empty()) return absl::InvalidArgumentError("spawn: no program");
  for (const InheritedFd& f : options.inherit) {
    if (f.parent_fd < 0 || f.child_fd < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("spawn: cannot pass descriptor ", f.parent_fd, " as ", f.child_fd));
    }
  }
  const bool switch_user =
      options.identity.has_value() && (options.identity->uid != getuid() ||
                                       options.identity->gid != getgid() || geteuid() != getuid());
  if (switch_user) MOBIUS_RETURN_IF_ERROR(CheckCanActAs(*options.identity));
  // Everything the child needs, prepared here: after fork only system calls.
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_entries;
  std::vector<std::string> overrides = options.env;
  if (options.identity.has_value()) {
    overrides.push_back("HOME=" + options.identity->home);
    overrides.push_back("USER=" + options.identity->name);
    overrides.push_back("LOGNAME=" + options.identity->name);
  }
  auto overridden = [&](const char* entry) {
    for (const std::string& o : overrides) {
      const size_t eq = o.find('=');
      if (eq != std::string::npos && strncmp(entry, o.c_str(), eq + 1) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) env_entries.push_back(*e);
  }
  for (const std::string& o : overrides) env_entries.push_back(o);
  std::vector<char*> envp;
  for (std::string& e : env_entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<gid_t> groups;
  if (switch_user) groups = options.identity->groups;

  int out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
    absl::Status st = MOBIUS_ERRNO_ERROR("pipe");
    CloseAll({out[0], out[1], err[0], err[1], report[0], report[1]});
    return st;
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // The child's dup2s run in order, so a source that is some entry's target or one of 0-2 could
  // be overwritten before it is read: such a descriptor goes through a copy above every target.
  int max_target = 2;
  for (const InheritedFd& f : options.inherit) max_target = std::max(max_target, f.child_fd);
  std::vector<std::pair<int, int>> moves;  // (source in the child, target)
  std::vector<int> copies;
  for (const InheritedFd& f : options.inherit) {
    int from = f.parent_fd;
    if (from <= max_target) {
      from = fcntl(f.parent_fd, F_DUPFD_CLOEXEC, max_target + 1);
      if (from < 0) {
        absl::Status st =
            MOBIUS_ERRNO_ERROR(absl::StrCat("spawn: duplicate descriptor ", f.parent_fd));
        CloseAll({out[0], out[1], err[0], err[1], report[0], report[1], null_fd});
        for (int fd : copies) close(fd);
        return st;
      }
      copies.push_back(from);
    }
    moves.push_back({from, f.child_fd});
  }
  const pid_t parent = getpid();
  const int report_fd = report[1];
  const pid_t pid = fork();
  if (pid == 0) {
    // The child: async-signal-safe system calls only.
    if (null_fd >= 0 && dup2(null_fd, 0) < 0) ChildFail(report_fd, kDup);
    if (dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) ChildFail(report_fd, kDup);
    // Nothing of the parent's crosses exec but what is named: the pipes' copies above and the
    // report pipe are close-on-exec already; every other descriptor becomes so now.
    if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < 65536; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    for (const auto& [from, to] : moves) {
      if (dup2(from, to) < 0) ChildFail(report_fd, kDup);
    }
    if (options.cgroup_procs_fd >= 0 && write(options.cgroup_procs_fd, "0", 1) != 1) {
      ChildFail(report_fd, kCgroup);
    }
    if (switch_user) {
      // Raw system calls: glibc's wrappers would try to change every thread of a process that
      // has only this one.
      if (syscall(SYS_setgroups, groups.size(), groups.data()) != 0) ChildFail(report_fd, kGroups);
      const gid_t g = options.identity->gid;
      if (syscall(SYS_setresgid, g, g, g) != 0) ChildFail(report_fd, kGid);
      const uid_t u = options.identity->uid;
      if (syscall(SYS_setresuid, u, u, u) != 0) ChildFail(report_fd, kUid);
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ChildFail(report_fd, kNoNewPrivs);
    }
    if (options.umask >= 0) umask(static_cast<mode_t>(options.umask));
    if (options.die_with_parent) {
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ChildFail(report_fd, kDeathSig);
      if (getppid() != parent) _exit(1);  // the parent died before the line above took effect
    }
    execve(argv[0], argv.data(), envp.data());
    ChildFail(report_fd, kExec);
  }
  const int fork_errno = errno;
  for (int fd : copies) close(fd);
  CloseAll({out[1], err[1], report[1], null_fd});
  if (pid < 0) {
    CloseAll({out[0], err[0], report[0]});
    errno = fork_errno;
    return MOBIUS_ERRNO_ERROR(absl::StrCat("spawn ", args[0]));
  }
  int failure[2] = {0, 0};
  ssize_t got;
  while ((got = read(report[0], failure, sizeof(failure))) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(failure))) {
    // The child could not exec: it exits at once; reap it and report why.
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    CloseAll({out[0], err[0]});
    errno = failure[1];
    const std::string as = switch_user ? absl::StrCat(" as uid ", options.identity->uid) : "";
    if (failure[0] == kExec) {
      return MOBIUS_ERRNO_ERROR(absl::StrCat("spawn ", args[0], as));
    }
    return MOBIUS_ERRNO_ERROR(
        absl::StrCat("spawn ", args[0], as, ": the child could not ", StepName(failure[0])));
  }
  return SpawnedProcess{pid, out[0], err[0]};
}

absl::StatusOr<int> TextDescriptor(const std::string& name, const std::string& text) {
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("memfd ", name));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status st = MOBIUS_ERRNO_ERROR(absl::StrCat("write memfd ", name));
      close(fd);
      return st;
    }
    done += static_cast<size_t>(n);
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  lseek(fd, 0, SEEK_SET);
  return fd;
}

absl::StatusOr<std::string> ReadArgumentText(const std::string& arg) {
  int fd;
  bool positional = false;  // pread from 0: several processes may share the descriptor
  if (absl::StartsWith(arg, "fd:")) {
    if (!absl::SimpleAtoi(arg.substr(3), &fd) || fd < 0) {
      return absl::InvalidArgumentError(absl::StrCat(arg, ": not a descriptor number"));
    }
    positional = lseek(fd, 0, SEEK_CUR) >= 0;
  } else {
    fd = open(arg.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("open ", arg));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = positional ? pread(fd, buf, sizeof(buf), static_cast<off_t>(text.size()))
                                 : read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status st = MOBIUS_ERRNO_ERROR(absl::StrCat("read ", arg));
      close(fd);
      return st;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace mobius
