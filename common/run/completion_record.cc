#include "common/run/completion_record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/errors.h"
#include "nlohmann/json.hpp"

namespace mobius::runtime {
namespace {

// Closes the descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("write ", path));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Creates the temporary file in `dir_fd`; one left by a writer that died is replaced.
absl::StatusOr<int> CreateTemp(int dir_fd, const std::string& name, const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd =
        openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST || attempt > 0) break;
    unlinkat(dir_fd, name.c_str(), 0);
  }
  return MOBIUS_ERRNO_ERROR(absl::StrCat("create ", path));
}

absl::StatusOr<CompletionRecord> Parse(const std::string& text, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat(path, ": not a JSON object"));
  }
  auto field = [&](const char* key, bool is_string) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end()) return absl::DataLossError(absl::StrCat(path, ": no \"", key, "\""));
    if (is_string ? !it->is_string() : !it->is_number_integer()) {
      return absl::DataLossError(
          absl::StrCat(path, ": \"", key, "\" is not ", is_string ? "a string" : "an integer"));
    }
    return absl::OkStatus();
  };
  for (auto [key, is_string] :
       {std::pair{"job_id", true}, std::pair{"steps_done", false},
        std::pair{"final_checkpoint", true}, std::pair{"finished_unix_ms", false}}) {
    if (absl::Status s = field(key, is_string); !s.ok()) return s;
  }
  CompletionRecord r;
  r.job_id = j["job_id"].get<std::string>();
  r.steps_done = j["steps_done"].get<int64_t>();
  r.final_checkpoint = j["final_checkpoint"].get<std::string>();
  r.finished_unix_ms = j["finished_unix_ms"].get<int64_t>();
  if (r.job_id.empty()) return absl::DataLossError(absl::StrCat(path, ": empty \"job_id\""));
  return r;
}

}  // namespace

std::string CompletionRecordPath(const std::string& checkpoint_dir) {
  return absl::StrCat(checkpoint_dir, "/", kCompletionRecordFile);
}

absl::Status WriteCompletionRecord(const std::string& checkpoint_dir,
                                   const CompletionRecord& record) {
  if (record.job_id.empty()) return absl::InvalidArgumentError("completion record: no job id");
  if (record.steps_done < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("completion record: steps_done ", record.steps_done, " < 0"));
  }
  const std::string path = CompletionRecordPath(checkpoint_dir);
  const std::string text = nlohmann::json{{"job_id", record.job_id},
                                          {"steps_done", record.steps_done},
                                          {"final_checkpoint", record.final_checkpoint},
                                          {"finished_unix_ms", record.finished_unix_ms}}
                               .dump() +
                           "\n";
  Fd dir{open(checkpoint_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("open directory ", checkpoint_dir));
  const std::string tmp_name = absl::StrCat(kCompletionRecordFile, ".tmp-", getpid());
  const std::string tmp_path = absl::StrCat(checkpoint_dir, "/", tmp_name);
  absl::StatusOr<int> created = CreateTemp(dir.fd, tmp_name, tmp_path);
  if (!created.ok()) return created.status();
  absl::Status st;
  {
    Fd file{*created};
    st = WriteAll(file.fd, text, tmp_path);
    if (st.ok() && fsync(file.fd) != 0) st = MOBIUS_ERRNO_ERROR(absl::StrCat("fsync ", tmp_path));
  }
  if (st.ok() && renameat(dir.fd, tmp_name.c_str(), dir.fd, kCompletionRecordFile) != 0) {
    st = MOBIUS_ERRNO_ERROR(absl::StrCat("rename ", tmp_path, " to ", path));
  }
  if (!st.ok()) {
    unlinkat(dir.fd, tmp_name.c_str(), 0);
    return st;
  }
  // The rename itself is durable once the directory is.
  if (fsync(dir.fd) != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("fsync ", checkpoint_dir));
  return absl::OkStatus();
}

absl::StatusOr<CompletionRecord> ReadCompletionRecord(const std::string& checkpoint_dir) {
  const std::string path = CompletionRecordPath(checkpoint_dir);
  // O_NONBLOCK: a FIFO planted in its place must not block the reader (it is refused below).
  Fd file{open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": a symbolic link, not a completion record"));
    }
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("no completion record at ", path));
    }
    return MOBIUS_ERRNO_ERROR(absl::StrCat("open ", path));
  }
  struct stat st;
  if (fstat(file.fd, &st) != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("stat ", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  if (st.st_size > kMaxCompletionRecordBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": ", st.st_size, " bytes, at most ", kMaxCompletionRecordBytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(file.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("read ", path));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return Parse(text, path);
}

std::string DescribeCompletionRecord(const CompletionRecord& r) {
  return absl::StrCat(
      "job ", r.job_id, ", ", r.steps_done, " steps, ",
      r.final_checkpoint.empty() ? std::string("no checkpoint")
                                 : absl::StrCat("final checkpoint ", r.final_checkpoint),
      ", finished ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(r.finished_unix_ms),
                       absl::UTCTimeZone()));
}

}  // namespace mobius::runtime
