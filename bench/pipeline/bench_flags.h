// Command-line helpers of the pipeline benchmarks (pipeline_bench, e2e_train_bench): their
// arguments are --key=value pairs documented at the top of each tool's source. Bad input ends the
// process with exit 2 and one line naming the argument.
#ifndef MOBIUS_BENCH_PIPELINE_BENCH_FLAGS_H_
#define MOBIUS_BENCH_PIPELINE_BENCH_FLAGS_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mobius::bench {

// "TOOL: WHY" and where the arguments are documented; exit 2.
[[noreturn]] inline void BenchUsage(const char* tool, const std::string& why) {
  std::fprintf(stderr,
               "%s: %s\n(see the comment at the top of bench/pipeline/%s.cc for the arguments)\n",
               tool, why.c_str(), tool);
  std::exit(2);
}

// A count in [0, 2^40].
inline int64_t BenchCount(const char* tool, const std::string& key, const std::string& v) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(v, &x) || x < 0 || x > (int64_t{1} << 40)) {
    BenchUsage(tool, absl::StrCat(key, ": not a count: '", v, "'"));
  }
  return x;
}

// A finite number >= 0.
inline double BenchReal(const char* tool, const std::string& key, const std::string& v) {
  double x = 0;
  if (!absl::SimpleAtod(v, &x) || !std::isfinite(x) || x < 0) {
    BenchUsage(tool, absl::StrCat(key, ": not a non-negative number: '", v, "'"));
  }
  return x;
}

}  // namespace mobius::bench

#endif  // MOBIUS_BENCH_PIPELINE_BENCH_FLAGS_H_
