// The host store's ceiling on this machine: how fast fresh pages of an anonymous memory file (the
// store's kind: memfd) are populated by their first write, plain (one page fault per page) and
// after MADV_POPULATE_WRITE (one call; what the store fill does, host_store.h Populate). A
// baseline for bench/memory/run.sh, measured in the same run. Prints JSON (MB/s).
//
//   populate_bench [MiB] [repeats]
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

double Once(size_t bytes, bool populate) {
  const int fd = memfd_create("mobius-populate-bench", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    std::perror("memfd");
    std::exit(1);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  const auto start = std::chrono::steady_clock::now();
  if (populate) madvise(p, bytes, MADV_POPULATE_WRITE);
  std::memset(p, 1, bytes);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  munmap(p, bytes);
  close(fd);
  return bytes / 1e6 / seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<double> plain, populated;
  for (int i = 0; i < repeats; ++i) {  // interleaved, so drift hits both alike
    plain.push_back(Once(mib << 20, false));
    populated.push_back(Once(mib << 20, true));
  }
  std::printf("{\"memfd_first_write_mb_s\": %.0f, \"memfd_populate_write_mb_s\": %.0f}\n",
              Median(plain), Median(populated));
  return 0;
}
