#include "host/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/data/loader.h"
#include "common/data/token_file.h"
#include "common/errors.h"
#include "common/host_memory.h"
#include "common/model/model_config_parse.h"
#include "common/run/checkpoint_dirs.h"
#include "common/run/host_store.h"
#include "common/run/store_layout.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "glog/logging.h"

namespace mobius::runtime {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kTailLines = 20;

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
  std::deque<std::string> tail;  // last stderr lines
  bool exited = false;
  int wait_status = 0;
};

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return absl::StrCat("was killed by signal ", sig, " (SIG", name != nullptr ? name : "?", ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

}  // namespace

struct Launcher::State {
  LaunchOptions options;
  StoreLayout layout;
  std::unique_ptr<HostStore> store;  // null once released (guarded by store_mu for Cancel)
  std::mutex store_mu;
  std::vector<Worker> workers;
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> cancel_at_ns{0};
  std::atomic<int64_t> stop_deadline_ns{0};  // RequestCheckpointAndStop's grace; 0: none
  std::map<int64_t, std::vector<WorkerStepReport>> pending;  // step -> reports so far
  Clock::time_point last_step_end;
};

namespace {

absl::Status CheckHostMemory(const LaunchOptions& o, const StoreLayout& layout) {
  const int64_t store = static_cast<int64_t>(layout.total_bytes);
  const int64_t needed = std::max(o.host_bytes_needed, store);
  const absl::Time deadline = absl::Now() + o.host_memory_wait;
  for (bool logged = false;; logged = true) {
    absl::StatusOr<HostMemory> machine = ReadHostMemory();
    if (!machine.ok()) {
      LOG(WARNING) << "cannot check the job's host memory: " << machine.status();
      return absl::OkStatus();
    }
    if (needed <= machine->available_bytes()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "host memory: the job needs %.2f GiB (the planner's estimate; its shared store alone "
          "%.2f GiB) but this machine has %s; nothing was started",
          needed / double(1 << 30), store / double(1 << 30), machine->Describe()));
    }
    if (!logged) {
      LOG(INFO) << absl::StrFormat("waiting up to %s for %.2f GiB of host memory (%s)",
                                   absl::FormatDuration(o.host_memory_wait),
                                   needed / double(1 << 30), machine->Describe());
    }
    absl::SleepFor(absl::Seconds(1));
  }
}

// Bytes that crossed emulated link `link` in `direction` (0: h2d, 1: d2h) so far, all ranks.
uint64_t LinkBytes(const Launcher::State& s, size_t link, int direction) {
  return LinkWord(s.layout, *s.store, static_cast<int>(link), 2 + direction)
      ->load(std::memory_order_relaxed);
}

absl::Status Spawn(Launcher::State& s, Worker& w, int config_fd) {
  SpawnOptions so;
  if (s.store->fd() >= 0) so.inherit.push_back({s.store->fd(), kWorkerStoreFd});
  so.inherit.push_back({config_fd, kWorkerConfigFd});
  so.identity = s.options.identity;
  // A checkpoint group may read what the workers write (checkpoint_owner.h): group bits open.
  so.umask = s.options.run.training.checkpoint_group.empty() ? s.options.umask
                                                             : (s.options.umask & 027);
  so.cgroup_procs_fd = s.options.cgroup_procs_fd;
  so.die_with_parent = true;
  MOBIUS_ASSIGN_OR_RETURN(
      SpawnedProcess child,
      SpawnWithPipes({s.options.worker_binary, "run", absl::StrCat("fd:", kWorkerConfigFd),
                      absl::StrCat(w.rank)},
                     so));
  w.pid = child.pid;
  w.out_fd = child.out_fd;
  w.err_fd = child.err_fd;
  return absl::OkStatus();
}

void KillAll(Launcher::State& s, int sig) {
  for (Worker& w : s.workers) {
    if (!w.exited && w.pid > 0) kill(w.pid, sig);
  }
}

void ReapAll(Launcher::State& s) {
  for (Worker& w : s.workers) {
    if (w.exited || w.pid <= 0) continue;
    if (waitpid(w.pid, &w.wait_status, 0) == w.pid) w.exited = true;
  }
  for (Worker& w : s.workers) {
    for (int* fd : {&w.out_fd, &w.err_fd}) {
      if (*fd >= 0) close(*fd);
      *fd = -1;
    }
  }
}

// After the last worker is gone: a named store file is unlinked, and this process lets go of the
// store (an anonymous one is freed then: no process holds it any more).
void RemoveStore(Launcher::State& s) {
  std::lock_guard<std::mutex> lock(s.store_mu);
  if (s.store != nullptr) {
    absl::Status st = s.store->Remove();
    if (!st.ok()) LOG(WARNING) << st;
    s.store.reset();
  }
}

}  // namespace

Launcher::Launcher(std::unique_ptr<State> state) : s_(std::move(state)) {}

Launcher::~Launcher() {
  if (s_ == nullptr) return;
  KillAll(*s_, SIGKILL);
  ReapAll(*s_);
  RemoveStore(*s_);
}

// 16 random hex digits: a named store's suffix nobody can guess to pre-create.
static std::string RandomSuffix() {
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != static_cast<ssize_t>(sizeof(r))) {
    r = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^ (uint64_t(getpid()) << 32);
  }
  return absl::StrFormat("%016x", r);
}

absl::StatusOr<std::unique_ptr<Launcher>> Launcher::Start(LaunchOptions options) {
  if (options.identity.has_value()) MOBIUS_RETURN_IF_ERROR(CheckCanActAs(*options.identity));
  if (!options.validated) MOBIUS_RETURN_IF_ERROR(ValidateLaunch(options.run));
  auto s = std::make_unique<State>();
  RunConfig& run = options.run;
  run.training.microbatch = run.training.EffectiveMicrobatch();
  std::string job = run.job_id.empty() ? "job" : run.job_id;
  for (char& c : job) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  const bool anonymous = run.store_path.empty() && options.shm_dir.empty();
  if (anonymous) {
    run.store_path = absl::StrCat("memfd:", kStorePrefix, job);
    run.store_fd = kWorkerStoreFd;
  } else if (run.store_path.empty()) {
    run.store_path = absl::StrCat(options.shm_dir, "/", kStorePrefix, job, "-", RandomSuffix());
  }
  if (!options.model_config.has_value()) {
    MOBIUS_ASSIGN_OR_RETURN(options.model_config, model::LoadModelConfig(run.training.model_dir));
  }
  MOBIUS_ASSIGN_OR_RETURN(s->layout, MakeStoreLayout(*options.model_config, run));
  std::error_code ec;
  std::filesystem::create_directories(options.run_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("run directory ", options.run_dir, ": ", ec.message()));
  }
  chmod(options.run_dir.c_str(), 0700);
  if (access(options.worker_binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker binary ", options.worker_binary, " is not executable"));
  }
  MOBIUS_RETURN_IF_ERROR(CheckHostMemory(options, s->layout));
  const std::string config_path = options.run_dir + "/run.json";
  MOBIUS_RETURN_IF_ERROR(WriteRunConfig(config_path, run));
  chmod(config_path.c_str(), 0600);
  MOBIUS_ASSIGN_OR_RETURN(const int config_fd,
                          TextDescriptor("mobius-run-config", RunConfigToJson(run)));
  absl::StatusOr<std::unique_ptr<HostStore>> store =
      anonymous ? HostStore::CreateAnonymous(kStorePrefix + job, s->layout.total_bytes)
                : HostStore::Create(run.store_path, s->layout.total_bytes);
  if (!store.ok()) {
    close(config_fd);
    return store.status();
  }
  s->store = *std::move(store);
  if (options.identity.has_value()) {
    // The store is the job's: its user's, no one else's (a named one is a file in shm_dir).
    const int fd = s->store->fd() >= 0
                       ? s->store->fd()
                       : open(run.store_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    // The mode first: once the file is the user's, changing it would need CAP_FOWNER.
    if (fd < 0 || fchmod(fd, 0600) != 0 ||
        fchown(fd, options.identity->uid, options.identity->gid) != 0) {
      absl::Status st =
          MOBIUS_ERRNO_ERROR(absl::StrCat("give the store to uid ", options.identity->uid));
      if (fd >= 0 && fd != s->store->fd()) close(fd);
      close(config_fd);
      RemoveStore(*s);
      return st;
    }
    if (fd != s->store->fd()) close(fd);
  }
  s->options = std::move(options);
  s->workers.resize(s->options.run.num_workers);
  for (int r = 0; r < s->options.run.num_workers; ++r) {
    s->workers[r].rank = r;
    absl::Status st = Spawn(*s, s->workers[r], config_fd);
    if (!st.ok()) {
      KillAll(*s, SIGKILL);
      ReapAll(*s);
      RemoveStore(*s);
      close(config_fd);
      return absl::Status(absl::IsPermissionDenied(st) ? st.code() : absl::StatusCode::kInternal,
                          absl::StrCat("rank ", r, ": ", st.message()));
    }
  }
  close(config_fd);
  s->last_step_end = Clock::now();
  return std::unique_ptr<Launcher>(new Launcher(std::move(s)));
}

void Launcher::Cancel() {
  if (s_->cancel.exchange(true)) return;
  s_->cancel_at_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count() +
      absl::ToInt64Nanoseconds(s_->options.kill_grace);
  {
    std::lock_guard<std::mutex> lock(s_->store_mu);
    if (s_->store) s_->store->Abort(4);  // wakes every waiting worker; they exit with ABORTED
  }
  KillAll(*s_, SIGTERM);
}

void Launcher::RequestCheckpointAndStop(absl::Duration grace) {
  {
    std::lock_guard<std::mutex> lock(s_->store_mu);
    if (s_->store) s_->store->Publish(StoreLayout::kStopRequestWord, 1);
  }
  s_->stop_deadline_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count() +
      absl::ToInt64Nanoseconds(grace);
}

std::vector<pid_t> Launcher::worker_pids() const {
  std::vector<pid_t> pids;
  for (const Worker& w : s_->workers) pids.push_back(w.pid);
  return pids;
}

const std::string& Launcher::store_path() const { return s_->options.run.store_path; }

namespace {

// Splits complete lines off `buf`.
std::vector<std::string> TakeLines(std::string& buf) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(buf.substr(start, nl - start));
  }
  buf.erase(0, start);
  return lines;
}

void OnStdoutLine(Launcher::State& s, LaunchResult& result, const std::string& line) {
  absl::StatusOr<WorkerStepReport> rep = ParseWorkerReportLine(line);
  if (!rep.ok()) return;
  std::vector<WorkerStepReport>& got = s.pending[rep->step];
  got.push_back(*rep);
  if (static_cast<int>(got.size()) < s.options.run.num_workers) return;
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - s.last_step_end).count();
  s.last_step_end = now;
  StepReport agg = AggregateStep(got, seconds, !s.options.run.links.empty());
  for (size_t l = 0; l < s.options.run.links.size(); ++l) {
    agg.link_bytes.push_back({LinkBytes(s, l, 0), LinkBytes(s, l, 1)});
  }
  s.pending.erase(rep->step);
  result.steps.push_back(agg);
  if (s.options.on_step) s.options.on_step(agg);
}

uint32_t MonotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

std::string WithTail(std::string what, const Worker& w) {
  if (!w.tail.empty()) {
    what += absl::StrCat("; last lines:\n  ", absl::StrJoin(w.tail.begin(), w.tail.end(), "\n  "));
  }
  return what;
}

// The watchdog's verdict (launcher.h, LaunchOptions): empty while every rank looks alive.
std::string CheckWatchdog(const Launcher::State& s, const LaunchResult& result) {
  const LaunchOptions& o = s.options;
  if (o.heartbeat_timeout > absl::ZeroDuration()) {
    const uint32_t now = MonotonicSeconds();
    const int64_t limit = absl::ToInt64Seconds(o.heartbeat_timeout);
    for (const Worker& w : s.workers) {
      if (w.exited) continue;
      const uint32_t beat = s.store->Load(s.layout.heartbeat_word(w.rank));
      if (beat == 0 || now <= beat || now - beat < limit) continue;
      return WithTail(absl::StrCat("rank ", w.rank, " (pid ", w.pid, ") sent no heartbeat for ",
                                   now - beat, " s (stopped or frozen)"),
                      w);
    }
  }
  if (o.step_timeout > absl::ZeroDuration()) {
    const double idle = std::chrono::duration<double>(Clock::now() - s.last_step_end).count();
    if (idle >= absl::ToDoubleSeconds(o.step_timeout)) {
      return absl::StrCat(
          "no step completed in ", static_cast<int64_t>(idle), " s (",
          result.steps.empty() ? "none yet" : absl::StrCat("last step ", result.steps.back().step),
          "): the job is considered hung (step timeout ", absl::FormatDuration(o.step_timeout),
          ")");
    }
  }
  return "";
}

void OnStderrLine(Launcher::State& s, Worker& w, const std::string& line) {
  w.tail.push_back(line);
  if (w.tail.size() > kTailLines) w.tail.pop_front();
  if (s.options.on_log) s.options.on_log(w.rank, line);
}

}  // namespace

LaunchResult Launcher::Wait() {
  State& s = *s_;
  LaunchResult result;
  std::vector<std::string> failures;  // in the order the workers ended
  int live = static_cast<int>(s.workers.size());
  int stopped_ranks = 0;
  bool killed_rest = false;
  char buf[65536];
  while (live > 0) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, bool>> owners;  // (worker, is stdout)
    for (Worker& w : s.workers) {
      if (w.out_fd >= 0) fds.push_back({w.out_fd, POLLIN, 0}), owners.push_back({&w, true});
      if (w.err_fd >= 0) fds.push_back({w.err_fd, POLLIN, 0}), owners.push_back({&w, false});
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      auto [w, is_out] = owners[i];
      int& fd = is_out ? w->out_fd : w->err_fd;
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) {
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        close(fd);
        fd = -1;
        continue;
      }
      std::string& pending = is_out ? w->out_buf : w->err_buf;
      pending.append(buf, n);
      for (const std::string& line : TakeLines(pending)) {
        if (is_out) {
          OnStdoutLine(s, result, line);
        } else {
          OnStderrLine(s, *w, line);
        }
      }
    }
    if (fds.empty()) usleep(20000);
    // Reap; the first failure takes the others down.
    for (Worker& w : s.workers) {
      if (w.exited) continue;
      const pid_t p = waitpid(w.pid, &w.wait_status, WNOHANG);
      if (p != w.pid) continue;
      w.exited = true;
      --live;
      // Exit code 3: stopped after a checkpoint on request (run_command.h).
      const bool stopped = WIFEXITED(w.wait_status) && WEXITSTATUS(w.wait_status) == 3;
      if (stopped) ++stopped_ranks;
      const bool ok = WIFEXITED(w.wait_status) && (WEXITSTATUS(w.wait_status) == 0 || stopped);
      if (!ok && !s.cancel) {
        // Let the pipes drain a moment for the last lines before describing the failure.
        for (int* fd : {&w.err_fd}) {
          while (*fd >= 0) {
            const ssize_t n = read(*fd, buf, sizeof(buf));
            if (n <= 0) break;
            w.err_buf.append(buf, n);
            for (const std::string& line : TakeLines(w.err_buf)) OnStderrLine(s, w, line);
          }
        }
        failures.push_back(WithTail(
            absl::StrCat("rank ", w.rank, " (pid ", w.pid, ") ", DescribeExit(w.wait_status)), w));
      }
      if (!ok && !killed_rest) {
        killed_rest = true;
        s.store->Abort(5);
        KillAll(s, SIGKILL);
      }
    }
    if (!killed_rest && !s.cancel && live > 0) {
      std::string hung = CheckWatchdog(s, result);
      if (!hung.empty()) {
        failures.push_back(std::move(hung));
        killed_rest = true;
        s.store->Abort(6);
        KillAll(s, SIGKILL);
      }
    }
    if (s.stop_deadline_ns > 0 && !s.cancel) {
      const int64_t now =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count();
      if (now >= s.stop_deadline_ns) Cancel();  // they did not stop in time
    }
    if (s.cancel && !killed_rest) {
      const int64_t now =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count();
      if (now >= s.cancel_at_ns) {
        killed_rest = true;
        KillAll(s, SIGKILL);
      }
    }
  }
  ReapAll(s);
  for (size_t l = 0; l < s.options.run.links.size(); ++l) {
    result.links.push_back({s.options.run.links[l].name, LinkBytes(s, l, 0), LinkBytes(s, l, 1)});
  }
  RemoveStore(s);
  result.cancelled = s.cancel;
  result.stopped = !s.cancel && failures.empty() && stopped_ranks > 0;
  if (result.stopped) {
    result.status = absl::AbortedError("stopped on request after a checkpoint");
  } else if (s.cancel) {
    result.status = absl::CancelledError("the job was cancelled");
  } else if (!failures.empty()) {
    // A rank that stopped because another aborted the job is a consequence, not the cause: report
    // the first failure that is not one of those.
    std::string failure = failures.front();
    for (const std::string& f : failures) {
      if (f.find("the job was aborted") == std::string::npos) {
        failure = f;
        break;
      }
    }
    // Exit code 2 is the worker's "bad input before any step" (run_command.h).
    const bool input_error = failure.find("exited with code 2") != std::string::npos;
    if (failure.find("RESOURCE_EXHAUSTED") != std::string::npos) {
      result.status = absl::ResourceExhaustedError(failure);
    } else {
      result.status =
          input_error ? absl::InvalidArgumentError(failure) : absl::InternalError(failure);
    }
  }
  return result;
}

}  // namespace mobius::runtime
