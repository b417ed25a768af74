#include "worker/runtime/link_emulator.h"

#include <time.h>

#include <algorithm>
#include <cerrno>

namespace mobius::runtime {
namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // system-wide: comparable across the job's processes
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + ts.tv_nsec;
}

uint64_t Reserve(std::atomic<uint64_t>* free_at, std::atomic<uint64_t>* counted, uint64_t now,
                 uint64_t duration, uint64_t bytes) {
  uint64_t cur = free_at->load(std::memory_order_relaxed);
  uint64_t end;
  do {
    end = std::max(now, cur) + duration;
  } while (!free_at->compare_exchange_weak(cur, end, std::memory_order_acq_rel));
  counted->fetch_add(bytes, std::memory_order_relaxed);
  return end;
}

}  // namespace

void SleepUntilNs(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000ULL), static_cast<long>(ns % 1000000000ULL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

uint64_t ReserveLink(HostStore* store, const StoreLayout& layout, int link, int dir,
                     double seconds, uint64_t bytes) {
  auto word = [&](int index) {
    return store->at<std::atomic<uint64_t>>(layout.link_words + 32 * static_cast<uint64_t>(link) +
                                            8 * static_cast<uint64_t>(index));  // = LinkWord
  };
  return Reserve(word(dir), word(2 + dir), NowNs(), static_cast<uint64_t>(seconds * 1e9), bytes);
}

LinkEmulator::LinkEmulator(const RunConfig& run, const StoreLayout& layout, HostStore* store,
                           int rank)
    : store_(store), link_words_(layout.link_words) {
  if (rank >= 0 && rank < static_cast<int>(run.rank_links.size())) path_ = run.rank_links[rank];
  for (const EmulatedLink& l : run.links) seconds_per_byte_.push_back(1.0 / l.bytes_per_second);
}

std::atomic<uint64_t>* LinkEmulator::Word(int link, int index) const {
  return store_->at<std::atomic<uint64_t>>(link_words_ + 32 * static_cast<uint64_t>(link) +
                                           8 * static_cast<uint64_t>(index));  // = LinkWord
}

void LinkEmulator::OnChunk(backend::CopyDirection direction, uint64_t bytes) {
  if (direction == backend::CopyDirection::kDeviceToDevice || path_.empty()) return;
  const int dir = direction == backend::CopyDirection::kHostToDevice ? 0 : 1;
  const uint64_t now = NowNs();
  uint64_t done = now;
  for (int link : path_) {
    const uint64_t duration = static_cast<uint64_t>(bytes * seconds_per_byte_[link] * 1e9);
    done = std::max(done, Reserve(Word(link, dir), Word(link, 2 + dir), now, duration, bytes));
  }
  SleepUntilNs(done);
}

}  // namespace mobius::runtime
