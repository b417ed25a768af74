#include "server/jobs/service/state_dirs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace mobius::jobs {
namespace {

absl::Status Failed(const std::string& what) {
  absl::Status s = MOBIUS_ERRNO_ERROR(what);
  return absl::FailedPreconditionError(s.message());
}

// `path` exists as a directory (not a symlink) with `mode`; created when missing.
absl::Status EnsureDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Failed(absl::StrCat("state directory: create ", path));
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Failed(absl::StrCat("state directory: ", path));
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("state directory: ", path, " is not a directory"));
  }
  if ((st.st_mode & 07777) != mode && chmod(path.c_str(), mode) != 0) {
    return Failed(absl::StrCat("state directory: chmod ", path));
  }
  return absl::OkStatus();
}

// Creates `name` in the directory `dir_fd` for `owner`: made by this process (so nobody else
// can have put anything there), then handed over. An existing entry must already be a directory
// of `owner`'s.
absl::Status MakeOwnedDir(int dir_fd, const std::string& where, const char* name,
                          const Identity& owner) {
  const bool made = mkdirat(dir_fd, name, 0700) == 0;
  if (!made && errno != EEXIST) return Failed(absl::StrCat("create ", where, "/", name));
  struct stat st;
  if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Failed(absl::StrCat("stat ", where, "/", name));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, "/", name, " is not a directory (a symlink?): refused"));
  }
  if (made && (st.st_uid != owner.uid || st.st_gid != owner.gid)) {
    if (fchownat(dir_fd, name, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0) {
      return Failed(absl::StrCat("chown ", where, "/", name, " to uid ", owner.uid));
    }
  } else if (!made && st.st_uid != owner.uid) {
    return absl::FailedPreconditionError(absl::StrCat(where, "/", name, " belongs to uid ",
                                                      st.st_uid, ", not ", owner.uid, ": refused"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PrepareStateDir(const std::string& state_dir) {
  if (mkdir(state_dir.c_str(), 0711) != 0 && errno != EEXIST) {
    return Failed(absl::StrCat("state directory ", state_dir));
  }
  if (chmod(state_dir.c_str(), 0711) != 0) {
    return Failed(absl::StrCat("state directory: chmod ", state_dir));
  }
  if (absl::Status s = EnsureDir(state_dir + "/jobs", 0700); !s.ok()) return s;
  if (absl::Status s = EnsureDir(state_dir + "/users", 0711); !s.ok()) return s;
  RestrictDatabaseFiles(state_dir);
  return absl::OkStatus();
}

void RestrictDatabaseFiles(const std::string& state_dir) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    chmod(absl::StrCat(state_dir, "/jobs.db", suffix).c_str(), 0600);
  }
}

std::string UserStateDir(const std::string& state_dir, uid_t uid) {
  return absl::StrCat(state_dir, "/users/", uid);
}

std::string DefaultCheckpointDir(const std::string& state_dir, uid_t uid,
                                 const std::string& job_id) {
  return absl::StrCat(UserStateDir(state_dir, uid), "/jobs/", job_id, "/checkpoints");
}

std::string UserDatasetCacheDir(const std::string& state_dir, uid_t uid) {
  return UserStateDir(state_dir, uid) + "/datasets";
}

absl::Status EnsureUserStateDir(const std::string& state_dir, uid_t uid, const Identity& owner) {
  const std::string users = state_dir + "/users";
  const int users_fd = open(users.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (users_fd < 0) return Failed(absl::StrCat("open ", users));
  const std::string name = absl::StrCat(uid);
  absl::Status s = MakeOwnedDir(users_fd, users, name.c_str(), owner);
  if (s.ok()) {
    const int user_fd =
        openat(users_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (user_fd < 0) {
      s = Failed(absl::StrCat("open ", users, "/", name));
    } else {
      s = MakeOwnedDir(user_fd, users + "/" + name, "datasets", owner);
      close(user_fd);
    }
  }
  close(users_fd);
  return s;
}

}  // namespace mobius::jobs
