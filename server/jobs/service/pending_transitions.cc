#include "server/jobs/service/pending_transitions.h"

#include <utility>

namespace mobius::jobs {

std::vector<std::string> PendingTransitions::Jobs() const {
  std::vector<std::string> out;
  out.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) out.push_back(id);
  return out;  // "j-000123" ids have at least six digits: string order is creation order
}

const std::deque<PendingTransition>* PendingTransitions::Of(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second.queue;
}

bool PendingTransitions::Add(const std::string& id, PendingTransition t) {
  auto [it, inserted] = jobs_.try_emplace(id);
  it->second.queue.push_back(std::move(t));
  return inserted;
}

void PendingTransitions::PopFront(const std::string& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  it->second.queue.pop_front();
  if (it->second.queue.empty()) jobs_.erase(it);
}

void PendingTransitions::RestartCounted(const std::string& id) {
  auto it = jobs_.find(id);
  if (it != jobs_.end() && !it->second.queue.empty())
    it->second.queue.front().count_restart = false;
}

void PendingTransitions::Failed(const std::string& id, const absl::Status& error) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  ++it->second.failures;
  it->second.last_error = error;
}

int PendingTransitions::failures(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? 0 : it->second.failures;
}

absl::Status PendingTransitions::last_error(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? absl::OkStatus() : it->second.last_error;
}

std::optional<JobState> PendingTransitions::LastState(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.queue.empty()) return std::nullopt;
  return it->second.queue.back().to;
}

void PendingTransitions::Apply(JobRecord& r) const {
  auto it = jobs_.find(r.id);
  if (it == jobs_.end()) return;
  for (const PendingTransition& t : it->second.queue) {
    r.state = t.to;
    r.state_reason = t.reason;
    if (t.to == JobState::kRunning) r.started_unix_ms = t.unix_ms;
    if (IsTerminal(t.to)) r.finished_unix_ms = t.unix_ms;
    if (t.count_restart) ++r.restarts;
  }
}

bool StoreWriteMayRecover(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kFailedPrecondition:  // an illegal transition
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kOutOfRange:
      return false;
    default:
      return true;
  }
}

}  // namespace mobius::jobs
