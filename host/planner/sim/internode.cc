#include "host/planner/sim/internode.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace mobius::planner::sim {

double RingAllReduceSeconds(int64_t bytes, int nodes, const InterNodeLink& link) {
  if (nodes <= 1 || bytes <= 0) return 0;
  const double steps = 2.0 * (nodes - 1);
  // B / N per step: 2 (N - 1) / N x B in all. An infinite rate leaves the latency alone.
  return steps / nodes * static_cast<double>(bytes) / link.bytes_per_s +
         steps * link.latency_seconds;
}

int64_t RingAllReduceSentBytes(int64_t bytes, int nodes) {
  if (nodes <= 1 || bytes <= 0) return 0;
  return static_cast<int64_t>(std::llround(2.0 * (nodes - 1) / nodes * static_cast<double>(bytes)));
}

std::vector<int64_t> AllReduceBuckets(int64_t bytes, int64_t bucket_bytes) {
  std::vector<int64_t> out;
  if (bytes <= 0) return out;
  const int64_t size = bucket_bytes > 0 ? bucket_bytes : bytes;
  for (int64_t left = bytes; left > 0; left -= std::min(left, size)) {
    out.push_back(std::min(left, size));
  }
  return out;
}

double StageAllReduceSeconds(int64_t bytes, const InterNodeConfig& config) {
  double t = 0;
  for (int64_t b : AllReduceBuckets(bytes, config.bucket_bytes)) {
    t += RingAllReduceSeconds(b, config.nodes, config.link);
  }
  return t;
}

absl::Status ValidateInterNode(const InterNodeConfig& c) {
  if (c.nodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("internode.nodes: must be >= 1 (got ", c.nodes, ")"));
  }
  if (!(c.link.bytes_per_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "internode.bytes_per_s: the inter-node link's rate must be > 0 bytes/s (got ",
        c.link.bytes_per_s, ")"));
  }
  if (!(c.link.latency_seconds >= 0) || !std::isfinite(c.link.latency_seconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "internode.latency_seconds: must be a finite number >= 0 (got ", c.link.latency_seconds,
        ")"));
  }
  if (c.bucket_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "internode.bucket_bytes: must be >= 0, 0 for one bucket per stage (got ", c.bucket_bytes,
        ")"));
  }
  return absl::OkStatus();
}

}  // namespace mobius::planner::sim
