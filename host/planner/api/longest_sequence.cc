#include "host/planner/api/longest_sequence.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mobius::planner {

absl::StatusOr<LongestSequence> FindLongestSequence(const model::ModelDescription& model,
                                                    const topology::Topology& topology,
                                                    const topology::TopologyFacts& facts,
                                                    const JobShape& job, PlanOptions options,
                                                    int64_t step, int64_t max_seq) {
  if (step < 1) return absl::InvalidArgumentError(absl::StrCat("step must be >= 1 (got ", step, ")"));
  options.compare = false;
  options.trace = false;
  options.profile.reset();  // a measured profile is for one shape only
  LongestSequence r;
  const int64_t context = model.config.max_position_embeddings;
  r.limit = max_seq > 0 ? max_seq : (context > 0 ? context : int64_t{1} << 20);
  r.limit = std::max<int64_t>(r.limit / step * step, step);
  auto plans = [&](int64_t seq, std::string* why) {
    JobShape j = job;
    j.seq_len = seq;
    ++r.plans_tried;
    absl::StatusOr<PlanReport> p = MakePlan(model, topology, facts, j, options);
    if (!p.ok() && why != nullptr) *why = std::string(p.status().message());
    return p.ok();
  };
  // Bad input (not a length question) fails at the shortest length with INVALID_ARGUMENT.
  {
    JobShape j = job;
    j.seq_len = step;
    ++r.plans_tried;
    absl::StatusOr<PlanReport> p = MakePlan(model, topology, facts, j, options);
    if (!p.ok()) {
      if (absl::IsInvalidArgument(p.status())) return p.status();
      r.refusal = std::string(p.status().message());
      return r;
    }
  }
  int64_t lo = 1, hi = r.limit / step;  // lo plans; find the largest k <= hi that plans
  if (plans(hi * step, &r.refusal)) {
    r.refusal.clear();
    r.seq_len = hi * step;
    return r;
  }
  std::string refusal = r.refusal;  // of the smallest failing length so far
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    std::string why;
    if (plans(mid * step, &why)) {
      lo = mid;
    } else {
      hi = mid;
      refusal = why;
    }
  }
  r.seq_len = lo * step;
  r.refusal = refusal;
  return r;
}

}  // namespace mobius::planner
