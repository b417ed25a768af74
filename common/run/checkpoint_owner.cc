#include "common/run/checkpoint_owner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <grp.h>

#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "nlohmann/json.hpp"

namespace mobius::checkpoint {
namespace {

constexpr size_t kMaxRecordBytes = 4096;

std::string OwnerPath(const std::string& root) { return root + "/" + kOwnerFile; }

}  // namespace

absl::StatusOr<std::optional<CheckpointOwner>> ReadCheckpointOwner(const std::string& root) {
  const std::string path = OwnerPath(root);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<CheckpointOwner>();
    return MOBIUS_ERRNO_ERROR(absl::StrCat("checkpoint owner record ", path));
  }
  std::string text(kMaxRecordBytes + 1, '\0');
  const ssize_t n = read(fd, text.data(), text.size());
  close(fd);
  if (n < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("checkpoint owner record ", path));
  text.resize(static_cast<size_t>(n));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (text.size() > kMaxRecordBytes || !j.is_object() || !j.contains("job") ||
      !j["job"].is_string() || !j.contains("uid") || !j["uid"].is_number_unsigned()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint owner record ", path, " is not a Mobius owner record ({\"job\", \"uid\"})"));
  }
  return std::optional<CheckpointOwner>(
      CheckpointOwner{j["job"].get<std::string>(), j["uid"].get<uid_t>()});
}

absl::Status CheckCheckpointOwner(const std::string& root, const std::string& job_id) {
  absl::StatusOr<std::optional<CheckpointOwner>> owner = ReadCheckpointOwner(root);
  if (!owner.ok()) return owner.status();
  if (!owner->has_value() || (*owner)->job_id == job_id) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint.dir: ", root, " holds the checkpoints of job ", (*owner)->job_id,
                   " (uid ", (*owner)->uid,
                   "); a job writes only into a checkpoint directory of its own: choose a new "
                   "directory or leave checkpoint.dir empty for the default"));
}

absl::StatusOr<gid_t> ResolveGroup(const std::string& group) {
  gid_t gid;
  if (absl::SimpleAtoi(group, &gid)) return gid;
  long size = sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct group gr;
  struct group* found = nullptr;
  int rc;
  while ((rc = getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found)) == ERANGE) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0 || found == nullptr) {
    return absl::NotFoundError(absl::StrCat("checkpoint.group: no group ", group, " here"));
  }
  return gr.gr_gid;
}

absl::Status ClaimCheckpointDir(const std::string& root, const std::string& job_id,
                                const std::string& group) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("checkpoint.dir: create ", root, ": ", ec.message()));
  }
  if (!group.empty()) {
    absl::StatusOr<gid_t> gid = ResolveGroup(group);
    if (!gid.ok()) return gid.status();
    const int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, static_cast<uid_t>(-1), *gid) != 0 || fchmod(fd, 02750) != 0) {
      absl::Status st = MOBIUS_ERRNO_ERROR(
          absl::StrCat("checkpoint.group: give ", root, " to group ", group));
      if (fd >= 0) close(fd);
      return st;
    }
    close(fd);
  }
  const std::string path = OwnerPath(root);
  const nlohmann::json j = {{"job", job_id}, {"uid", static_cast<uint64_t>(getuid())}};
  const std::string text = j.dump() + "\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return CheckCheckpointOwner(root, job_id);
    return MOBIUS_ERRNO_ERROR(absl::StrCat("checkpoint.dir: create ", path));
  }
  const bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!written) {
    unlink(path.c_str());
    errno = saved;
    return MOBIUS_ERRNO_ERROR(absl::StrCat("checkpoint.dir: write ", path));
  }
  return absl::OkStatus();
}

}  // namespace mobius::checkpoint
