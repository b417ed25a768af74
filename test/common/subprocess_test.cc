// SpawnWithPipes (subprocess.h): the child's stdout and stderr come back through the pipes, and a
// descriptor of this process passed in `inherit` (close-on-exec or not, at its own number or
// another) is open in the child at `child_fd`, and nothing else is.
#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace mobius {
namespace {

struct Finished {
  std::string out, err;
  int exit_code = -1;  // -1: killed (timeout or signal)
};

// Reads the child's stdout and stderr to their ends and reaps it; a child still running after
// `timeout` (e.g. blocked on a pipe whose write end leaked into it) is killed.
Finished WaitFor(const SpawnedProcess& p,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  Finished f;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{p.out_fd, POLLIN, 0}, {p.err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&f.out, &f.err};
  int open = 2;
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || poll(fds, 2, static_cast<int>(left.count())) == 0) {
      ADD_FAILURE() << "child " << p.pid << " still running after " << timeout.count() << " ms";
      kill(p.pid, SIGKILL);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
  close(p.out_fd);
  close(p.err_fd);
  int status = 0;
  EXPECT_EQ(waitpid(p.pid, &status, 0), p.pid);
  if (WIFEXITED(status)) f.exit_code = WEXITSTATUS(status);
  return f;
}

void WriteString(int fd, const std::string& s) {
  ASSERT_EQ(write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()));
}

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(SubprocessTest, StdoutAndStderrComeBackThroughThePipes) {
  auto p = SpawnWithPipes({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(p.ok()) << p.status();
  const Finished f = WaitFor(*p);
  EXPECT_EQ(f.out, "out\n");
  EXPECT_EQ(f.err, "err\n");
  EXPECT_EQ(f.exit_code, 3);
}

TEST(SubprocessTest, MissingBinaryIsNotFoundNamingIt) {
  auto p = SpawnWithPipes({"/nonexistent/mobius-worker"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound) << p.status();
  EXPECT_NE(p.status().message().find("/nonexistent/mobius-worker"), std::string::npos)
      << p.status();
}

// A close-on-exec pipe's read end (at a high number) becomes the child's fd 3. The parent writes
// only after the spawn and then closes its write end: the child sees the data and then EOF, which
// it would not if the (close-on-exec) write end had leaked into it.
TEST(SubprocessTest, InheritedDescriptorIsTheChildsFd3) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  const int read_end = fcntl(p[0], F_DUPFD_CLOEXEC, 20);  // surely not 3
  ASSERT_GE(read_end, 20);
  close(p[0]);
  auto child = SpawnWithPipes({"/bin/sh", "-c", "cat <&3"}, {{read_end, 3}});
  close(read_end);
  ASSERT_TRUE(child.ok()) << child.status();
  WriteString(p[1], "through fd 3\n");
  close(p[1]);
  const Finished f = WaitFor(*child);
  EXPECT_EQ(f.out, "through fd 3\n");
  EXPECT_EQ(f.err, "");
  EXPECT_EQ(f.exit_code, 0);
}

// parent_fd == child_fd == 3, close-on-exec: a dup2 onto itself would keep the flag, so the child
// would not have it; subprocess.h promises it does.
TEST(SubprocessTest, InheritedDescriptorAtItsOwnNumber) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  // Whatever holds fd 3 now (if anything) is parked and put back afterwards.
  const int parked = IsOpen(3) ? fcntl(3, F_DUPFD_CLOEXEC, 30) : -1;
  ASSERT_EQ(dup2(p[0], 3), 3);
  ASSERT_EQ(fcntl(3, F_SETFD, FD_CLOEXEC), 0);
  if (p[0] != 3) close(p[0]);
  auto child = SpawnWithPipes({"/bin/sh", "-c", "read line <&3 && echo \"got $line\""}, {{3, 3}});
  if (parked >= 0) {
    dup3(parked, 3, O_CLOEXEC);
    close(parked);
  } else {
    close(3);
  }
  ASSERT_TRUE(child.ok()) << child.status();
  WriteString(p[1], "hello\n");
  close(p[1]);
  const Finished f = WaitFor(*child);
  EXPECT_EQ(f.out, "got hello\n");
  EXPECT_EQ(f.err, "");
  EXPECT_EQ(f.exit_code, 0);
}

// Only stdin, the two pipes and `inherit` reach the child: a close-on-exec descriptor of the
// caller's that is not passed is closed there.
TEST(SubprocessTest, DescriptorsNotPassedStayBehind) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  const int passed = fcntl(p[0], F_DUPFD_CLOEXEC, 40);
  const int kept = fcntl(p[0], F_DUPFD_CLOEXEC, 50);
  ASSERT_GE(passed, 40);
  ASSERT_GE(kept, 50);
  auto child = SpawnWithPipes({"/bin/sh", "-c",
                               "if [ -e /proc/self/fd/" + std::to_string(kept) +
                                   " ]; then echo leaked; fi; "
                                   "if [ -e /proc/self/fd/4 ]; then echo four; fi"},
                              {{passed, 4}});
  for (int fd : {p[0], p[1], passed, kept}) close(fd);
  ASSERT_TRUE(child.ok()) << child.status();
  const Finished f = WaitFor(*child);
  EXPECT_EQ(f.out, "four\n");
  EXPECT_EQ(f.exit_code, 0);
}

// Two descriptors whose numbers are each other's child numbers: parent 3 -> child 4 and parent 4
// -> child 3. subprocess.h says the child gets each `parent_fd` as its `child_fd`.
TEST(SubprocessTest, InheritedDescriptorsMayTradeNumbers) {
  int a[2], b[2];
  ASSERT_EQ(pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(b, O_CLOEXEC), 0);
  const int parked3 = IsOpen(3) ? fcntl(3, F_DUPFD_CLOEXEC, 30) : -1;
  const int parked4 = IsOpen(4) ? fcntl(4, F_DUPFD_CLOEXEC, 30) : -1;
  // Read ends at numbers >= 10 first, so that placing them on 3 and 4 cannot close each other.
  const int a_read = fcntl(a[0], F_DUPFD_CLOEXEC, 10), b_read = fcntl(b[0], F_DUPFD_CLOEXEC, 10);
  const int a_write = fcntl(a[1], F_DUPFD_CLOEXEC, 10), b_write = fcntl(b[1], F_DUPFD_CLOEXEC, 10);
  for (int fd : {a[0], a[1], b[0], b[1]}) close(fd);
  ASSERT_EQ(dup3(a_read, 3, O_CLOEXEC), 3);
  ASSERT_EQ(dup3(b_read, 4, O_CLOEXEC), 4);
  close(a_read);
  close(b_read);
  auto child =
      SpawnWithPipes({"/bin/sh", "-c", "read x <&3; read y <&4; echo \"$x $y\""}, {{3, 4}, {4, 3}});
  for (const auto& [parked, fd] : {std::pair{parked3, 3}, std::pair{parked4, 4}}) {
    if (parked >= 0) {
      dup3(parked, fd, O_CLOEXEC);
      close(parked);
    } else {
      close(fd);
    }
  }
  ASSERT_TRUE(child.ok()) << child.status();
  // A pipe the child did not get has no reader left: its write fails (EPIPE), not this process.
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  const bool a_written = write(a_write, "from-a\n", 7) == 7;
  const bool b_written = write(b_write, "from-b\n", 7) == 7;
  close(a_write);
  close(b_write);
  const Finished f = WaitFor(*child);
  sigaction(SIGPIPE, &previous, nullptr);
  // The dup2s run in order in the child: dup2(3, 4) must not clobber the parent's fd 4 before
  // dup2(4, 3) reads it (SpawnWithPipes copies such sources first).
  EXPECT_TRUE(a_written && b_written) << "a pipe has no reader in the child";
  // The child's fd 3 is the parent's fd 4 (pipe b), its fd 4 the parent's fd 3 (pipe a).
  EXPECT_EQ(f.out, "from-b from-a\n") << "stderr: " << f.err;
  EXPECT_EQ(f.exit_code, 0);
}

TEST(SubprocessTest, ChildDescriptorBelow3IsInvalidArgument) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  for (int child_fd : {0, 1, 2, -1}) {
    auto child = SpawnWithPipes({"/bin/sh", "-c", "exit 0"}, {{p[0], child_fd}});
    EXPECT_EQ(child.status().code(), absl::StatusCode::kInvalidArgument)
        << child_fd << ": " << child.status();
  }
  auto child = SpawnWithPipes({"/bin/sh", "-c", "exit 0"}, {{-1, 3}});
  EXPECT_EQ(child.status().code(), absl::StatusCode::kInvalidArgument) << child.status();
  close(p[0]);
  close(p[1]);
}


// A descriptor of the caller's that is NOT close-on-exec (a careless library's) does not reach
// the child either: the child of a daemon running as root must not get its database or sockets.
TEST(SubprocessTest, InheritableDescriptorsOfTheCallerStayBehind) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);  // no O_CLOEXEC
  const int leaky = fcntl(p[0], F_DUPFD, 60);
  ASSERT_GE(leaky, 60);
  auto child = SpawnWithPipes({"/bin/sh", "-c",
                               "if [ -e /proc/self/fd/" + std::to_string(leaky) +
                                   " ]; then echo leaked; else echo closed; fi"});
  for (int fd : {p[0], p[1], leaky}) close(fd);
  ASSERT_TRUE(child.ok()) << child.status();
  const Finished f = WaitFor(*child);
  EXPECT_EQ(f.out, "closed\n");
}

TEST(SubprocessTest, UmaskAndEnvironmentAreTheChilds) {
  SpawnOptions o;
  o.umask = 077;
  o.env = {"MOBIUS_SUBPROCESS_TEST=set"};
  auto child = SpawnWithPipes({"/bin/sh", "-c", "umask; echo $MOBIUS_SUBPROCESS_TEST"}, o);
  ASSERT_TRUE(child.ok()) << child.status();
  const Finished f = WaitFor(*child);
  EXPECT_EQ(f.out, "0077\nset\n");
}

// As root: the child runs as another user, with that user's groups only, no capability left and
// no_new_privs set; its parent-death signal survives the switch.
TEST(SubprocessTest, ChildRunsAsTheGivenUserWithoutPrivileges) {
  if (!CanSwitchIdentity()) GTEST_SKIP() << "needs root (switching uids)";
  Identity nobody;
  nobody.uid = 65534;
  nobody.gid = 65534;
  nobody.groups = {65534};
  nobody.name = "nobody";
  nobody.home = "/nonexistent";
  SpawnOptions o;
  o.identity = nobody;
  o.die_with_parent = true;
  auto child = SpawnWithPipes(
      {"/bin/sh", "-c",
       "id -u; id -g; id -G; echo $HOME $USER; grep -E '^(CapEff|CapPrm|NoNewPrivs)' "
       "/proc/self/status | tr -s '\\t' ' '"},
      o);
  ASSERT_TRUE(child.ok()) << child.status();
  const Finished f = WaitFor(*child);
  EXPECT_EQ(f.out,
            "65534\n65534\n65534\n/nonexistent nobody\nCapPrm: 0000000000000000\n"
            "CapEff: 0000000000000000\nNoNewPrivs: 1\n")
      << f.err;
  EXPECT_EQ(f.exit_code, 0);
}

// Unprivileged: switching to another uid is refused before anything starts, naming both uids.
TEST(SubprocessTest, SwitchingUsersWithoutPrivilegesIsPermissionDenied) {
  if (CanSwitchIdentity()) GTEST_SKIP() << "runs only unprivileged";
  Identity other;
  other.uid = getuid() + 1;
  other.gid = getgid();
  SpawnOptions o;
  o.identity = other;
  auto child = SpawnWithPipes({"/bin/true"}, o);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kPermissionDenied) << child.status();
}

// A binary the child's user may not execute: PERMISSION_DENIED from the call (the exec error
// travels back), not a child that exits 127.
TEST(SubprocessTest, ExecFailureInTheChildIsTheCallsError) {
  char dir[] = "/tmp/subprocess_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/not-executable";
  { std::FILE* f = std::fopen(path.c_str(), "w"); std::fputs("#!/bin/sh\n", f); std::fclose(f); }
  chmod(path.c_str(), 0644);
  SpawnOptions o;
  if (CanSwitchIdentity()) o.identity = Identity{65534, 65534, {65534}, "nobody", "/"};
  auto child = SpawnWithPipes({path}, o);
  unlink(path.c_str());
  rmdir(dir);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kPermissionDenied) << child.status();
  EXPECT_NE(child.status().message().find(path), std::string::npos) << child.status();
}

TEST(SubprocessTest, TextDescriptorReadsBackThroughFdArgument) {
  auto fd = TextDescriptor("request", "{\"a\": 1}\n");
  ASSERT_TRUE(fd.ok()) << fd.status();
  auto child = SpawnWithPipes({"/bin/sh", "-c", "cat <&5"}, {{*fd, 5}});
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ(WaitFor(*child).out, "{\"a\": 1}\n");
  auto text = ReadArgumentText("fd:" + std::to_string(*fd));  // closes it
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{\"a\": 1}\n");
  EXPECT_FALSE(IsOpen(*fd));
  EXPECT_EQ(ReadArgumentText("fd:x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadArgumentText("/nonexistent/run.json").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(IdentityTest, RootIsFoundWithItsGroups) {
  auto root = LookUpIdentity(0);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->name, "root");
  EXPECT_EQ(root->gid, 0u);
  EXPECT_FALSE(root->groups.empty());
  auto unknown = LookUpIdentity(4000000000u);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("4000000000"), std::string::npos);
}

TEST(IdentityTest, ModeBitsByOwnerGroupOther) {
  const Identity alice{1001, 1001, {1001, 2000}, "alice", "/home/alice"};
  EXPECT_TRUE(ModeAllows(alice, 1001, 1001, 0700, R_OK | W_OK));
  EXPECT_FALSE(ModeAllows(alice, 1002, 1002, 0700, R_OK));
  EXPECT_TRUE(ModeAllows(alice, 1002, 2000, 0750, R_OK | X_OK));
  EXPECT_FALSE(ModeAllows(alice, 1002, 2000, 0750, W_OK));
  EXPECT_TRUE(ModeAllows(alice, 1002, 1002, 0604, R_OK));
  EXPECT_FALSE(ModeAllows(alice, 1001, 1001, 0077, R_OK));  // the owner's bits decide
}

}  // namespace
}  // namespace mobius
