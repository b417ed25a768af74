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
  const std::string datasets = name + "/datasets";
  absl::Status s;
  if (mkdirat(users_fd, name.c_str(), 0700) == 0) {
    // Still this process's alone: its datasets/ too, then both handed over (the inner first).
    if (mkdirat(users_fd, datasets.c_str(), 0700) != 0 ||
        fchownat(users_fd, datasets.c_str(), owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0 ||
        fchownat(users_fd, name.c_str(), owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0) {
      s = Failed(absl::StrCat("create ", users, "/", name, " for uid ", owner.uid));
    }
  } else if (errno != EEXIST) {
    s = Failed(absl::StrCat("create ", users, "/", name));
  } else {
    // It exists: it must be the owner's directory. Nothing inside is looked at (the daemon may
    // not be able to, without CAP_DAC_OVERRIDE; the user's processes create what is missing).
    struct stat st;
    if (fstatat(users_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      s = Failed(absl::StrCat("stat ", users, "/", name));
    } else if (!S_ISDIR(st.st_mode) || st.st_uid != owner.uid) {
      s = absl::FailedPreconditionError(
          absl::StrCat(users, "/", name, " is not a directory of uid ", owner.uid, " (uid ",
                       st.st_uid, S_ISDIR(st.st_mode) ? "" : ", not a directory", "): refused"));
    }
  }
  close(users_fd);
  return s;
}

}  // namespace mobius::jobs
