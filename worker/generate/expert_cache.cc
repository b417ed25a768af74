#include "worker/generate/expert_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/reference/parameters.h"

namespace mobius::generate {

namespace {

int64_t Key(int64_t unit, int32_t expert) { return (unit << 32) + expert; }

}  // namespace

uint64_t ExpertCache::SlotBytes(const std::vector<const units::UnitRunner*>& runners) {
  int64_t elements = 0;
  for (const units::UnitRunner* r : runners) {
    elements = std::max(elements, r->expert_span().elements);
  }
  return (2 * static_cast<uint64_t>(elements) + 255) & ~uint64_t{255};
}

int64_t ExpertCache::MaxBlockExperts(const std::vector<const units::UnitRunner*>& runners) {
  int64_t most = 0;
  for (const units::UnitRunner* r : runners) most = std::max(most, r->expert_span().count);
  return most;
}

absl::StatusOr<std::unique_ptr<ExpertCache>> ExpertCache::Create(
    const model::ModelConfig& config, backend::Backend* backend,
    const std::vector<const units::UnitRunner*>& runners, int64_t slots, bool upload_all) {
  const int64_t need = MaxBlockExperts(runners);
  if (need == 0) return absl::InvalidArgumentError("routed experts: the model has no experts");
  if (slots < need) {
    return absl::InvalidArgumentError(absl::StrCat(
        "routed experts: ", slots, " expert slots cannot hold one block's ", need, " experts"));
  }
  std::unique_ptr<ExpertCache> c(
      new ExpertCache(backend, runners, SlotBytes(runners), upload_all));
  const reference::ModelNames names = reference::ParameterNames(config);
  c->units_.resize(runners.size());
  for (size_t u = 0; u < runners.size(); ++u) {
    const units::UnitRunner::ExpertSpan& span = runners[u]->expert_span();
    if (span.count == 0) continue;
    UnitExperts& ue = c->units_[u];
    const reference::LayerNames& ln = names.layers[u - 1];
    for (const reference::LayerNames::Expert& x : ln.experts) {
      std::vector<std::string>& n = ue.names.emplace_back();
      for (const std::string* name : {&x.gate_weight, &x.up_weight, &x.gate_up_weight,
                                      &x.gate_up_bias, &x.down_weight, &x.down_bias}) {
        if (!name->empty()) n.push_back(*name);
      }
    }
    const units::UnitParamLayout& layout = runners[u]->layout();
    for (const std::string& name : ue.names[0]) {
      ue.rel.push_back(layout.Find(name)->offset - span.begin);
    }
    ue.experts.resize(span.count);
  }
  MOBIUS_ASSIGN_OR_RETURN(c->arena_, backend->Allocate(static_cast<uint64_t>(slots) * c->slot_bytes_,
                                                       "generate.expert_slots"));
  c->entries_.resize(slots);
  return c;
}

absl::Status ExpertCache::TakeHostWeights(std::map<std::string, std::vector<uint16_t>>& bf16) {
  for (size_t u = 0; u < units_.size(); ++u) {
    for (const std::vector<std::string>& names : units_[u].names) {
      for (const std::string& name : names) {
        auto it = bf16.find(name);
        if (it == bf16.end()) return absl::InvalidArgumentError("model weights: missing " + name);
        const int64_t want = runners_[u]->layout().Find(name)->num_elements;
        if (static_cast<int64_t>(it->second.size()) != want) {
          return absl::InvalidArgumentError(absl::StrCat("model weights: ", name, " has ",
                                                         it->second.size(), " elements, want ",
                                                         want));
        }
      }
    }
  }
  host_bytes_ = 0;
  for (UnitExperts& ue : units_) {
    for (size_t e = 0; e < ue.names.size(); ++e) {
      HostExpert& x = ue.experts[e];
      for (const std::string& name : ue.names[e]) {
        x.tensors.push_back(std::move(bf16.at(name)));
        x.data.push_back(x.tensors.back().data());
        x.elements.push_back(static_cast<int64_t>(x.tensors.back().size()));
        host_bytes_ += 2 * x.tensors.back().size();
      }
    }
  }
  Pin();
  return absl::OkStatus();
}

void ExpertCache::Pin() {
  absl::StatusOr<backend::HostBuffer> pinned = backend_->AllocateHost(host_bytes_);
  if (!pinned.ok()) {
    pin_error_ = std::string(pinned.status().message());
    return;
  }
  pinned_ = *std::move(pinned);
  auto* dst = static_cast<uint16_t*>(pinned_.data());
  for (UnitExperts& ue : units_) {
    for (HostExpert& x : ue.experts) {
      for (size_t i = 0; i < x.tensors.size(); ++i) {
        std::copy(x.tensors[i].begin(), x.tensors[i].end(), dst);
        x.data[i] = dst;
        dst += x.tensors[i].size();
        std::vector<uint16_t>().swap(x.tensors[i]);  // freed as it is copied
      }
    }
  }
}

int ExpertCache::Victim(uint64_t call_start) const {
  int best = -1;
  for (int s = 0; s < static_cast<int>(entries_.size()); ++s) {
    if (entries_[s].used > call_start) continue;  // asked for in this call
    if (best < 0 || entries_[s].used < entries_[best].used) best = s;
  }
  return best;
}

absl::Status ExpertCache::Upload(backend::Queue& queue, int slot, int64_t unit, int32_t expert) {
  const UnitExperts& ue = units_[unit];
  const HostExpert& host = ue.experts[expert];
  if (host.data.size() != ue.rel.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("routed experts: no host weights for unit ", unit, " expert ", expert));
  }
  for (size_t i = 0; i < ue.rel.size(); ++i) {
    const uint64_t bytes = 2 * static_cast<uint64_t>(host.elements[i]);
    MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(
        queue, host.data[i], arena_, slot * slot_bytes_ + 2 * static_cast<uint64_t>(ue.rel[i]),
        bytes));
    stats_.uploaded_bytes += bytes;
  }
  ++stats_.uploaded;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<const void*>> ExpertCache::Fetch(backend::Queue& queue, int64_t unit,
                                                            const std::vector<int32_t>& experts) {
  if (unit < 0 || unit >= static_cast<int64_t>(units_.size()) || units_[unit].experts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("routed experts: unit ", unit,
                                                   " has no experts"));
  }
  const UnitExperts& ue = units_[unit];
  const int64_t count = static_cast<int64_t>(ue.experts.size());
  for (int32_t e : experts) {
    if (e < 0 || e >= count) {
      return absl::InvalidArgumentError(absl::StrCat("routed experts: unit ", unit,
                                                     " has no expert ", e));
    }
  }
  ++stats_.calls;
  uint64_t expert_bytes = 0;
  for (int64_t n : ue.experts[0].elements) expert_bytes += 2 * static_cast<uint64_t>(n);
  stats_.all_experts_bytes += static_cast<uint64_t>(count) * expert_bytes;
  const uint64_t call_start = clock_;
  std::vector<const void*> out;
  out.reserve(experts.size());
  // The baseline: the whole block, every call, in slots of its own.
  const std::vector<int32_t> wanted = [&] {
    if (!upload_all_) return experts;
    std::vector<int32_t> all(count);
    for (int32_t e = 0; e < count; ++e) all[e] = e;
    return all;
  }();
  std::vector<const void*> by_expert(count, nullptr);
  for (int32_t e : wanted) {
    auto it = where_.find(Key(unit, e));
    int slot = -1;
    if (it != where_.end() && !upload_all_) {
      slot = it->second;
    } else {
      slot = it != where_.end() ? it->second : Victim(call_start);
      if (slot < 0) return absl::InternalError("routed experts: no free slot");  // slots >= E
      Entry& old = entries_[slot];
      if (old.used != 0) where_.erase(Key(old.unit, old.expert));
      MOBIUS_RETURN_IF_ERROR(Upload(queue, slot, unit, e));
      entries_[slot].unit = unit;
      entries_[slot].expert = e;
      where_[Key(unit, e)] = slot;
    }
    entries_[slot].used = ++clock_;
    by_expert[e] = arena_.at(slot * slot_bytes_);
  }
  for (int32_t e : experts) out.push_back(by_expert[e]);
  stats_.fetched += static_cast<int64_t>(experts.size());
  return out;
}

}  // namespace mobius::generate
