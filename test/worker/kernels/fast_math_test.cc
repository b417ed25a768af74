// FastExp (fast_math.h) against double exp on a dense grid: as a scalar call, inside a loop of a
// MOBIUS_KERNEL_CLONES function, and as the 8-lane overload the kernels use (which must give the
// scalar version's bits, so that kernels may finish a vector loop with scalar calls).
#include "worker/kernels/cpu/fast_math.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace mobius::kernels::cpu {
namespace {

// The documented bound of fast_math.h, about 2 ulp.
constexpr double kMaxRelError = 1.5e-7;

MOBIUS_KERNEL_CLONES
void ExpLoop(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FastExp(x[i]);
}

// The F32x8 overload over whole vectors, scalar calls for the tail.
MOBIUS_KERNEL_CLONES
void ExpLoop8(float* out, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Store8(out + i, FastExp(Load8(x + i)));
  for (; i < n; ++i) out[i] = FastExp(x[i]);
}

// ~2M points over [-86.9, 88.7]: dense steps near 0 (where e^x ~ 1 + x), geometric steps out to
// the ends of the range, plus every float in a few ulp around the ends and a few special values.
std::vector<float> Grid() {
  std::vector<float> grid;
  for (float x = 1e-30f; x < 88.7f; x = std::max(x * 1.00002f, std::nextafter(x, 100.0f))) {
    grid.push_back(x);
    grid.push_back(-x);
  }
  for (float end : {kFastExpMin, 88.7f, -1.0f, 1.0f}) {
    float x = end;
    for (int i = 0; i < 64; ++i) x = std::nextafter(x, 0.0f);
    for (int i = 0; i < 128; ++i, x = std::nextafter(x, 2 * end)) grid.push_back(x);
  }
  grid.push_back(0.0f);
  grid.push_back(-0.0f);
  return grid;
}

void ExpectAccurate(const std::vector<float>& x, const std::vector<float>& got) {
  double worst = 0.0;
  float worst_x = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] < kFastExpMin) continue;
    const double ref = std::exp(static_cast<double>(x[i]));
    const double rel = std::fabs(got[i] - ref) / ref;
    if (rel > worst) {
      worst = rel;
      worst_x = x[i];
    }
  }
  EXPECT_LE(worst, kMaxRelError) << "at x = " << worst_x;
}

TEST(FastExpTest, MatchesExpOnDenseGrid) {
  const std::vector<float> x = Grid();
  ASSERT_GT(x.size(), 1000000u);
  std::vector<float> scalar(x.size()), looped(x.size()), vec(x.size());
  for (size_t i = 0; i < x.size(); ++i) scalar[i] = FastExp(x[i]);
  ExpLoop(looped.data(), x.data(), static_cast<int64_t>(x.size()));
  ExpLoop8(vec.data(), x.data(), static_cast<int64_t>(x.size()));
  ExpectAccurate(x, scalar);
  ExpectAccurate(x, looped);
  ExpectAccurate(x, vec);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(vec[i]), std::bit_cast<uint32_t>(scalar[i])) << "x = " << x[i];
  }
}

TEST(FastExpTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf, -1e30f, -200.0f, -87.0f, std::nextafter(kFastExpMin, -inf),
                                0.0f, 88.8f, 100.0f, 1e30f, inf,
                                std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> looped(x.size()), vec(x.size());
  ExpLoop(looped.data(), x.data(), static_cast<int64_t>(x.size()));
  ExpLoop8(vec.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE(x[i]);
    for (float got : {FastExp(x[i]), looped[i], vec[i]}) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(got));
      } else if (x[i] < kFastExpMin) {
        EXPECT_EQ(got, 0.0f);  // exactly: masked attention scores are -inf
        EXPECT_FALSE(std::signbit(got));
      } else if (x[i] > 88.73f) {
        EXPECT_EQ(got, inf);
      } else {
        EXPECT_EQ(got, 1.0f);  // x == 0: exactly 1
      }
    }
  }
  EXPECT_EQ(FastExp(0.0f), 1.0f);
  EXPECT_EQ(FastExp(-0.0f), 1.0f);
}

}  // namespace
}  // namespace mobius::kernels::cpu
