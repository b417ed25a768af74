// The completion record: a small file that rank 0 of a pipeline run writes into the run's
// checkpoint directory once every step is done (worker/runtime/run_command.cc), so that a run's
// success survives even when the daemon could not record it (its state directory's disk full, the
// daemon killed between the last step and its own write). After a restart the daemon reads it for
// each job its store still has RUNNING (server/jobs/service/job_manager.h).
//
// CHECKPOINT_DIR/COMPLETED.json, one JSON object:
//   {"job_id": "j-000042", "steps_done": 400, "final_checkpoint": "/ckpt/checkpoint-00000400",
//    "finished_unix_ms": 1700000000000}
// final_checkpoint is empty when the directory holds no complete checkpoint. Unknown keys are
// ignored (a newer writer may add some).
//
// Written atomically: a temporary file in the same directory (O_CREAT | O_EXCL | O_NOFOLLOW),
// fsynced, renamed over COMPLETED.json, and the directory fsynced; a reader sees the old record,
// the new one, or none, never a partial one. Read with O_NOFOLLOW: a symbolic link in its place is
// refused, as is anything but a regular file of at most kMaxCompletionRecordBytes. Both run with
// the caller's own identity (the worker's, the job's user); nothing here changes ownership.
//
// Thread-safety: functions of the file system only; concurrent writers of one directory each
// leave a complete record (the last rename wins).
#ifndef MOBIUS_COMMON_RUN_COMPLETION_RECORD_H_
#define MOBIUS_COMMON_RUN_COMPLETION_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::runtime {

inline constexpr char kCompletionRecordFile[] = "COMPLETED.json";
inline constexpr int64_t kMaxCompletionRecordBytes = 64 * 1024;

struct CompletionRecord {
  std::string job_id;            // the run config's job_id (the daemon's job id)
  int64_t steps_done = 0;        // the run's last optimizer step (its total steps)
  std::string final_checkpoint;  // the newest complete checkpoint directory; empty: none
  int64_t finished_unix_ms = 0;

  friend bool operator==(const CompletionRecord&, const CompletionRecord&) = default;
};

// CHECKPOINT_DIR/COMPLETED.json.
std::string CompletionRecordPath(const std::string& checkpoint_dir);

// Writes the record atomically into `checkpoint_dir`, which must exist. INVALID_ARGUMENT for an
// empty job id or a negative step count; the errno's code (NOT_FOUND, PERMISSION_DENIED,
// RESOURCE_EXHAUSTED for a full disk, ...) naming the file otherwise. A failed write leaves no
// temporary file behind.
absl::Status WriteCompletionRecord(const std::string& checkpoint_dir,
                                   const CompletionRecord& record);

// Reads `checkpoint_dir`'s record. NOT_FOUND when there is none (or no such directory);
// FAILED_PRECONDITION for a symbolic link or something other than a regular file, or one larger
// than kMaxCompletionRecordBytes; DATA_LOSS for content that is not a record (malformed JSON, a
// missing or mistyped field).
absl::StatusOr<CompletionRecord> ReadCompletionRecord(const std::string& checkpoint_dir);

// "job j-000042, 400 steps, final checkpoint /ckpt/checkpoint-00000400, finished
// 2023-11-14T22:13:20Z" (for logs and state reasons).
std::string DescribeCompletionRecord(const CompletionRecord& record);

}  // namespace mobius::runtime

#endif  // MOBIUS_COMMON_RUN_COMPLETION_RECORD_H_
