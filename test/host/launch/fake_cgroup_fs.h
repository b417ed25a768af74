// A fake cgroupfs over a temp directory, for job_cgroup_test: real files and directories, with
// the kernel's part played here, as far as job_cgroup.h relies on it:
//   - MakeCgroup / MakeDir fill a new cgroup with its interface files: cgroup.procs, .events,
//     .type, .controllers (= what the parent enables), .subtree_control, .kill (unless
//     `no_kill_file`), and the memory.* / cpu.weight files of the controllers the parent enables
//     (memory.swap.max and memory.peak unless `no_swap` / `no_peak`);
//   - WriteFile replaces a file's content (the kernel parses each write), and interprets the
//     special files: a pid (or "0": `self_pid`) written to cgroup.procs moves it there from
//     wherever it was; "+ctl" to cgroup.subtree_control needs ctl in cgroup.controllers (ENOENT)
//     and no process in the cgroup (EBUSY); "1" to cgroup.kill ends the subtree's processes;
//   - cgroup.events' "populated" is computed when read;
//   - RemoveDir fails with EBUSY while there are processes or child cgroups, else removes the
//     interface files too;
//   - Kill ends a fake process (no signal is sent to anything real);
//   - processes in `unkillable` survive kill and cgroup.kill;
//   - `fail_write[path]`, `not_writable[path]`: errno to answer with; the device filter answers
//     `device_probe` and records attachments.
// Not thread-safe (the tests are single-threaded).
#ifndef MOBIUS_TEST_HOST_LAUNCH_FAKE_CGROUP_FS_H_
#define MOBIUS_TEST_HOST_LAUNCH_FAKE_CGROUP_FS_H_

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "host/launch/cgroup_fs.h"

namespace mobius::launch::testing {

class FakeCgroupFs : public RealCgroupFs {
 public:
  // `root`: the fake mount point, below which processes are looked for.
  explicit FakeCgroupFs(std::string root) : root_(std::move(root)) {}

  bool no_kill_file = false;
  bool no_swap = false;
  bool no_peak = false;
  pid_t self_pid = 4242;
  std::set<pid_t> unkillable;
  std::map<std::string, int> fail_write;    // path -> errno
  std::map<std::string, int> not_writable;  // path -> errno (EACCES, EROFS)
  absl::Status device_probe = absl::PermissionDeniedError("fake: no CAP_BPF");
  std::map<std::string, DeviceDenyRule> attached;  // cgroup path -> rule
  std::vector<std::pair<pid_t, int>> kills;        // (pid, signal) as sent

  // A cgroup with `controllers` available (its cgroup.controllers) and `pids` in it.
  void MakeCgroup(const std::string& path, const std::vector<std::string>& controllers,
                  const std::vector<pid_t>& pids = {}) {
    std::filesystem::create_directories(path);
    FillInterfaceFiles(path, controllers);
    Put(path + "/cgroup.procs", Lines(pids));
  }

  static std::string Get(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static void Put(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    if (Base(path) == "cgroup.events" && Exists(path)) {
      return absl::StrCat("populated ", Populated(Dir(path)) ? 1 : 0, "\nfrozen 0\n");
    }
    return RealCgroupFs::ReadFile(path);
  }

  absl::Status WriteFile(const std::string& path, absl::string_view text) override {
    if (auto it = fail_write.find(path); it != fail_write.end()) {
      return CgroupFsError(it->second, absl::StrCat("write ", path), __FILE__, __LINE__);
    }
    if (!std::filesystem::is_regular_file(path)) {
      return CgroupFsError(ENOENT, absl::StrCat("open ", path), __FILE__, __LINE__);
    }
    const std::string dir = Dir(path), base = Base(path);
    if (base == "cgroup.procs") {
      pid_t pid = 0;
      if (!absl::SimpleAtoi(text, &pid)) return Errno(EINVAL, path);
      if (pid == 0) pid = self_pid;
      RemovePidEverywhere(root_, pid);
      Put(path, Get(path) + absl::StrCat(pid, "\n"));
      return absl::OkStatus();
    }
    if (base == "cgroup.subtree_control") return WriteSubtreeControl(dir, text);
    if (base == "cgroup.kill") {
      if (text != "1") return Errno(EINVAL, path);
      KillTree(dir);
      return absl::OkStatus();
    }
    Put(path, std::string(text));
    return absl::OkStatus();
  }

  absl::Status CheckWritable(const std::string& path) override {
    if (auto it = not_writable.find(path); it != not_writable.end()) {
      return CgroupFsError(it->second, absl::StrCat(path, " is not writable"), __FILE__, __LINE__);
    }
    return RealCgroupFs::CheckWritable(path);
  }

  absl::Status MakeDir(const std::string& path) override {
    absl::Status st = RealCgroupFs::MakeDir(path);
    if (!st.ok()) return st;
    FillInterfaceFiles(path, Words(Get(Dir(path) + "/cgroup.subtree_control")));
    Put(path + "/cgroup.procs", "");
    return absl::OkStatus();
  }

  absl::Status RemoveDir(const std::string& path) override {
    if (!std::filesystem::is_directory(path)) return Errno(ENOENT, path);
    absl::StatusOr<std::vector<std::string>> children = ListDirs(path);
    if (!children->empty() || !Words(Get(path + "/cgroup.procs")).empty()) {
      return Errno(EBUSY, path);
    }
    std::filesystem::remove_all(path);
    return absl::OkStatus();
  }

  absl::Status Kill(pid_t pid, int signal) override {
    kills.emplace_back(pid, signal);
    if (unkillable.count(pid) == 0) RemovePidEverywhere(root_, pid);
    return absl::OkStatus();
  }

  absl::Status ProbeDeviceFilter() override { return device_probe; }
  absl::Status AttachDeviceFilter(const std::string& path, const DeviceDenyRule& rule) override {
    if (!device_probe.ok()) return device_probe;
    attached[path] = rule;
    return absl::OkStatus();
  }

 private:
  static std::string Dir(const std::string& path) { return path.substr(0, path.rfind('/')); }
  static std::string Base(const std::string& path) { return path.substr(path.rfind('/') + 1); }
  static std::vector<std::string> Words(const std::string& text) {
    return absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  }
  template <typename T>
  static std::string Lines(const std::vector<T>& items) {
    std::string out;
    for (const T& item : items) absl::StrAppend(&out, item, "\n");
    return out;
  }
  static absl::Status Errno(int e, const std::string& path) {
    return CgroupFsError(e, absl::StrCat("fake cgroupfs ", path), __FILE__, __LINE__);
  }

  void FillInterfaceFiles(const std::string& path, const std::vector<std::string>& controllers) {
    Put(path + "/cgroup.type", "domain\n");
    Put(path + "/cgroup.controllers", absl::StrJoin(controllers, " ") + "\n");
    Put(path + "/cgroup.subtree_control", "");
    Put(path + "/cgroup.events", "");
    if (!no_kill_file) Put(path + "/cgroup.kill", "");
    AddControllerFiles(path, controllers);
  }

  void AddControllerFiles(const std::string& path, const std::vector<std::string>& controllers) {
    for (const std::string& c : controllers) {
      if (c == "memory") {
        Put(path + "/memory.max", "max\n");
        Put(path + "/memory.current", "0\n");
        Put(path + "/memory.oom.group", "0\n");
        Put(path + "/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
        if (!no_swap) Put(path + "/memory.swap.max", "max\n");
        if (!no_peak) Put(path + "/memory.peak", "0\n");
      }
      if (c == "cpu") Put(path + "/cpu.weight", "100\n");
    }
  }

  absl::Status WriteSubtreeControl(const std::string& dir, absl::string_view text) {
    std::vector<std::string> enabled = Words(Get(dir + "/cgroup.subtree_control"));
    const std::vector<std::string> available = Words(Get(dir + "/cgroup.controllers"));
    for (const std::string& word : Words(std::string(text))) {
      const std::string name = word.substr(1);
      if (word[0] != '+') return Errno(EINVAL, dir);
      if (std::find(available.begin(), available.end(), name) == available.end()) {
        return Errno(ENOENT, dir + "/cgroup.subtree_control");
      }
      if (!Words(Get(dir + "/cgroup.procs")).empty()) {
        return Errno(EBUSY, dir + "/cgroup.subtree_control");
      }
      if (std::find(enabled.begin(), enabled.end(), name) == enabled.end()) enabled.push_back(name);
    }
    // The children gain the newly enabled controllers' files.
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.is_directory()) continue;
      std::vector<std::string> had = Words(Get(entry.path().string() + "/cgroup.controllers"));
      std::vector<std::string> added;
      for (const std::string& c : enabled) {
        if (std::find(had.begin(), had.end(), c) == had.end()) added.push_back(c);
      }
      AddControllerFiles(entry.path().string(), added);
      Put(entry.path().string() + "/cgroup.controllers", absl::StrJoin(enabled, " ") + "\n");
    }
    Put(dir + "/cgroup.subtree_control", absl::StrJoin(enabled, " ") + "\n");
    return absl::OkStatus();
  }

  bool Populated(const std::string& dir) {
    if (!Words(Get(dir + "/cgroup.procs")).empty()) return true;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.is_directory() && Populated(entry.path())) return true;
    }
    return false;
  }

  void RemovePidEverywhere(const std::string& dir, pid_t pid) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (entry.path().filename() != "cgroup.procs") continue;
      std::vector<std::string> pids = Words(Get(entry.path()));
      pids.erase(std::remove(pids.begin(), pids.end(), absl::StrCat(pid)), pids.end());
      Put(entry.path(), Lines(pids));
    }
  }

  void KillTree(const std::string& dir) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (entry.path().filename() != "cgroup.procs") continue;
      std::vector<std::string> left;
      for (const std::string& p : Words(Get(entry.path()))) {
        pid_t pid = 0;
        if (absl::SimpleAtoi(p, &pid) && unkillable.count(pid) > 0) left.push_back(p);
      }
      Put(entry.path(), Lines(left));
    }
  }

  const std::string root_;
};

}  // namespace mobius::launch::testing

#endif  // MOBIUS_TEST_HOST_LAUNCH_FAKE_CGROUP_FS_H_
