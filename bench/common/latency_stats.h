// Latency percentiles for the benchmarks that time individual calls (bench/store, bench/rpc).
#ifndef MOBIUS_BENCH_COMMON_LATENCY_STATS_H_
#define MOBIUS_BENCH_COMMON_LATENCY_STATS_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace mobius::bench {

struct LatencyStats {
  double p50 = 0, p99 = 0, max = 0;
};

// Nearest-rank percentiles of `samples` (any unit); all zero when empty.
inline LatencyStats Summarise(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  LatencyStats s;
  if (samples.empty()) return s;
  s.p50 = samples[(samples.size() - 1) / 2];
  s.p99 = samples[static_cast<size_t>(std::ceil(0.99 * samples.size())) - 1];
  s.max = samples.back();
  return s;
}

}  // namespace mobius::bench

#endif  // MOBIUS_BENCH_COMMON_LATENCY_STATS_H_
