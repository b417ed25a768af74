// The layer units with fp16 weights and activations (training.precision fp16) on the CPU backend,
// against the fp32 reference model on the same weights, on every golden tiny model, side by side
// with the bf16 run of units_golden_test.
//
// The weights are the golden bf16-rounded values (which fp16 holds exactly: an 8-bit significand
// inside fp16's range, subnormals aside), so both precisions start from the reference's weights
// and differ only in how activations and branch gradients are rounded (fp16: 11-bit significand,
// bf16: 8-bit).
//
// Tolerances:
//   loss                    |diff| <= 2e-3 * |ref|            (bf16: 1e-2)
//   unit outputs (hidden)   max|diff| <= 6e-3 * max|ref|      (bf16: 3e-2)
//   parameter gradients     max|diff| <= 6e-3 * max|ref| + 1e-6 per tensor (bf16: 3e-2; 6e-2 for
//                           Qwen3's q_norm/k_norm), and no worse than the bf16 run's difference
//                           for that tensor (fp16's significand is 3 bits longer)
//   recompute vs keep       bitwise, as in bf16
//   token chunks vs none    loss |diff| <= 1e-5 * |loss|, gradients <= 2e-3 * max|unchunked| + 1e-7
//                           (bf16: loss bitwise, 1e-5): OpenBLAS sums a product of a few rows
//                           (a chunk) in another fp32 order than the whole one, and the weight
//                           gradients' sums over rows run per chunk; bf16's rounding of the
//                           activations hides those last-bit differences almost always, fp16's
//                           3 more bits keep them (observed: 1e-3 of max on an embedding row with
//                           one-row chunks)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "test/worker/model/units_test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/model/resident_model.h"
#include "worker/reference/model.h"

namespace mobius::units {
namespace {

using backend::DType;
using testing::Golden;
using testing::MaxDiff;

std::unique_ptr<backend::CpuBackend> MakeBackend() {
  backend::CpuBackendOptions options;
  options.op_threads = 2;
  return *backend::CpuBackend::Create(options);
}

// The golden weights as fp16 bits.
std::map<std::string, std::vector<uint16_t>> F16Weights(const Golden& g) {
  std::map<std::string, std::vector<uint16_t>> out;
  for (const auto& [name, t] : g.params.tensors) {
    std::vector<uint16_t>& bits = out[name];
    bits.resize(t.data.size());
    numeric::Fp32ToF16(t.data.data(), bits.data(), bits.size());
  }
  return out;
}

class UnitsFp16Test : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto golden = testing::LoadGolden(GetParam());
    ASSERT_TRUE(golden.ok()) << golden.status();
    g_ = *std::move(golden);
    f16_ = F16Weights(g_);
    backend_ = MakeBackend();
  }

  std::unique_ptr<ResidentModel> MakeModel(DType precision, bool recompute,
                                           int64_t chunk_tokens = 0) {
    auto m = ResidentModel::Create(g_.config, backend_.get(),
                                   {.recompute = recompute, .chunk_tokens = chunk_tokens,
                                    .precision = precision});
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return nullptr;
    const absl::Status s = (*m)->SetWeights(precision == DType::kF16 ? f16_ : g_.bf16);
    EXPECT_TRUE(s.ok()) << s;
    return *std::move(m);
  }

  struct Run {
    float loss = 0;
    std::map<std::string, std::vector<float>> grads;
  };
  Run Step(ResidentModel& m) {
    Run r;
    auto loss = m.Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1);
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (loss.ok()) r.loss = *loss;
    auto grads = m.Grads();
    EXPECT_TRUE(grads.ok()) << grads.status();
    if (grads.ok()) r.grads = *std::move(grads);
    return r;
  }

  Golden g_;
  std::map<std::string, std::vector<uint16_t>> f16_;
  std::unique_ptr<backend::CpuBackend> backend_;
};

TEST_P(UnitsFp16Test, MatchesReferenceAtLeastAsCloselyAsBf16) {
  auto ref = reference::ReferenceModel::Create(g_.config, g_.params);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto ref_loss = ref->Forward(g_.tokens.data(), g_.targets.data(), g_.b, g_.t);
  ASSERT_TRUE(ref_loss.ok()) << ref_loss.status();
  ASSERT_TRUE(ref->Backward().ok());

  auto half = MakeModel(DType::kF16, true);
  auto bf16 = MakeModel(DType::kBf16, true);
  ASSERT_NE(half, nullptr);
  ASSERT_NE(bf16, nullptr);
  const Run h = Step(*half);
  const Run b = Step(*bf16);
  std::printf("  loss fp16 %.6f bf16 %.6f reference %.6f\n", h.loss, b.loss, *ref_loss);
  EXPECT_NEAR(h.loss, *ref_loss, 2e-3 * std::fabs(*ref_loss));

  for (int64_t u = 1; u < half->num_units(); ++u) {
    auto got = half->UnitInput(u);
    ASSERT_TRUE(got.ok()) << got.status();
    const auto d = MaxDiff(*got, ref->activations().residual[u - 1]);
    std::printf("  output of unit %lld: max|diff| %.3g (max|ref| %.3g)\n",
                static_cast<long long>(u - 1), d.max_abs, d.max_want);
    EXPECT_LE(d.max_abs, 6e-3 * d.max_want) << "output of unit " << u - 1;
  }

  ASSERT_EQ(h.grads.size(), ref->grads().tensors.size());
  double worst_ratio = 0, sum_h = 0, sum_b = 0;
  std::string worst;
  for (const auto& [name, want] : ref->grads().tensors) {
    ASSERT_TRUE(h.grads.contains(name)) << name;
    const auto dh = MaxDiff(h.grads.at(name), want.data);
    const auto db = MaxDiff(b.grads.at(name), want.data);
    const double bound = 6e-3 * dh.max_want + 1e-6;
    std::printf("  grad %-48s fp16 %.3g bf16 %.3g max|ref| %.3g (%.2f of bound)\n", name.c_str(),
                dh.max_abs, db.max_abs, dh.max_want, dh.max_abs / bound);
    EXPECT_LE(dh.max_abs, bound) << name;
    EXPECT_LE(dh.max_abs, db.max_abs + 1e-7) << name << ": fp16 further from the reference";
    sum_h += dh.max_abs / (dh.max_want + 1e-12);
    sum_b += db.max_abs / (db.max_want + 1e-12);
    if (dh.max_abs / bound > worst_ratio) worst_ratio = dh.max_abs / bound, worst = name;
  }
  std::printf("  worst gradient: %s at %.2f of its bound; mean relative error fp16 %.3g, bf16 %.3g\n",
              worst.c_str(), worst_ratio, sum_h / h.grads.size(), sum_b / b.grads.size());
}

TEST_P(UnitsFp16Test, RecomputeEqualsKeepingInternalsBitwise) {
  auto with = MakeModel(DType::kF16, true);
  auto without = MakeModel(DType::kF16, false);
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  const Run a = Step(*with);
  const Run b = Step(*without);
  EXPECT_EQ(a.loss, b.loss);
  for (const auto& [name, g] : a.grads) EXPECT_EQ(g, b.grads.at(name)) << name;
}

TEST_P(UnitsFp16Test, TokenChunksMatchUnchunked) {
  auto whole = MakeModel(DType::kF16, true, -1);
  ASSERT_NE(whole, nullptr);
  const Run w = Step(*whole);
  for (int64_t chunk : {1, 7}) {
    auto m = MakeModel(DType::kF16, true, chunk);
    ASSERT_NE(m, nullptr);
    const Run c = Step(*m);
    EXPECT_NEAR(c.loss, w.loss, 1e-5 * std::fabs(w.loss)) << "chunk " << chunk;
    for (const auto& [name, g] : c.grads) {
      const auto d = MaxDiff(g, w.grads.at(name));
      EXPECT_LE(d.max_abs, 2e-3 * d.max_want + 1e-7) << name << " chunk " << chunk;
    }
  }
}

// A loss scale too large for fp16 makes the branch gradients overflow to infinity, which reaches
// the fp32 gradients (what the loss scaler of an fp16 job checks, then skips the step), never a
// crash or a wrong finite number; the loss itself is unscaled and stays finite. A fitting scale
// gives the unscaled gradients times the scale (a power of two), within fp16 rounding.
TEST_P(UnitsFp16Test, LossScaleOverflowBecomesNonFiniteGradients) {
  auto m = MakeModel(DType::kF16, true);
  ASSERT_NE(m, nullptr);
  const Run plain = Step(*m);
  auto loss = m->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1, 0, 1099511627776.0f);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(*loss, plain.loss);
  auto grads = m->Grads();
  ASSERT_TRUE(grads.ok()) << grads.status();
  bool non_finite = false;
  for (const auto& [name, g] : *grads) {
    for (float x : g) non_finite = non_finite || !std::isfinite(x);
  }
  EXPECT_TRUE(non_finite) << "a loss scale of 2^40 must overflow fp16 somewhere";
  ASSERT_TRUE(m->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1, 0, 1024.0f).ok());
  auto scaled = m->Grads();
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  for (const auto& [name, g] : *scaled) {
    std::vector<float> unscaled(g.size());
    for (size_t i = 0; i < g.size(); ++i) unscaled[i] = g[i] / 1024.0f;
    const auto d = MaxDiff(unscaled, plain.grads.at(name));
    EXPECT_LE(d.max_abs, 6e-3 * d.max_want + 1e-6) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, UnitsFp16Test,
                         ::testing::Values("gpt2", "llama_gqa", "qwen3", "llama3_rope",
                                           "qwen2_linear_rope", "qwen3_moe", "mixtral_aux"));

}  // namespace
}  // namespace mobius::units
