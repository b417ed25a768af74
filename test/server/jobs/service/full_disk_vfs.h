// A full disk for SQLite, in-process: a VFS installed as the process's default that forwards to
// the real one and, while full, fails every write to the files under a chosen directory with
// SQLITE_FULL, as the unix VFS does when write(2) returns ENOSPC. Reads, locks and the WAL index
// (shared memory) keep working, as they do on a real full disk. Used by the job manager tests to
// fill the job store's disk at a chosen moment and to free it again.
//
// Thread-safety: Install() once (before any connection that should see it is opened); SetFull()
// and writes() from any thread.
#ifndef MOBIUS_TEST_SERVER_JOBS_SERVICE_FULL_DISK_VFS_H_
#define MOBIUS_TEST_SERVER_JOBS_SERVICE_FULL_DISK_VFS_H_

#include <cstdint>
#include <string>

namespace mobius::jobs::testing {

class FullDiskVfs {
 public:
  // Makes the VFS the default for connections opened from now on (idempotent).
  static void Install();
  // Files whose path starts with `dir` are the disk's ("" for none); resets full to false.
  static void Watch(const std::string& dir);
  static void SetFull(bool full);
  static bool full();
  // Writes refused since Install.
  static int64_t refused_writes();
};

}  // namespace mobius::jobs::testing

#endif  // MOBIUS_TEST_SERVER_JOBS_SERVICE_FULL_DISK_VFS_H_
