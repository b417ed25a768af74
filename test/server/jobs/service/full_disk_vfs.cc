#include "test/server/jobs/service/full_disk_vfs.h"

#include <sqlite3.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace mobius::jobs::testing {
namespace {

sqlite3_vfs* g_real = nullptr;
sqlite3_vfs g_vfs;
std::mutex g_mu;
std::string g_dir;  // guarded by g_mu
std::atomic<bool> g_full{false};
std::atomic<int64_t> g_refused{0};

struct File {
  sqlite3_file base;   // pMethods = &kMethods once the real file is open
  sqlite3_file* real;  // the real VFS's file, allocated right after this struct
  bool watched;
};

File* Of(sqlite3_file* f) { return reinterpret_cast<File*>(f); }
sqlite3_file* Real(sqlite3_file* f) { return Of(f)->real; }

int Close(sqlite3_file* f) { return Real(f)->pMethods->xClose(Real(f)); }
int Read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  return Real(f)->pMethods->xRead(Real(f), buf, n, off);
}
int Write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  if (Of(f)->watched && g_full) {
    ++g_refused;
    return SQLITE_FULL;
  }
  return Real(f)->pMethods->xWrite(Real(f), buf, n, off);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int Sync(sqlite3_file* f, int flags) { return Real(f)->pMethods->xSync(Real(f), flags); }
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int level) { return Real(f)->pMethods->xLock(Real(f), level); }
int Unlock(sqlite3_file* f, int level) { return Real(f)->pMethods->xUnlock(Real(f), level); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  // A size hint would preallocate (fallocate) past a full disk.
  if (op == SQLITE_FCNTL_SIZE_HINT && Of(f)->watched && g_full) return SQLITE_FULL;
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** p) {
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, p);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int delete_flag) {
  return Real(f)->pMethods->xShmUnmap(Real(f), delete_flag);
}
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** p) {
  return Real(f)->pMethods->xFetch(Real(f), off, n, p);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return Real(f)->pMethods->xUnfetch(Real(f), off, p);
}

const sqlite3_io_methods kMethods = {
    .iVersion = 3,
    .xClose = Close,
    .xRead = Read,
    .xWrite = Write,
    .xTruncate = Truncate,
    .xSync = Sync,
    .xFileSize = FileSize,
    .xLock = Lock,
    .xUnlock = Unlock,
    .xCheckReservedLock = CheckReservedLock,
    .xFileControl = FileControl,
    .xSectorSize = SectorSize,
    .xDeviceCharacteristics = DeviceCharacteristics,
    .xShmMap = ShmMap,
    .xShmLock = ShmLock,
    .xShmBarrier = ShmBarrier,
    .xShmUnmap = ShmUnmap,
    .xFetch = Fetch,
    .xUnfetch = Unfetch,
};

int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  File* f = Of(file);
  f->real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->base.pMethods = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    f->watched =
        name != nullptr && !g_dir.empty() && std::strncmp(name, g_dir.c_str(), g_dir.size()) == 0;
  }
  const int rc = g_real->xOpen(g_real, name, f->real, flags, out_flags);
  if (f->real->pMethods != nullptr) f->base.pMethods = &kMethods;
  return rc;
}

}  // namespace

void FullDiskVfs::Install() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_real = sqlite3_vfs_find(nullptr);
    g_vfs = *g_real;
    g_vfs.zName = "mobius_full_disk";
    g_vfs.szOsFile = static_cast<int>(sizeof(File)) + g_real->szOsFile;
    g_vfs.xOpen = Open;
    g_vfs.pNext = nullptr;
    sqlite3_vfs_register(&g_vfs, /*makeDflt=*/1);
  });
}

void FullDiskVfs::Watch(const std::string& dir) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_dir = dir;
  g_full = false;
}

void FullDiskVfs::SetFull(bool full) { g_full = full; }
bool FullDiskVfs::full() { return g_full; }
int64_t FullDiskVfs::refused_writes() { return g_refused; }

}  // namespace mobius::jobs::testing
