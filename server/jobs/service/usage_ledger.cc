#include "server/jobs/service/usage_ledger.h"

#include <algorithm>
#include <utility>

namespace mobius::jobs {

UsageDelta UsageLedger::Advance(Entry& e, int64_t now) {
  UsageRecord& r = e.record;
  UsageDelta d;
  d.uid = r.uid;
  d.user = r.user;
  if (now <= r.last_unix_ms) return d;
  const double seconds = static_cast<double>(now - r.last_unix_ms) / 1e3;
  d.gpu_seconds = r.gpus * seconds;
  d.host_gib_seconds = static_cast<double>(r.host_bytes) / (1 << 30) * seconds;
  if (e.memory_bytes >= 0) {
    r.measured_host_byte_seconds += static_cast<double>(e.memory_bytes) * seconds;
  }
  r.last_unix_ms = now;
  e.dirty = true;
  return d;
}

void UsageLedger::Start(UsageRecord record) {
  if (open_.count(record.job_id)) End(record.job_id, record.started_unix_ms);
  record.ended = false;
  record.last_unix_ms = record.started_unix_ms;
  Entry e;
  e.record = std::move(record);
  open_[e.record.job_id] = std::move(e);
}

UsageDelta UsageLedger::Step(const std::string& id, int64_t tokens, int64_t now,
                             int64_t memory_bytes) {
  auto it = open_.find(id);
  if (it == open_.end()) return {};
  UsageDelta d = Advance(it->second, now);
  if (memory_bytes >= 0) it->second.memory_bytes = memory_bytes;
  it->second.record.tokens += std::max<int64_t>(tokens, 0);
  it->second.record.steps += 1;
  it->second.dirty = true;
  d.tokens = std::max<int64_t>(tokens, 0);
  return d;
}

std::vector<UsageDelta> UsageLedger::Touch(int64_t now) {
  std::vector<UsageDelta> out;
  for (auto& [id, e] : open_) out.push_back(Advance(e, now));
  return out;
}

UsageDelta UsageLedger::End(const std::string& id, int64_t now) {
  auto it = open_.find(id);
  if (it == open_.end()) return {};
  UsageDelta d = Advance(it->second, now);
  it->second.record.ended = true;
  it->second.dirty = true;
  ended_.push_back(std::move(it->second));
  open_.erase(it);
  return d;
}

void UsageLedger::SetGroup(const std::string& id, int64_t gid, const std::string& group) {
  auto it = open_.find(id);
  if (it == open_.end()) return;
  it->second.record.gid = gid;
  it->second.record.group = group;
  it->second.dirty = true;
}

absl::Status UsageLedger::Flush(const std::function<absl::Status(const UsageRecord&)>& put) {
  absl::Status first;
  for (auto& [id, e] : open_) {
    if (!e.dirty) continue;
    absl::Status st = put(e.record);
    if (st.ok()) {
      e.dirty = false;
    } else if (first.ok()) {
      first = st;
    }
  }
  std::vector<Entry> left;
  for (Entry& e : ended_) {
    absl::Status st = put(e.record);
    if (st.ok()) {
      ++ended_written_;
      continue;
    }
    if (first.ok()) first = st;
    left.push_back(std::move(e));
  }
  ended_ = std::move(left);
  return first;
}

bool UsageLedger::dirty() const {
  if (!ended_.empty()) return true;
  for (const auto& [id, e] : open_) {
    if (e.dirty) return true;
  }
  return false;
}

std::vector<UsageRecord> UsageLedger::Records() const {
  std::vector<UsageRecord> out;
  for (const auto& [id, e] : open_) out.push_back(e.record);
  for (const Entry& e : ended_) out.push_back(e.record);
  return out;
}

}  // namespace mobius::jobs
