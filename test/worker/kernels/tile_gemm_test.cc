// TileGemm (tile_gemm.h) against the plain triple loop: bitwise, because each element adds its k
// products in k order without FMA whatever the blocking. Shapes cover the 4-row and 16/8/1-column
// remainders, k = 0, and leading dimensions wider than the tile.
#include "worker/kernels/cpu/tile_gemm.h"

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace mobius::kernels::cpu {
namespace {

// The form the kernels use: inlined into a function with an AVX2 clone.
MOBIUS_KERNEL_CLONES
void RunTileGemm(float* c, int64_t ldc, const float* a, int64_t lda, const float* b, int64_t ldb,
                 int64_t m, int64_t n, int64_t k) {
  tile_internal::TileGemm(c, ldc, a, lda, b, ldb, m, n, k);
}

struct Shape {
  int64_t m, n, k, pad;  // pad: extra columns in every leading dimension
};

class TileGemmTest : public ::testing::TestWithParam<Shape> {};

TEST_P(TileGemmTest, SameBitsAsTheTripleLoop) {
  const Shape sh = GetParam();
  const int64_t lda = sh.k + sh.pad, ldb = sh.n + sh.pad, ldc = sh.n + sh.pad;
  std::mt19937 rng(static_cast<uint32_t>(sh.m * 1000 + sh.n * 10 + sh.k));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(sh.m * lda + 1), b(sh.k * ldb + 1), c(sh.m * ldc + 1);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (float& x : c) x = dist(rng);
  std::vector<float> want = c;
  for (int64_t i = 0; i < sh.m; ++i) {
    for (int64_t j = 0; j < sh.n; ++j) {
      float acc = want[i * ldc + j];
      for (int64_t p = 0; p < sh.k; ++p) acc += a[i * lda + p] * b[p * ldb + j];
      want[i * ldc + j] = acc;
    }
  }
  RunTileGemm(c.data(), ldc, a.data(), lda, b.data(), ldb, sh.m, sh.n, sh.k);
  for (size_t i = 0; i < c.size(); ++i) {  // padding columns untouched too
    ASSERT_EQ(std::bit_cast<uint32_t>(c[i]), std::bit_cast<uint32_t>(want[i])) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TileGemmTest,
                         ::testing::Values(Shape{32, 64, 64, 0}, Shape{32, 64, 16, 0},
                                           Shape{7, 24, 5, 3}, Shape{5, 13, 9, 1},
                                           Shape{1, 1, 1, 0}, Shape{4, 16, 0, 2},
                                           Shape{64, 80, 33, 5}, Shape{3, 8, 100, 0}),
                         [](const auto& info) {
                           const Shape& s = info.param;
                           return "m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" +
                                  std::to_string(s.k) + "_pad" + std::to_string(s.pad);
                         });

}  // namespace
}  // namespace mobius::kernels::cpu
