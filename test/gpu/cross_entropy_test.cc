// worker/kernels/cuda/cross_entropy.cuh against a plain C++ reference (label `gpu`).
//
// Tolerances (relative to max|ref|): losses, lse and the mean are fp32 log-sum-exps over V terms
// (fp32 partial sums vs the double reference: ~1e-6 relative): 1e-5. dlogits in fp32: one expf
// (a few ulps) times the scale: 1e-5; in bf16 or fp16: HalfTol (one rounding, two ulps of the
// format; fp16's small gradients are subnormal, 2^-24 absolute, far below that).
#include "worker/kernels/cuda/cross_entropy.cuh"

#include <algorithm>
#include <cmath>
#include <vector>

#include "test/gpu/gpu_test_util.h"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::ExpectClose;
using gpu_test::HalfTol;
using gpu_test::kHalfTypes;
using gpu_test::RandomHalf;

struct Reference {
  std::vector<float> losses, lse, dlogits;
  float mean = 0.0f;
};

Reference Compute(const std::vector<float>& z, const std::vector<int32_t>& targets, int64_t n,
                  int64_t v, float dloss) {
  Reference r;
  r.losses.assign(n, 0.0f);
  r.lse.assign(n, 0.0f);
  r.dlogits.assign(n * v, 0.0f);
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += targets[i] >= 0 && targets[i] < v;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0 || targets[i] >= v) continue;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < v; ++j) m = std::max(m, double{z[i * v + j]});
    for (int64_t j = 0; j < v; ++j) s += std::exp(z[i * v + j] - m);
    const double lse = m + std::log(s);
    r.lse[i] = static_cast<float>(lse);
    r.losses[i] = static_cast<float>(lse - z[i * v + targets[i]]);
    total += r.losses[i];
    for (int64_t j = 0; j < v; ++j) {
      const double p = std::exp(z[i * v + j] - lse);
      r.dlogits[i * v + j] = static_cast<float>((p - (j == targets[i])) * dloss / count);
    }
  }
  r.mean = count == 0 ? 0.0f : static_cast<float>(total / count);
  return r;
}

std::vector<int32_t> Targets(int64_t n, int64_t v) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i)
    t[i] = i % 4 == 3 ? kIgnoreIndex : static_cast<int32_t>((i * 7919) % v);
  return t;
}

TEST(CrossEntropyCuda, HalfLogitsMatchReference) {
  MOBIUS_REQUIRE_GPU();
  for (HalfType ht : kHalfTypes)
  for (const auto [n, v] : {std::pair<int64_t, int64_t>{37, 1000}, {6, 50257}}) {
    SCOPED_TRACE(testing::Message() << HalfTypeName(ht) << " n=" << n << " v=" << v);
    const auto z = RandomHalf(ht, n * v, 8.0f, 1);
    const auto targets = Targets(n, v);
    const float dloss = 0.75f;
    const Reference ref = Compute(z.values, targets, n, v, dloss);
    DeviceArray<uint16_t> d_z(z.bits), d_dz(n * v);
    DeviceArray<int32_t> d_t(targets);
    DeviceArray<float> d_losses(n), d_lse(n), d_mean(1);
    MOBIUS_ASSERT_KERNEL_OK(cross_entropy_fwd(ht, d_losses.get(), d_lse.get(), d_mean.get(),
                                              d_z.get(), d_t.get(), n, v, nullptr, nullptr));
    ExpectClose(d_losses.ToHost(), ref.losses, 1e-5, "losses");
    ExpectClose(d_lse.ToHost(), ref.lse, 1e-5, "lse");
    ExpectClose(d_mean.ToHost(), {ref.mean}, 1e-5, "mean loss");
    MOBIUS_ASSERT_KERNEL_OK(cross_entropy_bwd(ht, d_dz.get(), d_z.get(), d_lse.get(), d_t.get(), n,
                                              v, dloss, nullptr));
    const auto dz = d_dz.ToHost();
    ExpectClose(ht, dz, ref.dlogits, HalfTol(ht), "dlogits");
    // In place: the same bits.
    MOBIUS_ASSERT_KERNEL_OK(cross_entropy_bwd(ht, d_z.get(), d_z.get(), d_lse.get(), d_t.get(), n,
                                              v, dloss, nullptr));
    EXPECT_EQ(d_z.ToHost(), dz);
  }
}

TEST(CrossEntropyCuda, Fp32LogitsMatchReference) {
  MOBIUS_REQUIRE_GPU();
  const int64_t n = 29, v = 3001;
  const auto z = gpu_test::RandomFloats(n * v, -10, 10, 2);
  const auto targets = Targets(n, v);
  const Reference ref = Compute(z, targets, n, v, 1.0f);
  DeviceArray<float> d_z(z), d_dz(n * v), d_losses(n), d_lse(n), d_mean(1);
  DeviceArray<int32_t> d_t(targets);
  MOBIUS_ASSERT_KERNEL_OK(cross_entropy_fwd(d_losses.get(), d_lse.get(), d_mean.get(), d_z.get(),
                                            d_t.get(), n, v, nullptr, nullptr));
  ExpectClose(d_losses.ToHost(), ref.losses, 1e-5, "losses");
  ExpectClose(d_mean.ToHost(), {ref.mean}, 1e-5, "mean loss");
  MOBIUS_ASSERT_KERNEL_OK(
      cross_entropy_bwd(d_dz.get(), d_z.get(), d_lse.get(), d_t.get(), n, v, 1.0f, nullptr));
  ExpectClose(d_dz.ToHost(), ref.dlogits, 1e-5, "dlogits (fp32)");
}

// The LM head's token chunks (CrossEntropyRows): each chunk's logits alone in a buffer, the rows'
// losses, lse and gradients bitwise the unchunked ones (one block per row either way), the last
// chunk's mean bitwise the unchunked one (the same kernel over all rows), the backward's count
// over the whole microbatch; a 128K vocabulary and a chunk that does not divide N.
TEST(CrossEntropyCuda, ChunksOfRowsAreBitwiseTheWholeMicrobatch) {
  MOBIUS_REQUIRE_GPU();
  const int64_t n = 40, v = 128256;
  const auto z = gpu_test::RandomFloats(n * v, -10, 10, 4);
  const auto targets = Targets(n, v);
  const float dloss = 0.5f;
  DeviceArray<float> d_z(z), d_dz(n * v), d_losses(n), d_lse(n), d_mean(1);
  DeviceArray<int32_t> d_t(targets);
  MOBIUS_ASSERT_KERNEL_OK(cross_entropy_fwd(d_losses.get(), d_lse.get(), d_mean.get(), d_z.get(),
                                            d_t.get(), n, v, nullptr, nullptr));
  MOBIUS_ASSERT_KERNEL_OK(
      cross_entropy_bwd(d_dz.get(), d_z.get(), d_lse.get(), d_t.get(), n, v, dloss, nullptr));
  const auto losses = d_losses.ToHost(), lse = d_lse.ToHost(), mean = d_mean.ToHost();
  const auto dz = d_dz.ToHost();
  const Reference ref = Compute(z, targets, n, v, dloss);
  ExpectClose(losses, ref.losses, 1e-5, "losses (V 128256)");
  ExpectClose(dz, ref.dlogits, 1e-5, "dlogits (V 128256)");
  for (int64_t chunk : {16, 40}) {
    SCOPED_TRACE(testing::Message() << "chunk " << chunk);
    DeviceArray<float> c_losses(n, NAN), c_lse(n, NAN), c_mean(1, NAN), part(chunk * v);
    std::vector<float> c_dz(n * v, NAN);
    for (int64_t r0 = 0; r0 < n; r0 += chunk) {
      const int64_t rows = std::min(chunk, n - r0);
      ASSERT_EQ(cudaMemcpy(part.get(), d_z.get() + r0 * v, 4 * rows * v, cudaMemcpyDeviceToDevice),
                cudaSuccess);
      MOBIUS_ASSERT_KERNEL_OK(cross_entropy_fwd(
          c_losses.get() + r0, c_lse.get() + r0, r0 + rows == n ? c_mean.get() : nullptr,
          part.get(), d_t.get() + r0, rows, v, nullptr, nullptr, r0, n));
      MOBIUS_ASSERT_KERNEL_OK(cross_entropy_bwd(part.get(), part.get(), c_lse.get() + r0,
                                                d_t.get() + r0, rows, v, dloss, nullptr, r0, n));
      const auto host = part.ToHost();
      std::copy(host.begin(), host.begin() + rows * v, c_dz.begin() + r0 * v);
    }
    EXPECT_EQ(c_losses.ToHost(), losses);
    EXPECT_EQ(c_lse.ToHost(), lse);
    EXPECT_EQ(c_mean.ToHost(), mean);
    EXPECT_TRUE(c_dz == dz) << "chunked dlogits differ";
  }
}

TEST(CrossEntropyCuda, AllIgnoredGivesZeroAndInvalidTargetsAreCounted) {
  MOBIUS_REQUIRE_GPU();
  const int64_t n = 5, v = 100;
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto z = RandomHalf(ht, n * v, 4.0f, 3);
    std::vector<int32_t> targets(n, kIgnoreIndex);
    DeviceArray<uint16_t> d_z(z.bits), d_dz(n * v, 0x3f80);
    DeviceArray<int32_t> d_t(targets), d_invalid(1, 0);
    DeviceArray<float> d_losses(n, 1.0f), d_lse(n, 1.0f), d_mean(1, 1.0f);
    MOBIUS_ASSERT_KERNEL_OK(cross_entropy_fwd(ht, d_losses.get(), d_lse.get(), d_mean.get(),
                                              d_z.get(), d_t.get(), n, v, d_invalid.get(),
                                              nullptr));
    EXPECT_EQ(d_mean.ToHost()[0], 0.0f);
    EXPECT_EQ(d_losses.ToHost(), std::vector<float>(n, 0.0f));
    EXPECT_EQ(d_invalid.ToHost()[0], 0);
    MOBIUS_ASSERT_KERNEL_OK(cross_entropy_bwd(ht, d_dz.get(), d_z.get(), d_lse.get(), d_t.get(), n,
                                              v, 1.0f, nullptr));
    EXPECT_EQ(d_dz.ToHost(), std::vector<uint16_t>(n * v, 0));

    targets = {1, v, -1, kIgnoreIndex, 2};  // two invalid ids: skipped and counted
    DeviceArray<int32_t> d_t2(targets);
    MOBIUS_ASSERT_KERNEL_OK(cross_entropy_fwd(ht, d_losses.get(), d_lse.get(), d_mean.get(),
                                              d_z.get(), d_t2.get(), n, v, d_invalid.get(),
                                              nullptr));
    EXPECT_EQ(d_invalid.ToHost()[0], 2);
    const Reference ref = Compute(z.values, targets, n, v, 1.0f);
    ExpectClose(d_mean.ToHost(), {ref.mean}, 1e-5, "mean over the valid rows");
  }
}

}  // namespace
}  // namespace mobius::kernels::cuda
