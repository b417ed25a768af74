#include "host/launch/cgroup_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace mobius::launch {

absl::Status CgroupFsError(int error_number, absl::string_view what, const char* file, int line) {
  absl::Status st = ErrnoError(error_number, what, file, line);
  if (error_number != EBUSY) return st;
  return absl::UnavailableError(st.message());
}

absl::StatusOr<std::string> RealCgroupFs::ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_CGROUP_FS_ERROR(absl::StrCat("open ", path));
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status status = MOBIUS_CGROUP_FS_ERROR(absl::StrCat("read ", path));
      close(fd);
      return status;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

absl::Status RealCgroupFs::WriteFile(const std::string& path, absl::string_view text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_CGROUP_FS_ERROR(absl::StrCat("open ", path));
  ssize_t n;
  do {
    n = write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  // A cgroup file takes the whole command in one write or refuses it with an errno.
  absl::Status status = n < 0
                            ? MOBIUS_CGROUP_FS_ERROR(absl::StrCat("write \"", text, "\" to ", path))
                        : static_cast<size_t>(n) != text.size()
                            ? absl::InternalError(absl::StrCat("short write to ", path))
                            : absl::OkStatus();
  close(fd);
  return status;
}

absl::StatusOr<int> RealCgroupFs::OpenForWrite(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_CGROUP_FS_ERROR(absl::StrCat("open ", path));
  return fd;
}

absl::Status RealCgroupFs::CheckWritable(const std::string& path) {
  if (access(path.c_str(), W_OK) != 0) {
    return MOBIUS_CGROUP_FS_ERROR(absl::StrCat(path, " is not writable"));
  }
  return absl::OkStatus();
}

bool RealCgroupFs::Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::Status RealCgroupFs::MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0) return MOBIUS_CGROUP_FS_ERROR(absl::StrCat("mkdir ", path));
  return absl::OkStatus();
}

absl::Status RealCgroupFs::RemoveDir(const std::string& path) {
  if (rmdir(path.c_str()) != 0) return MOBIUS_CGROUP_FS_ERROR(absl::StrCat("rmdir ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> RealCgroupFs::ListDirs(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return MOBIUS_CGROUP_FS_ERROR(absl::StrCat("opendir ", path));
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = entry->d_type == DT_DIR;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = stat(absl::StrCat(path, "/", name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) names.push_back(name);
  }
  closedir(dir);
  return names;
}

absl::Status RealCgroupFs::Kill(pid_t pid, int signal) {
  if (kill(pid, signal) != 0) return MOBIUS_CGROUP_FS_ERROR(absl::StrCat("kill ", pid));
  return absl::OkStatus();
}

absl::Status RealCgroupFs::ProbeDeviceFilter() { return launch::ProbeDeviceFilter(); }

absl::Status RealCgroupFs::AttachDeviceFilter(const std::string& path, const DeviceDenyRule& rule) {
  return launch::AttachDeviceFilter(path, rule);
}

}  // namespace mobius::launch
