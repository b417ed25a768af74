// What the store fill does per value of a frozen base weight, on one thread (each rank's fill
// thread does this for its own tensors), alternating in every rep (bench/README.md):
//   bf16:  the checkpoint's bf16 slice widened to fp32 (ReadF32), rounded to the run's bf16 into
//          the store (RoundWeights): today's LoRA base load, the baseline;
//   nf4:   the same widening (a bf16 checkpoint in a bf16 run needs no rounding), then
//          quantised into the NF4 blob (Nf4BlobQuantizer), as worker/runtime/store_fill.cc does for `adapter.base_quantization: nf4`;
//   quantise: the quantiser alone, on fp32 values.
// Prints M values/s (median and spread over reps) and nf4 / bf16 as a ratio.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "common/numeric/bf16.h"
#include "common/numeric/nf4.h"

ABSL_FLAG(int64_t, values, int64_t{4096} * 11008, "values in the weight (Llama-7B's MLP shape)");
ABSL_FLAG(int, reps, 7, "repetitions of each variant, alternating");

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kSlice = int64_t{1} << 20;  // the store fill's slice

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t n = absl::GetFlag(FLAGS_values);
  const int reps = absl::GetFlag(FLAGS_reps);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<uint16_t> checkpoint(n);  // the bf16 file
  for (auto& v : checkpoint) v = mobius::numeric::Fp32ToBf16(normal(rng));
  std::vector<float> slice(kSlice), wide(n);
  std::vector<uint16_t> store16(n);
  std::vector<uint8_t> blob(mobius::numeric::Nf4Bytes(n));
  mobius::numeric::Bf16ToFp32(checkpoint.data(), wide.data(), n);

  const auto bf16 = [&] {
    for (int64_t b = 0; b < n; b += kSlice) {
      const int64_t c = std::min(kSlice, n - b);
      mobius::numeric::Bf16ToFp32(checkpoint.data() + b, slice.data(), c);
      mobius::numeric::Fp32ToBf16(slice.data(), store16.data() + b, c);
    }
  };
  const auto nf4 = [&] {
    mobius::numeric::Nf4BlobQuantizer q(n, blob.data());
    for (int64_t b = 0; b < n; b += kSlice) {
      const int64_t c = std::min(kSlice, n - b);
      mobius::numeric::Bf16ToFp32(checkpoint.data() + b, slice.data(), c);
      q.Add(slice.data(), c);
    }
    q.Finish();
  };
  const auto quantise = [&] {
    mobius::numeric::Nf4BlobQuantizer q(n, blob.data());
    q.Add(wide.data(), n);
    q.Finish();
  };
  const std::vector<std::pair<const char*, std::function<void()>>> variants = {
      {"bf16 (baseline)", bf16}, {"nf4", nf4}, {"quantise only", quantise}};
  std::vector<std::vector<double>> rate(variants.size());
  for (int r = 0; r < reps + 1; ++r) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const auto t0 = Clock::now();
      variants[v].second();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r > 0) rate[v].push_back(static_cast<double>(n) / s / 1e6);  // rep 0 warms up
    }
  }
  absl::PrintF("nf4_load_bench: %d values, %d reps, one thread\n", n, reps);
  absl::PrintF("%-16s %12s %10s %10s\n", "variant", "Mvalues/s", "min", "max");
  for (size_t v = 0; v < variants.size(); ++v) {
    absl::PrintF("%-16s %12.0f %10.0f %10.0f\n", variants[v].first, Median(rate[v]),
                 *std::min_element(rate[v].begin(), rate[v].end()),
                 *std::max_element(rate[v].begin(), rate[v].end()));
  }
  absl::PrintF("nf4 / bf16: %.2f\n", Median(rate[1]) / Median(rate[0]));
  return 0;
}
