// JobCgroupRoot (finding and preparing the delegated subtree) and JobCgroup (one job's cgroup).
// The limit policy, names, OOM descriptions and the daemon's setup are in job_cgroup_policy.cc.
#include "host/launch/job_cgroup.h"

#include <signal.h>
#include <unistd.h>

#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace mobius::launch {
namespace {

constexpr char kDeviceProbe[] = "mobius-device-probe";
constexpr absl::Duration kPollInterval = absl::Milliseconds(10);

std::string Join(absl::string_view dir, absl::string_view name) {
  return absl::StrCat(dir, "/", name);
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::Status Precondition(absl::string_view context, const absl::Status& cause) {
  return absl::FailedPreconditionError(absl::StrCat(context, ": ", cause.message()));
}

std::vector<std::string> Words(absl::string_view text) {
  return absl::StrSplit(text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

bool Contains(const std::vector<std::string>& words, absl::string_view word) {
  for (const std::string& w : words) {
    if (w == word) return true;
  }
  return false;
}

// mountinfo escapes blanks, tabs, newlines and backslashes in paths as \ooo.
std::string UnescapeOctal(absl::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\' && i + 3 < in.size()) {
      const absl::string_view digits = in.substr(i + 1, 3);
      if (digits.size() == 3 && digits[0] >= '0' && digits[0] <= '3' && digits[1] >= '0' &&
          digits[1] <= '7' && digits[2] >= '0' && digits[2] <= '7') {
        out.push_back(
            static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(in[i]);
  }
  return out;
}

struct Cgroup2Mount {
  std::string root;         // the mount's root within the hierarchy ("/" unless bind-mounted)
  std::string mount_point;  // "/sys/fs/cgroup"
};

absl::StatusOr<Cgroup2Mount> FindCgroup2Mount(CgroupFs& fs, const std::string& mountinfo) {
  MOBIUS_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(mountinfo));
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // "36 25 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate": fields 4 and 5 are
    // the root and the mount point; the file system type is the first field after " - ".
    const size_t dash = line.find(" - ");
    if (dash == absl::string_view::npos) continue;
    std::vector<std::string> after = Words(line.substr(dash + 3));
    std::vector<std::string> before = Words(line.substr(0, dash));
    if (after.empty() || after[0] != "cgroup2" || before.size() < 5) continue;
    return Cgroup2Mount{UnescapeOctal(before[3]), UnescapeOctal(before[4])};
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no cgroup2 file system is mounted (no line of type cgroup2 in ", mountinfo,
                   "): the host uses cgroup v1 only"));
}

absl::StatusOr<std::vector<pid_t>> ReadPids(CgroupFs& fs, const std::string& procs_file) {
  MOBIUS_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(procs_file));
  std::vector<pid_t> pids;
  for (const std::string& word : Words(text)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(word, &pid)) {
      return absl::InternalError(absl::StrCat(procs_file, ": not a pid: \"", word, "\""));
    }
    pids.push_back(pid);
  }
  return pids;
}

// The pids in `dir` and the cgroups below it.
void CollectPids(CgroupFs& fs, const std::string& dir, std::vector<pid_t>& out) {
  absl::StatusOr<std::vector<pid_t>> pids = ReadPids(fs, Join(dir, "cgroup.procs"));
  if (pids.ok()) out.insert(out.end(), pids->begin(), pids->end());
  absl::StatusOr<std::vector<std::string>> children = fs.ListDirs(dir);
  if (!children.ok()) return;
  for (const std::string& child : *children) CollectPids(fs, Join(dir, child), out);
}

// Whether a process runs in `dir` or below it (cgroup.events' "populated", which counts the
// subtree; cgroup.procs alone does not).
absl::StatusOr<bool> Populated(CgroupFs& fs, const std::string& dir) {
  absl::StatusOr<std::string> events = fs.ReadFile(Join(dir, "cgroup.events"));
  if (events.ok()) {
    for (absl::string_view line : absl::StrSplit(*events, '\n', absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&line, "populated ")) return absl::StripAsciiWhitespace(line) != "0";
    }
  }
  std::vector<pid_t> pids;
  CollectPids(fs, dir, pids);
  return !pids.empty();
}

// SIGKILL to every process in the subtree; the processes that exited meanwhile are no error.
void SigkillTree(CgroupFs& fs, const std::string& dir) {
  std::vector<pid_t> pids;
  CollectPids(fs, dir, pids);
  for (pid_t pid : pids) {
    absl::Status st = fs.Kill(pid, SIGKILL);
    if (!st.ok() && !absl::IsNotFound(st)) LOG(WARNING) << "cgroup " << dir << ": " << st;
  }
}

absl::Status RemoveTree(CgroupFs& fs, const std::string& dir, absl::Time deadline) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<std::string> children, fs.ListDirs(dir));
  for (const std::string& child : children) {
    MOBIUS_RETURN_IF_ERROR(RemoveTree(fs, Join(dir, child), deadline));
  }
  for (;;) {
    absl::Status st = fs.RemoveDir(dir);
    // EBUSY (UNAVAILABLE): the last exiting process has not quite left yet.
    if (st.ok() || !absl::IsUnavailable(st) || absl::Now() > deadline) return st;
    absl::SleepFor(kPollInterval);
  }
}

// Kills everything in the cgroup `dir` and below, waits for it to be empty, removes the tree.
absl::Status KillAndRemove(CgroupFs& fs, const std::string& dir, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string kill_file = Join(dir, "cgroup.kill");
  bool kill_file_works = fs.Exists(kill_file);
  if (kill_file_works) {
    absl::Status st = fs.WriteFile(kill_file, "1");
    if (!st.ok()) {
      LOG(WARNING) << st << "; killing the processes one by one";
      kill_file_works = false;
    }
  }
  for (;;) {
    MOBIUS_ASSIGN_OR_RETURN(bool populated, Populated(fs, dir));
    if (!populated) break;
    // Again on every round without cgroup.kill: a process may have forked since the last one.
    if (!kill_file_works) SigkillTree(fs, dir);
    if (absl::Now() > deadline) {
      std::vector<pid_t> pids;
      CollectPids(fs, dir, pids);
      return absl::DeadlineExceededError(
          absl::StrCat("processes remain in cgroup ", dir, " ", absl::FormatDuration(timeout),
                       " after SIGKILL (pids ", absl::StrJoin(pids, " "),
                       "; stuck in the kernel, e.g. in a driver call)"));
    }
    absl::SleepFor(kPollInterval);
  }
  return RemoveTree(fs, dir, deadline);
}

absl::Status CheckWritable(CgroupFs& fs, const std::string& path) {
  absl::Status st = fs.CheckWritable(path);
  if (st.ok()) return st;
  return Precondition(
      "the cgroup is not delegated to this process (systemd: Delegate=yes in the unit; a "
      "container: a writable cgroup v2 mount with its own cgroup namespace)",
      st);
}

// Moves every process in `root` into `leaf`: enabling controllers for root's children needs root
// to be empty of processes.
absl::StatusOr<int> MoveProcesses(CgroupFs& fs, const std::string& root, const std::string& leaf) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<pid_t> pids, ReadPids(fs, Join(root, "cgroup.procs")));
  int moved = 0;
  for (pid_t pid : pids) {
    absl::Status st = fs.WriteFile(Join(leaf, "cgroup.procs"), absl::StrCat(pid));
    if (absl::IsNotFound(st)) continue;  // ESRCH: exited meanwhile
    if (!st.ok()) {
      return Precondition(absl::StrCat("cannot move process ", pid, " from ", root, " into ", leaf,
                                       " (cgroup v2 allows no processes in a cgroup whose "
                                       "controllers are enabled for its children)"),
                          st);
    }
    ++moved;
  }
  return moved;
}

// Writes "+<name>" to root's cgroup.subtree_control unless it is enabled already; the kernel's
// answer as is (EBUSY, UNAVAILABLE: a process is in root).
absl::Status EnableController(CgroupFs& fs, const std::string& root, absl::string_view name) {
  const std::string file = Join(root, "cgroup.subtree_control");
  MOBIUS_ASSIGN_OR_RETURN(std::string enabled, fs.ReadFile(file));
  if (Contains(Words(enabled), name)) return absl::OkStatus();
  return fs.WriteFile(file, absl::StrCat("+", name));
}

absl::Status EnableError(const std::string& root, absl::string_view name, const absl::Status& st) {
  return Precondition(
      absl::StrCat("cannot enable the ", name, " controller for ", root, "'s children",
                   absl::IsUnavailable(st) ? " (EBUSY: a process is still in it)" : ""),
      st);
}

// Whether a device program can be loaded and attached: to an empty cgroup made for the probe.
absl::Status ProbeDevices(CgroupFs& fs, const std::string& root) {
  MOBIUS_RETURN_IF_ERROR(fs.ProbeDeviceFilter());
  const std::string probe = Join(root, kDeviceProbe);
  if (fs.Exists(probe)) MOBIUS_RETURN_IF_ERROR(fs.RemoveDir(probe));  // an earlier probe's
  MOBIUS_RETURN_IF_ERROR(fs.MakeDir(probe));
  absl::Status attached = fs.AttachDeviceFilter(probe, NvidiaGpuRule({}));
  absl::Status removed = fs.RemoveDir(probe);
  if (!removed.ok()) LOG(WARNING) << "device filter probe: " << removed;
  return attached;
}

// The checks before anything is touched: a domain cgroup below the hierarchy's root, with the
// memory controller, writable. Returns its cgroup.controllers.
absl::StatusOr<std::vector<std::string>> CheckDelegated(CgroupFs& fs, const std::string& root) {
  // The hierarchy's root cgroup has no cgroup.type; every other cgroup has one.
  if (!fs.Exists(Join(root, "cgroup.type"))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this process is in the root cgroup ", root,
        " of the hierarchy: job cgroups would be siblings of the system's own; run mobiusd in a "
        "cgroup of its own (a systemd unit with Delegate=yes)"));
  }
  MOBIUS_ASSIGN_OR_RETURN(std::string type, fs.ReadFile(Join(root, "cgroup.type")));
  if (absl::StripAsciiWhitespace(type) != "domain") {
    return absl::FailedPreconditionError(
        absl::StrCat("cgroup ", root, " is of type \"", absl::StripAsciiWhitespace(type), "\" (",
                     Join(root, "cgroup.type"), "): the memory controller needs a domain cgroup"));
  }
  MOBIUS_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(Join(root, "cgroup.controllers")));
  std::vector<std::string> controllers = Words(text);
  if (!Contains(controllers, "memory")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the memory controller is not available in ", root, " (", Join(root, "cgroup.controllers"),
        " has: ", controllers.empty() ? "nothing" : absl::StrJoin(controllers, " "),
        "): the parent cgroup does not delegate it (systemd: Delegate=yes)"));
  }
  for (const std::string& path :
       {root, Join(root, "cgroup.procs"), Join(root, "cgroup.subtree_control")}) {
    MOBIUS_RETURN_IF_ERROR(CheckWritable(fs, path));
  }
  return controllers;
}

// Moves root's processes into the daemon's leaf and enables memory (and cpu) for root's children.
absl::Status MoveToLeafAndEnable(CgroupFs& fs, const std::vector<std::string>& controllers,
                                 CgroupSupport& sup) {
  if (!fs.Exists(sup.daemon_leaf)) {
    absl::Status st = fs.MakeDir(sup.daemon_leaf);
    if (!st.ok()) return Precondition("cannot make the daemon's leaf cgroup", st);
  }
  // A process that forks between the move and the enabling makes the enabling fail with EBUSY:
  // move again and retry, a few times.
  absl::Status enabled;
  for (int attempt = 0; attempt < 3; ++attempt) {
    MOBIUS_ASSIGN_OR_RETURN(int moved, MoveProcesses(fs, sup.root, sup.daemon_leaf));
    sup.moved_processes += moved;
    enabled = EnableController(fs, sup.root, "memory");
    if (!absl::IsUnavailable(enabled)) break;
  }
  if (!enabled.ok()) return EnableError(sup.root, "memory", enabled);
  if (!Contains(controllers, "cpu")) {
    sup.cpu_off = absl::StrCat(Join(sup.root, "cgroup.controllers"), " has no cpu controller");
  } else if (absl::Status st = EnableController(fs, sup.root, "cpu"); !st.ok()) {
    sup.cpu_off = std::string(EnableError(sup.root, "cpu", st).message());
  } else {
    sup.cpu = true;
  }
  return absl::OkStatus();
}

// What this kernel offers, as seen in the leaf (a child with the controllers enabled), and
// whether device programs can be attached.
void ProbeFeatures(CgroupFs& fs, bool probe_devices, CgroupSupport& sup) {
  sup.swap = fs.Exists(Join(sup.daemon_leaf, "memory.swap.max"));
  sup.kill = fs.Exists(Join(sup.daemon_leaf, "cgroup.kill"));
  sup.peak = fs.Exists(Join(sup.daemon_leaf, "memory.peak"));
  if (!probe_devices) {
    sup.devices_off = "not probed (JobCgroupOptions::probe_devices is false)";
  } else if (absl::Status st = ProbeDevices(fs, sup.root); !st.ok()) {
    sup.devices_off = std::string(st.message());
  } else {
    sup.devices = true;
  }
}

absl::Status WriteLimit(CgroupFs& fs, const std::string& dir, absl::string_view file,
                        absl::string_view value) {
  absl::Status st = fs.WriteFile(Join(dir, file), value);
  if (st.ok()) return st;
  return Annotate(st, absl::StrCat("job cgroup ", dir, ": setting ", file, " to ", value));
}

absl::Status CheckLimits(const JobLimits& limits, const CgroupSupport& support) {
  if (limits.memory_max_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_max_bytes must be >= 0 (0: no limit), got ", limits.memory_max_bytes));
  }
  if (limits.cpu_weight < 0 || limits.cpu_weight > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu_weight must be 1..10000 (0: the default), got ", limits.cpu_weight));
  }
  if (limits.cpu_weight > 0 && !support.cpu) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a cpu weight was asked for, but the cpu controller is off: ", support.cpu_off));
  }
  if (limits.gpu_minors.has_value() && !support.devices) {
    return absl::FailedPreconditionError(
        absl::StrCat("a GPU device filter was asked for, but it is off: ", support.devices_off));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FindOwnCgroupDir(CgroupFs& fs, const CgroupPaths& paths) {
  MOBIUS_ASSIGN_OR_RETURN(Cgroup2Mount mount, FindCgroup2Mount(fs, paths.mountinfo));
  MOBIUS_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(paths.self_cgroup));
  std::string path;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "0::")) path = std::string(line);
  }
  if (path.empty() || path[0] != '/') {
    return absl::FailedPreconditionError(
        absl::StrCat(paths.self_cgroup,
                     " has no \"0::/...\" line: the kernel puts this process "
                     "in no cgroup v2 (cgroup v1 only)"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") {
      return absl::FailedPreconditionError(absl::StrCat("this process's cgroup ", path,
                                                        " is outside its cgroup namespace (",
                                                        paths.self_cgroup, ")"));
    }
  }
  // A container that bind-mounts its own subtree (no cgroup namespace) sees the mount's root in
  // mountinfo and the full path in /proc/self/cgroup: the part below the mount is what counts.
  absl::string_view rel = path;
  if (mount.root != "/") {
    if (rel != mount.root && !absl::ConsumePrefix(&rel, absl::StrCat(mount.root, "/"))) {
      return absl::FailedPreconditionError(
          absl::StrCat("this process's cgroup ", path, " is not below the cgroup2 mount ",
                       mount.mount_point, " (which shows ", mount.root, ")"));
    }
    if (rel == mount.root) rel = "";
  }
  absl::ConsumePrefix(&rel, "/");
  absl::ConsumeSuffix(&rel, "/");
  return rel.empty() ? mount.mount_point : Join(mount.mount_point, rel);
}

// ---- JobCgroupRoot
// -------------------------------------------------------------------------------

struct JobCgroupRoot::State {
  std::shared_ptr<CgroupFs> fs;
  CgroupSupport support;
  absl::Duration kill_timeout;
  absl::Mutex mu;
  std::set<std::string> live ABSL_GUARDED_BY(mu);  // names of JobCgroups not yet removed

  void Release(const std::string& name) {
    absl::MutexLock lock(&mu);
    live.erase(name);
  }
};

struct JobCgroup::State {
  std::shared_ptr<JobCgroupRoot::State> root;
  std::string name;
  std::string path;
  JobLimits limits;
  int procs_fd = -1;
  bool removed = false;
};

JobCgroupRoot::JobCgroupRoot(std::shared_ptr<State> state) : s_(std::move(state)) {}
JobCgroupRoot::~JobCgroupRoot() = default;

const CgroupSupport& JobCgroupRoot::support() const { return s_->support; }

absl::StatusOr<std::unique_ptr<JobCgroupRoot>> JobCgroupRoot::Detect(JobCgroupOptions options) {
  auto state = std::make_shared<State>();
  state->fs = options.fs != nullptr ? options.fs : std::make_shared<RealCgroupFs>();
  state->kill_timeout = options.kill_timeout;
  CgroupFs& fs = *state->fs;
  CgroupSupport& sup = state->support;
  MOBIUS_ASSIGN_OR_RETURN(const std::string own, FindOwnCgroupDir(fs, options.paths));
  sup.root = own;
  if (BaseName(own) == options.daemon_leaf && Parent(own) != "/") sup.root = Parent(own);
  MOBIUS_ASSIGN_OR_RETURN(const std::vector<std::string> controllers, CheckDelegated(fs, sup.root));
  sup.daemon_leaf = Join(sup.root, options.daemon_leaf);
  MOBIUS_RETURN_IF_ERROR(MoveToLeafAndEnable(fs, controllers, sup));
  ProbeFeatures(fs, options.probe_devices, sup);
  return std::unique_ptr<JobCgroupRoot>(new JobCgroupRoot(std::move(state)));
}

absl::StatusOr<std::unique_ptr<JobCgroup>> JobCgroupRoot::CreateJob(absl::string_view job_id,
                                                                    const JobLimits& limits) {
  if (job_id.empty()) return absl::InvalidArgumentError("job cgroup: empty job id");
  MOBIUS_RETURN_IF_ERROR(CheckLimits(limits, s_->support));
  CgroupFs& fs = *s_->fs;
  const std::string name = JobCgroupName(job_id);
  const std::string dir = Join(s_->support.root, name);
  {
    absl::MutexLock lock(&s_->mu);
    if (!s_->live.insert(name).second) {
      return absl::AlreadyExistsError(absl::StrCat(
          "job cgroup ", dir, " is in use by a running job of this daemon (job id ", job_id, ")"));
    }
  }
  auto fail = [&](absl::Status st) {
    s_->Release(name);
    return st;
  };
  if (fs.Exists(dir)) {
    LOG(WARNING) << "job cgroup " << dir << " is left from an earlier daemon: killing what runs "
                 << "in it and removing it";
    absl::Status st = KillAndRemove(fs, dir, s_->kill_timeout);
    if (!st.ok()) return fail(Precondition("a leftover job cgroup will not go away", st));
  }
  if (absl::Status st = fs.MakeDir(dir); !st.ok()) return fail(st);
  auto undo = [&](absl::Status st) {
    absl::Status removed = fs.RemoveDir(dir);
    if (!removed.ok()) LOG(WARNING) << "job cgroup " << dir << " left behind: " << removed;
    return fail(st);
  };
  const std::string memory_max =
      limits.memory_max_bytes > 0 ? absl::StrCat(limits.memory_max_bytes) : "max";
  absl::Status st = WriteLimit(fs, dir, "memory.max", memory_max);
  if (st.ok() && fs.Exists(Join(dir, "memory.swap.max"))) {
    st = WriteLimit(fs, dir, "memory.swap.max", "0");
  }
  if (st.ok()) st = WriteLimit(fs, dir, "memory.oom.group", "1");
  if (st.ok() && limits.cpu_weight > 0) {
    st = WriteLimit(fs, dir, "cpu.weight", absl::StrCat(limits.cpu_weight));
  }
  if (st.ok() && limits.gpu_minors.has_value()) {
    st = Annotate(fs.AttachDeviceFilter(dir, NvidiaGpuRule(*limits.gpu_minors)),
                  absl::StrCat("job cgroup ", dir, ": GPU device filter"));
  }
  if (!st.ok()) return undo(st);
  absl::StatusOr<int> procs_fd = fs.OpenForWrite(Join(dir, "cgroup.procs"));
  if (!procs_fd.ok()) return undo(procs_fd.status());

  auto job = std::make_unique<JobCgroup::State>();
  job->root = s_;
  job->name = name;
  job->path = dir;
  job->limits = limits;
  job->procs_fd = *procs_fd;
  return std::unique_ptr<JobCgroup>(new JobCgroup(std::move(job)));
}

absl::StatusOr<int> JobCgroupRoot::RemoveLeftovers() {
  CgroupFs& fs = *s_->fs;
  MOBIUS_ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDirs(s_->support.root));
  int removed = 0;
  absl::Status first_error;
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, "job-")) continue;
    {
      absl::MutexLock lock(&s_->mu);
      if (s_->live.count(name) > 0) continue;
    }
    absl::Status st = KillAndRemove(fs, Join(s_->support.root, name), s_->kill_timeout);
    if (st.ok()) {
      ++removed;
    } else if (first_error.ok()) {
      first_error = st;
    }
  }
  if (!first_error.ok()) return first_error;
  return removed;
}

// ---- JobCgroup
// -----------------------------------------------------------------------------------

JobCgroup::JobCgroup(std::unique_ptr<State> state) : s_(std::move(state)) {}

JobCgroup::~JobCgroup() {
  absl::Status st = Remove();
  if (st.ok()) return;
  LOG(ERROR) << "removing job cgroup " << s_->path << ": " << st;
  // The name is free again: a later job with this id finds the directory a leftover and kills it.
  s_->root->Release(s_->name);
}

const std::string& JobCgroup::path() const { return s_->path; }
const JobLimits& JobCgroup::limits() const { return s_->limits; }
int JobCgroup::procs_fd() const { return s_->procs_fd; }

absl::Status JobCgroup::AddProcess(pid_t pid) {
  if (s_->removed) return absl::FailedPreconditionError("job cgroup already removed");
  absl::Status st = s_->root->fs->WriteFile(Join(s_->path, "cgroup.procs"), absl::StrCat(pid));
  if (st.ok()) return st;
  return Annotate(st, absl::StrCat("moving process ", pid, " into job cgroup ", s_->path));
}

absl::StatusOr<JobCgroupStats> JobCgroup::Stats() const {
  if (s_->removed) return absl::FailedPreconditionError("job cgroup already removed");
  CgroupFs& fs = *s_->root->fs;
  auto read_bytes = [&](absl::string_view file, int64_t& out) -> absl::Status {
    MOBIUS_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(Join(s_->path, file)));
    absl::string_view value = absl::StripAsciiWhitespace(text);
    if (value == "max") {
      out = -1;
    } else if (!absl::SimpleAtoi(value, &out)) {
      return absl::InternalError(absl::StrCat(Join(s_->path, file), ": not a number: ", value));
    }
    return absl::OkStatus();
  };
  JobCgroupStats stats;
  MOBIUS_RETURN_IF_ERROR(read_bytes("memory.current", stats.memory_current_bytes));
  MOBIUS_RETURN_IF_ERROR(read_bytes("memory.max", stats.memory_max_bytes));
  if (fs.Exists(Join(s_->path, "memory.peak"))) {
    MOBIUS_RETURN_IF_ERROR(read_bytes("memory.peak", stats.memory_peak_bytes));
  }
  MOBIUS_ASSIGN_OR_RETURN(std::string events, fs.ReadFile(Join(s_->path, "memory.events")));
  for (absl::string_view line : absl::StrSplit(events, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ' ');
    int64_t* field = kv.first == "oom"              ? &stats.oom
                     : kv.first == "oom_kill"       ? &stats.oom_kill
                     : kv.first == "oom_group_kill" ? &stats.oom_group_kill
                                                    : nullptr;
    if (field != nullptr) (void)absl::SimpleAtoi(kv.second, field);
  }
  return stats;
}

absl::Status JobCgroup::Remove() {
  if (s_->removed) return absl::OkStatus();
  if (s_->procs_fd >= 0) {
    close(s_->procs_fd);
    s_->procs_fd = -1;
  }
  absl::Status st = KillAndRemove(*s_->root->fs, s_->path, s_->root->kill_timeout);
  if (st.ok()) {
    s_->removed = true;
    s_->root->Release(s_->name);
  }
  return st;
}

}  // namespace mobius::launch
