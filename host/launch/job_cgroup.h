// Per-job resource isolation with cgroup v2: every job's processes run in a cgroup of their own,
// `<root>/job-<id>`, with a memory limit (memory.max) so that one job cannot OOM the machine, a CPU
// weight, and (where the daemon is privileged enough) only its own GPUs' device nodes.
//
// The root is the daemon's delegated subtree, found from /proc/self/cgroup: a systemd unit with
// `Delegate=yes`, or a container whose cgroup is writable (Kubernetes, docker --cgroupns=private
// with a writable /sys/fs/cgroup). No D-Bus, no transient scopes. Detect() makes that directory
// usable: cgroup v2 forbids processes in a cgroup whose controllers are enabled for its children
// (the no-internal-processes rule), so it moves the processes there into a leaf of their own,
// `<root>/mobiusd`, then enables +memory (+cpu) in `<root>/cgroup.subtree_control`:
//
//   <root>/                    cgroup.subtree_control: +memory +cpu
//   <root>/mobiusd/            the daemon (and whatever else ran in <root>)
//   <root>/job-j-000123/       memory.max, memory.swap.max = 0, memory.oom.group = 1, cpu.weight
//
// Without a usable subtree (cgroup v1, a read-only /sys/fs/cgroup in a container, a CI runner, no
// memory controller delegated) Detect() fails with FAILED_PRECONDITION saying what is missing
// (which file, which controller, the errno); SetUpJobCgroups() turns that into one warning and the
// daemon runs jobs without isolation. One daemon per subtree: job cgroups this root did not create
// are leftovers of an earlier daemon, and are killed and removed.
//
// How the daemon uses it (server/daemon wiring; the flag is --job_cgroups=auto|off|required):
//
//   // startup, once:
//   MOBIUS_ASSIGN_OR_RETURN(JobCgroupMode mode, ParseJobCgroupMode(FLAGS_job_cgroups value));
//   MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<JobCgroupRoot> cgroups, SetUpJobCgroups(mode));
//   // per job, when cgroups != nullptr, before any of its processes exists:
//   JobLimits limits = JobLimitsFor(cgroups->support(), host_bytes_needed, ranks, minors);
//   MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<JobCgroup> cg, cgroups->CreateJob(job_id, limits));
//   // every process of the job (workers, tokenizer child) enters the cgroup before it allocates:
//   //   fork()ed child:   write(cg->procs_fd(), "0", 1) before execve (async-signal-safe)
//   //   posix_spawn()ed:  cg->AddProcess(pid) at once in the parent (see AddProcess for the gap)
//   // when a worker died of SIGKILL, before Remove():
//   absl::StatusOr<JobCgroupStats> stats = cg->Stats();
//   if (stats.ok() && stats->oom_killed()) failure = Annotate(failure, DescribeOomKill(*stats));
//   cg.reset();  // or cg->Remove(): kills what is left, waits for it, removes the directory
//
// GPU device isolation (cgroup_device_filter.h): a BPF device program on the job's cgroup denying
// the NVIDIA GPU nodes not granted. It needs CAP_SYS_ADMIN (or CAP_BPF + CAP_NET_ADMIN); Detect()
// probes for it and support().devices says whether jobs get it. Without it a job's GPUs are
// limited by CUDA_VISIBLE_DEVICES only: a convention the job's code follows, not a barrier.
//
// Thread-safety: JobCgroupRoot is thread-safe (CreateJob from any thread; names in use are kept
// under a lock). A JobCgroup is thread-compatible, owned by one launcher; procs_fd() may be used
// from a forked child. A JobCgroup may outlive its root.
#ifndef MOBIUS_HOST_LAUNCH_JOB_CGROUP_H_
#define MOBIUS_HOST_LAUNCH_JOB_CGROUP_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "host/launch/cgroup_fs.h"

namespace mobius::launch {

// Where to look for this process's cgroup: the seam tests point at a fake tree.
struct CgroupPaths {
  std::string mountinfo = "/proc/self/mountinfo";  // finds the cgroup2 mount (fstype cgroup2)
  std::string self_cgroup = "/proc/self/cgroup";   // the "0::/<path>" line
};

// This process's cgroup v2 directory: the cgroup2 mount point (the first cgroup2 line of
// mountinfo: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host) joined with the "0::"
// path less the mount's own root (a container that bind-mounts its subtree). FAILED_PRECONDITION
// naming the file when there is no cgroup2 mount, no "0::" line, or the path is outside the mount.
absl::StatusOr<std::string> FindOwnCgroupDir(CgroupFs& fs, const CgroupPaths& paths = {});

struct JobCgroupOptions {
  CgroupPaths paths;
  std::shared_ptr<CgroupFs> fs;         // nullptr: RealCgroupFs
  std::string daemon_leaf = "mobiusd";  // where the processes of the root go
  // How long Remove() waits for a job's killed processes to exit (a process with 100 GiB mapped
  // takes seconds to free it) before it gives up (the directory then stays).
  absl::Duration kill_timeout = absl::Seconds(10);
  bool probe_devices = true;  // try the BPF device program (cgroup_device_filter.h)
};

// What Detect() found; Describe() is the daemon's startup log line.
struct CgroupSupport {
  std::string root;         // the delegated directory, job cgroups are made in it
  std::string daemon_leaf;  // <root>/mobiusd
  int moved_processes = 0;  // how many Detect() moved from root into the leaf
  bool cpu = false;         // cpu controller enabled: jobs get cpu.weight
  bool swap = false;        // memory.swap.max exists (swap accounting on): set to 0
  bool kill = false;        // cgroup.kill (Linux 5.14); else SIGKILL of each of cgroup.procs
  bool peak = false;        // memory.peak (Linux 5.19); else Stats() has no peak
  std::string cpu_off;      // why not, when !cpu
  bool devices = false;     // jobs may be given a GPU device filter (JobLimits::gpu_minors)
  std::string devices_off;  // why not, when !devices
  // "root <root> (daemon in <root>/mobiusd, 1 process moved); memory, cpu, swap limit,
  //  cgroup.kill, memory.peak; GPU device filter: off (<why>)"
  std::string Describe() const;
};

struct JobLimits {
  // memory.max; 0: no limit ("max"), the job is still accounted and Stats() still works.
  int64_t memory_max_bytes = 0;
  // cpu.weight, 1..10000 (100 is every cgroup's default share); 0: leave the default.
  // REQUIRES: support().cpu when non-zero.
  int cpu_weight = 0;
  // The /dev/nvidia<minor> nodes the job may open (NvidiaDeviceMinor); other NVIDIA GPUs are
  // denied. nullopt: no device filter. REQUIRES: support().devices when set.
  std::optional<std::vector<uint32_t>> gpu_minors;
};

// The memory limit policy: the job's host estimate plus max(25%, 1 GiB); 0 (no limit) for an
// unknown (<= 0) estimate. Why a margin: the estimate is the planner's prediction of the job's
// PSS (the store, pinned buffers, the workers' own memory), measured within ~10% of the real
// peak at 0.3B parameters; on top come the allocator's slack (glibc arenas per thread, freed
// memory not returned), the tokenizer child, and page cache the job's reads and checkpoint
// writes charge to it (reclaimable, but charged). 25% covers the model-size-proportional part
// with room over the measured error; 1 GiB covers the fixed part that dominates small jobs
// (CUDA context and runtime libraries per worker, the tokenizer). A limit that is too tight kills
// a healthy job: the margin errs on the side of letting it run.
int64_t JobMemoryLimit(int64_t host_estimate_bytes);

// The limits the daemon gives a job: JobMemoryLimit(host_estimate_bytes); cpu.weight 100 per
// worker process (capped at 10000) when the cpu controller is on, so that under CPU contention
// an 8-GPU job gets 8 times a 1-GPU job's share (each worker drives one GPU, and its host-side
// work is per worker); `gpu_minors` when support.devices, else none.
JobLimits JobLimitsFor(const CgroupSupport& support, int64_t host_estimate_bytes, int workers,
                       std::optional<std::vector<uint32_t>> gpu_minors);

// "job-<id>" with every character outside [A-Za-z0-9._-] replaced by '_'; when anything was
// replaced, or the id is longer than 64, the first 64 characters and "-<8 hex digits>" of a hash
// of the whole id, so different ids never share a name.
std::string JobCgroupName(absl::string_view job_id);

struct JobCgroupStats {
  int64_t memory_current_bytes = 0;  // memory.current
  int64_t memory_peak_bytes = -1;    // memory.peak; -1 when the kernel has none (< 5.19)
  int64_t memory_max_bytes = -1;     // memory.max; -1 for "max"
  // memory.events (the job's cgroup and any below it):
  int64_t oom = 0;             // the limit was hit and reclaim could not make room
  int64_t oom_kill = 0;        // processes of the job killed by an OOM killer (any limit's)
  int64_t oom_group_kill = 0;  // times the whole job was killed at once (memory.oom.group)
  bool oom_killed() const { return oom_kill > 0 || oom_group_kill > 0; }
};

// Why the job's processes were OOM-killed, for the job's failure message; "" when they were not.
//   "the job was killed by its cgroup's memory limit (memory.max 12.5 GiB, peak 12.5 GiB): it
//    needed more host memory than its estimate plus the margin"  (memory.events "oom" > 0)
//   "the job was killed by the kernel's OOM killer, not at its own limit (memory.max 12.5 GiB,
//    peak 3.1 GiB): the machine, or mobiusd's own cgroup, ran out of memory"
// ("peak" only where the kernel has memory.peak.)
std::string DescribeOomKill(const JobCgroupStats& stats);

// One job's cgroup. Destroying it is Remove() with failures logged.
class JobCgroup {
 public:
  ~JobCgroup();
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  const std::string& path() const;  // <root>/job-<id>
  const JobLimits& limits() const;

  // An O_WRONLY | O_CLOEXEC descriptor of the cgroup's cgroup.procs, open until Remove(): a
  // child between fork() and execve() moves itself in with write(fd, "0", 1). The descriptor is
  // close-on-exec, so the exec'd program does not inherit it. -1 after Remove().
  int procs_fd() const;

  // Moves process `pid` (all its threads) into the cgroup: for a child started by posix_spawn,
  // called right after the spawn returns. Until then the child runs in the daemon's leaf, and
  // what it allocated there stays charged to the daemon (cgroup v2 does not move charges): a
  // freshly exec'd worker's first milliseconds, a few MiB. NOT_FOUND when the process is gone.
  absl::Status AddProcess(pid_t pid);

  // Reads memory.current, memory.peak, memory.max and memory.events. REQUIRES: before Remove().
  absl::StatusOr<JobCgroupStats> Stats() const;

  // Kills whatever still runs in the cgroup (cgroup.kill, else SIGKILL of each process, again
  // until none is left: a process may fork meanwhile), waits up to kill_timeout for it to be
  // empty, and removes the directory (child cgroups the job made first). The launcher reaps its
  // own children as before: a killed worker stays a zombie of its parent, not of the cgroup.
  // OK once removed (and on every later call); DEADLINE_EXCEEDED naming the pids that remain, or
  // the rmdir's error. After a failure it may be called again; the destructor tries once more,
  // then logs and leaves the directory to the next CreateJob of the id or RemoveLeftovers().
  absl::Status Remove();

  struct State;

 private:
  friend class JobCgroupRoot;
  explicit JobCgroup(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

class JobCgroupRoot {
 public:
  // Finds and prepares the delegated subtree (see the top of this file). If this process is
  // already in a cgroup named options.daemon_leaf (a second Detect(), a daemon re-exec'd in
  // place) its parent is the root. FAILED_PRECONDITION with the reason when it cannot be used:
  // no cgroup2 mount or no "0::" line; the root cgroup of the hierarchy (a daemon outside any
  // unit: jobs would be siblings of system.slice); a threaded cgroup; memory missing from
  // cgroup.controllers (the parent does not delegate it); the directory, its cgroup.procs or
  // cgroup.subtree_control not writable (with the errno: EACCES, EROFS); a process that cannot
  // be moved into the leaf; the controllers refusing to be enabled. A missing cpu controller is
  // not an error: support().cpu is false.
  static absl::StatusOr<std::unique_ptr<JobCgroupRoot>> Detect(JobCgroupOptions options = {});
  ~JobCgroupRoot();

  const CgroupSupport& support() const;

  // Makes `<root>/<JobCgroupName(job_id)>` and writes its limits before any process is in it:
  // memory.max; memory.swap.max = 0 where swap is accounted (a job over its limit should fail
  // at once with a clear reason, not thrash: a training step touches the job's whole working set,
  // so a swapped-out job runs orders of magnitude slower and the step watchdog would kill it
  // later with a "hang" as the reason); memory.oom.group = 1 (the OOM killer takes the whole job,
  // as the launcher's first-failure teardown would); cpu.weight; the GPU device filter.
  // A cgroup of that name left by an earlier daemon is killed and removed first.
  // Errors: INVALID_ARGUMENT (empty id, limits out of range), FAILED_PRECONDITION (a limit that
  // support() says is unavailable; a leftover that will not go away), ALREADY_EXISTS (a live
  // JobCgroup of this root has the name: the same job id twice), or the write that failed;
  // nothing is left behind on error.
  absl::StatusOr<std::unique_ptr<JobCgroup>> CreateJob(absl::string_view job_id,
                                                       const JobLimits& limits);

  // Kills and removes every job-* cgroup under the root that no live JobCgroup of this root
  // owns (an earlier daemon's); the daemon calls it at startup (SetUpJobCgroups does). Returns
  // how many were removed; the first failure (after trying them all) otherwise.
  absl::StatusOr<int> RemoveLeftovers();

  struct State;

 private:
  explicit JobCgroupRoot(std::shared_ptr<State> state);
  std::shared_ptr<State> s_;
};

// The daemon's --job_cgroups flag.
enum class JobCgroupMode {
  kOff,       // no cgroups
  kAuto,      // isolate when the delegated subtree allows it; otherwise one warning, run without
  kRequired,  // refuse to start without isolation
};
inline constexpr char kJobCgroupsFlagHelp[] =
    "Per-job cgroup v2 isolation (memory.max from the job's host estimate plus a margin, "
    "cpu.weight per worker, GPU device filter when privileged) in the daemon's delegated subtree "
    "(systemd Delegate=yes, or a writable container cgroup): auto (on when possible, else one "
    "warning), off, required (refuse to start without it)";
// "auto", "off", "required"; INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<JobCgroupMode> ParseJobCgroupMode(absl::string_view value);

// The daemon's startup call: kOff -> nullptr. kAuto -> Detect(); on failure LOG(WARNING)
// "cgroup v2 isolation off: <reason>; jobs run without memory.max" and nullptr. kRequired ->
// Detect()'s error, if any. On success it removes leftovers (logged) and logs
// "cgroup v2 isolation on: <support().Describe()>".
absl::StatusOr<std::unique_ptr<JobCgroupRoot>> SetUpJobCgroups(JobCgroupMode mode,
                                                               JobCgroupOptions options = {});

}  // namespace mobius::launch

#endif  // MOBIUS_HOST_LAUNCH_JOB_CGROUP_H_
