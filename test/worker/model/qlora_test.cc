// QLoRA on the layer units: LoRA over a frozen base whose linear weights are held in NF4
// (LoraSpec::base_nf4; common/run/unit_params.h, linear.h) equals, bit for bit, LoRA over a bf16
// (fp16) base holding the dequantised values of the same weights: the same loss and the same
// adapter gradients, with recompute, token chunks and dropout, on a dense model and on both
// mixture-of-experts families (every expert quantised, the router left 16-bit). The NF4 model's
// weights take about a quarter of the bytes; GPT-2's Conv1D weights are refused with a clear error.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/model/lora.h"
#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "common/numeric/nf4.h"
#include "common/run/unit_params.h"
#include "gtest/gtest.h"
#include "test/worker/model/units_test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/model/resident_model.h"
#include "worker/model/unit_runner.h"

namespace mobius::units {
namespace {

struct Case {
  std::string base;                  // golden model (test/reference/golden)
  std::vector<std::string> targets;  // adapted modules
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.base; }

// The 16-bit bits of each weight of `golden` in `precision`; an NF4 weight's replaced by its
// dequantised values when `dequantise`.
std::map<std::string, std::vector<uint16_t>> Weights(const testing::Golden& g,
                                                     backend::DType precision, bool dequantise) {
  std::map<std::string, std::vector<uint16_t>> out;
  const bool f16 = precision == backend::DType::kF16;
  for (const auto& [name, t] : g.fp32.tensors) {
    std::vector<uint16_t>& bits = out[name];
    for (const float x : t.data) bits.push_back(f16 ? numeric::Fp32ToF16(x) : numeric::Fp32ToBf16(x));
  }
  if (!dequantise) return out;
  const std::vector<std::string> quantised = *Nf4BaseWeights(g.config);
  for (const std::string& name : quantised) {
    std::vector<uint16_t>& bits = out.at(name);
    const int64_t n = static_cast<int64_t>(bits.size());
    const std::vector<uint8_t> blob = QuantizeNf4Blob(bits.data(), n, precision);
    std::vector<float> x(n);
    numeric::DequantizeNf4(numeric::ReadNf4Blob(blob.data(), n), x.data());
    for (int64_t i = 0; i < n; ++i) bits[i] = f16 ? numeric::Fp32ToF16(x[i]) : numeric::Fp32ToBf16(x[i]);
  }
  return out;
}

class QloraTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto golden = testing::LoadGolden(GetParam().base);
    ASSERT_TRUE(golden.ok()) << golden.status();
    g_ = *std::move(golden);
    auto modules = model::LoraModules(g_.config, GetParam().targets);
    ASSERT_TRUE(modules.ok()) << modules.status();
    spec_.rank = 4;
    spec_.scale = 2.0f;
    spec_.modules = *modules;
    backend_ = *backend::CpuBackend::Create({.op_threads = 2});
  }

  std::unique_ptr<ResidentModel> Make(bool nf4, backend::DType precision, int64_t chunk_tokens,
                                      float dropout) {
    LoraSpec spec = spec_;
    spec.base_nf4 = nf4;
    spec.dropout = dropout;
    auto m = ResidentModel::Create(g_.config, backend_.get(),
                                   {.recompute = true, .lora = spec, .chunk_tokens = chunk_tokens,
                                    .precision = precision});
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return nullptr;
    // The NF4 model quantises the checkpoint's values itself; the other gets them dequantised.
    EXPECT_TRUE((*m)->SetWeights(Weights(g_, precision, !nf4)).ok());
    // Non-zero adapters, the same in both (B = 0 would hide the adapters' input gradients).
    for (const auto& [name, elements] : (*m)->AdapterTensors()) {
      std::vector<float> v(elements);
      for (int64_t i = 0; i < elements; ++i) v[i] = 0.01f * static_cast<float>((i * 37 + 11) % 23 - 11);
      EXPECT_TRUE((*m)->SetAdapter(name, v.data()).ok());
    }
    return *std::move(m);
  }

  void ExpectSame(backend::DType precision, int64_t chunk_tokens, float dropout) {
    auto quantised = Make(true, precision, chunk_tokens, dropout);
    auto dequantised = Make(false, precision, chunk_tokens, dropout);
    ASSERT_NE(quantised, nullptr);
    ASSERT_NE(dequantised, nullptr);
    const uint64_t key = dropout > 0 ? 1234 : 0;
    auto a = quantised->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1, key);
    auto b = dequantised->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1, key);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(*a, *b);
    // Not vacuous: the unquantised base gives another loss.
    auto plain = Make(false, precision, chunk_tokens, dropout);
    ASSERT_NE(plain, nullptr);
    ASSERT_TRUE(plain->SetWeights(Weights(g_, precision, false)).ok());
    auto c = plain->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1, key);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_NE(*a, *c);
    for (const auto& [name, elements] : quantised->AdapterTensors()) {
      std::vector<float> ga(elements), gb(elements);
      ASSERT_TRUE(quantised->ReadAdapterGrad(name, ga.data()).ok());
      ASSERT_TRUE(dequantised->ReadAdapterGrad(name, gb.data()).ok());
      ASSERT_EQ(ga, gb) << name;
      float largest = 0;
      for (float x : ga) largest = std::max(largest, std::fabs(x));
      EXPECT_GT(largest, 0.0f) << name;  // every adapter got a gradient
    }
  }

  testing::Golden g_;
  LoraSpec spec_;
  std::unique_ptr<backend::CpuBackend> backend_;
};

TEST_P(QloraTest, Bf16LossAndAdapterGradientsAreTheDequantisedBase) {
  ExpectSame(backend::DType::kBf16, 0, 0);
}

TEST_P(QloraTest, Fp16LossAndAdapterGradientsAreTheDequantisedBase) {
  ExpectSame(backend::DType::kF16, 0, 0);
}

TEST_P(QloraTest, TokenChunksAndDropoutToo) {
  ExpectSame(backend::DType::kBf16, 8, 0.1f);
}

// Every linear a LoRA target could name is NF4 (norms, embeddings, router and head are not), and
// the quantised layout takes Nf4Bytes per weight instead of 2 bytes per value.
TEST_P(QloraTest, LayoutHoldsTheLinearsInNf4) {
  auto model = model::DescribeModel(g_.config);
  ASSERT_TRUE(model.ok());
  const std::vector<std::string> names = *Nf4BaseWeights(g_.config);
  ASSERT_FALSE(names.empty());
  int64_t quantised = 0;
  for (int64_t u = 0; u < model->num_units(); ++u) {
    const UnitParamLayout plain = *MakeUnitParamLayout(*model, u, false);
    const UnitParamLayout nf4 = *MakeUnitParamLayout(*model, u, true);
    ASSERT_EQ(plain.params.size(), nf4.params.size());
    int64_t want_slots = 0;
    for (size_t i = 0; i < nf4.params.size(); ++i) {
      const UnitParam& p = nf4.params[i];
      const bool expect = std::find(names.begin(), names.end(), p.name) != names.end();
      EXPECT_EQ(p.nf4, expect) << p.name;
      EXPECT_EQ(p.num_elements, plain.params[i].num_elements);
      EXPECT_EQ(p.storage_elements,
                expect ? (numeric::Nf4Bytes(p.num_elements) + 1) / 2 : p.num_elements);
      EXPECT_EQ(p.offset % 32, 0);
      want_slots += p.storage_elements;
      quantised += p.nf4;
      if (expect) EXPECT_GE(nf4.nf4_scratch_elements, p.num_elements);
    }
    EXPECT_GE(nf4.total_elements, want_slots);
    EXPECT_LE(nf4.total_elements, plain.total_elements);
  }
  EXPECT_EQ(quantised, static_cast<int64_t>(names.size()));
}

INSTANTIATE_TEST_SUITE_P(
    Families, QloraTest,
    ::testing::Values(Case{"llama_gqa", {"q_proj", "v_proj", "down_proj"}},
                      Case{"mixtral_aux", {"q_proj", "w1", "w2"}},
                      Case{"qwen3_moe", {"o_proj", "gate_proj", "down_proj"}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.base; });

TEST(Qlora, Conv1DWeightsAreRefused) {
  auto g = testing::LoadGolden("gpt2");
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::StatusOr<std::vector<std::string>> names = Nf4BaseWeights(g->config);
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(names.status().message().find("Conv1D"), std::string::npos) << names.status();
  auto backend = *backend::CpuBackend::Create({.op_threads = 1});
  LoraSpec spec{.rank = 4, .scale = 1, .modules = *model::LoraModules(g->config, {"c_attn"}),
                .base_nf4 = true};
  EXPECT_EQ(ResidentModel::Create(g->config, backend.get(), {.lora = spec}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::units
