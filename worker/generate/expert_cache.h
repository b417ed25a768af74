// ExpertCache: a mixture-of-experts model's experts kept in host memory, a bounded set of them on
// the device (generate's routed experts). A MoE block's forward asks for the experts its rows were
// routed to (units::ExpertSource); an expert already on the device is used there, any other is
// copied into the least recently used slot. A decoding step of one token runs k of a block's E
// experts, so it moves k experts at most instead of the E a model streamed block by block moves
// (Qwen3-30B-A3B: 8 of 128), and fewer when the router picks experts it picked recently.
//
// Layout: `slots` device slots of slot_bytes() each, one expert per slot with its tensors (gate,
// up, down; gpt-oss's gate_up and down with their biases) at their offsets in the unit's weight
// layout relative to its first
// (units::UnitRunner::ExpertSpan), so the runner reads them as it reads them from its own buffer.
// Host memory: each expert's tensors as 16-bit values, taken (moved) from the map the
// decoder's weights come from, so the experts are held once; then copied into one pinned
// allocation (Backend::AllocateHost: a GPU's copies from it are asynchronous DMA at the link's
// full rate), tensor by tensor, each map entry freed as it is copied. Where pinning fails (a
// model larger than what the system lets a process lock), they stay pageable (pin_error()).
//
// `upload_all` (the baseline a block-streaming offloader is): every call copies all E experts of
// its block, resident or not, into slots reserved for that call (slots >= E).
//
// Not thread-safe: one decoder's queue calls it.
#ifndef MOBIUS_WORKER_GENERATE_EXPERT_CACHE_H_
#define MOBIUS_WORKER_GENERATE_EXPERT_CACHE_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/backend/backend.h"
#include "worker/model/unit_runner.h"

namespace mobius::generate {

class ExpertCache final : public units::ExpertSource {
 public:
  struct Stats {
    int64_t calls = 0;      // MoE block forwards that asked
    int64_t fetched = 0;    // experts asked for (each call's experts with rows)
    int64_t uploaded = 0;   // of those, copied from the host (not on the device)
    uint64_t uploaded_bytes = 0;
    // What copying every expert of the block at each call would have moved (a model streamed
    // block by block, the experts included).
    uint64_t all_experts_bytes = 0;
  };

  // The slot of one expert of `runners` (the model's units, by unit index; those without experts
  // are skipped), 256-byte aligned.
  static uint64_t SlotBytes(const std::vector<const units::UnitRunner*>& runners);
  // The most experts one call can ask for: the largest count of a block's experts.
  static int64_t MaxBlockExperts(const std::vector<const units::UnitRunner*>& runners);

  // Allocates `slots` slots (RESOURCE_EXHAUSTED past the backend's cap; INVALID_ARGUMENT below
  // MaxBlockExperts or for a model without experts). `runners` (of `config`) must outlive the
  // cache.
  static absl::StatusOr<std::unique_ptr<ExpertCache>> Create(
      const model::ModelConfig& config, backend::Backend* backend,
      const std::vector<const units::UnitRunner*>& runners, int64_t slots,
      bool upload_all = false);

  // Moves every expert's tensors out of `bf16` (HF names; the entries stay, emptied). A missing
  // or misshapen one: INVALID_ARGUMENT naming it (nothing moved before the check passed).
  absl::Status TakeHostWeights(std::map<std::string, std::vector<uint16_t>>& bf16);

  absl::StatusOr<std::vector<const void*>> Fetch(backend::Queue& queue, int64_t unit,
                                                 const std::vector<int32_t>& experts) override;

  const Stats& stats() const { return stats_; }
  int64_t slots() const { return static_cast<int64_t>(entries_.size()); }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t host_bytes() const { return host_bytes_; }
  bool pinned() const { return !pinned_.empty(); }  // the host experts are in pinned memory
  // Why they are not (the allocation's error); empty when pinned.
  const std::string& pin_error() const { return pin_error_; }

 private:
  struct Entry {
    int64_t unit = -1;
    int32_t expert = -1;
    uint64_t used = 0;  // the clock when last asked for; 0: empty
  };
  struct HostExpert {
    std::vector<std::vector<uint16_t>> tensors;  // as UnitExperts::names (empty once pinned)
    std::vector<const uint16_t*> data;           // each tensor's values, wherever they are
    std::vector<int64_t> elements;
  };
  struct UnitExperts {
    std::vector<int64_t> rel;  // each tensor's elements from the expert's first tensor
    // [expert]: its tensors' names (gate, up, down; gpt-oss: gate_up and down with biases).
    std::vector<std::vector<std::string>> names;
    std::vector<HostExpert> experts;
  };

  ExpertCache(backend::Backend* backend, std::vector<const units::UnitRunner*> runners,
              uint64_t slot_bytes, bool upload_all)
      : backend_(backend), runners_(std::move(runners)), slot_bytes_(slot_bytes),
        upload_all_(upload_all) {}
  // A slot for (unit, expert) not asked for since `call_start` (least recently used first).
  int Victim(uint64_t call_start) const;
  void Pin();  // TakeHostWeights': the host experts into one pinned allocation, if it can be had
  absl::Status Upload(backend::Queue& queue, int slot, int64_t unit, int32_t expert);

  backend::Backend* backend_;
  std::vector<const units::UnitRunner*> runners_;
  uint64_t slot_bytes_;
  bool upload_all_;
  backend::DeviceBuffer arena_;
  backend::HostBuffer pinned_;  // every expert's tensors, when the allocation succeeded
  std::string pin_error_;
  std::vector<Entry> entries_;
  absl::flat_hash_map<int64_t, int> where_;  // unit * 2^32 + expert -> slot
  std::vector<UnitExperts> units_;           // by unit index (empty for units without experts)
  uint64_t clock_ = 0;
  uint64_t host_bytes_ = 0;
  Stats stats_;
};

}  // namespace mobius::generate

#endif  // MOBIUS_WORKER_GENERATE_EXPERT_CACHE_H_
