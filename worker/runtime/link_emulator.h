// LinkEmulator: PCIe links of an emulated GPU server for the CPU backend (a LinkModel, link_model.h).
//
// Each emulated link (a GPU's own x16 link, a switch's uplink to its root port, ...) has a
// bandwidth per direction (PCIe is full duplex). A copy chunk from rank r's "GPU" crosses the links
// of rank r's path (RunConfig::rank_links). Every link is a FIFO server in virtual time shared by all
// worker processes through the host store: a chunk reserves [max(now, link free), + bytes / bandwidth)
// on each link of its path (an atomic compare-and-swap on the link's "free at" word) and the copy
// proceeds when the last of its reservations ends (the thread sleeps until then). Two GPUs behind
// one switch therefore share the uplink's bandwidth, which is what cross mapping avoids.
// Device-to-device copies cross no host link and are not delayed.
//
// The emulation is a model, labelled as such wherever its numbers appear (reports carry
// `emulated: true` and the scale factor).
//
// Thread-safety: OnChunk may be called concurrently from any thread of any process of the job.
#ifndef MOBIUS_WORKER_RUNTIME_LINK_EMULATOR_H_
#define MOBIUS_WORKER_RUNTIME_LINK_EMULATOR_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "worker/backend/link_model.h"
#include "common/run/host_store.h"
#include "common/run/run_config.h"
#include "common/run/store_layout.h"

namespace mobius::runtime {

// One reservation of `seconds` on direction `dir` (0: H2D/send, 1: D2H/receive) of emulated link
// `link` (an index into the store's link words: RunConfig::links, or StoreLayout::internode_link),
// FIFO in virtual time with every other process of the job; counts `bytes` on it. Returns when the
// reservation ends (CLOCK_MONOTONIC ns); the caller sleeps until then (SleepUntilNs).
uint64_t ReserveLink(HostStore* store, const StoreLayout& layout, int link, int dir,
                     double seconds, uint64_t bytes);
void SleepUntilNs(uint64_t ns);

class LinkEmulator final : public backend::LinkModel {
 public:
  // `store` must outlive the emulator.
  LinkEmulator(const RunConfig& run, const StoreLayout& layout, HostStore* store, int rank);

  void OnChunk(backend::CopyDirection direction, uint64_t bytes) override;

 private:
  std::atomic<uint64_t>* Word(int link, int index) const;

  HostStore* store_;
  uint64_t link_words_;
  std::vector<int> path_;                 // this rank's links
  std::vector<double> seconds_per_byte_;  // [link]
};

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_LINK_EMULATOR_H_
