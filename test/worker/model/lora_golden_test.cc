// LoRA on the layer units (adapter.h, linear.h) against Hugging Face PEFT 0.10 itself:
// test/reference/golden_lora/<case> holds PEFT's own adapter (r 4, alpha 8, B non-zero), its loss
// and its adapter gradients on the base golden model's batch (fp32 throughout;
// test/reference/make_lora_golden.py). We run bf16 base weights and activations with fp32
// accumulation and fp32 adapters, so the tolerances are the base units' (units_golden_test.cc)
// against an fp32 model that was not rounded to bf16 at all:
//   loss                 |diff| <= 2e-2 * |PEFT|
//   adapter gradients    max|diff| <= 6e-2 * max|PEFT| + 1e-6 per tensor (worst printed;
//                        observed 0.047: Llama q_proj A of the last layer, bf16 dq and weights)
//   5 AdamW steps        (optim::CpuAdamW on the fp32 adapters, PEFT's torch.optim.AdamW: lr 1e-2,
//                        betas (0.9, 0.95), eps 1e-8, no weight decay, no clipping, the same
//                        batch each step): every loss |diff| <= 2e-2 * |PEFT|; per final
//                        adapter tensor ||ours - PEFT|| <= 0.25 * ||PEFT - initial|| (Adam moves
//                        every element ~lr per step, so near-zero gradients move by bf16 noise)
// Also: with every B zero (PEFT's default initialisation) the loss is the base model's bit for
// bit, and the frozen base gets no gradient buffers.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "common/model/lora.h"
#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/paths.h"
#include "test/worker/model/units_test_util.h"
#include "test/worker/reference/tensor_compare.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/kernels/dropout_mask.h"
#include "worker/model/resident_model.h"
#include "worker/optim/adamw.h"

namespace mobius::units {
namespace {

using testing::MaxDiff;

struct Case {
  std::string name, base;
  // bf16's bounds (the header's); fp16 runs the same comparisons, its gradients within kF16GradTol
  // and its 5 steps within f16_move_tol.
  double grad_tol = 6e-2, move_tol = 0.25, f16_move_tol = 0.1;
};
// fp16 keeps 3 more mantissa bits than bf16: its differences from PEFT shrink about 8x where they
// are rounding (observed: worst gradient 0.014, every case; a routing or indexing bug would not
// shrink).
constexpr double kF16GradTol = 2e-2;
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class LoraGoldenTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto golden = testing::LoadGolden(GetParam().base);
    ASSERT_TRUE(golden.ok()) << golden.status();
    g_ = *std::move(golden);
    dir_ = mobius::testing::SourcePath("test/reference/golden_lora/" + GetParam().name);
    std::ifstream in(dir_ + "/adapter_config.json");
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json config = nlohmann::json::parse(text.str());
    spec_.rank = config.at("r").get<int64_t>();
    spec_.scale = config.at("lora_alpha").get<float>() / spec_.rank;
    auto modules =
        model::LoraModules(g_.config, config.at("target_modules").get<std::vector<std::string>>());
    ASSERT_TRUE(modules.ok()) << modules.status();
    spec_.modules = *modules;
    backend::CpuBackendOptions options;
    options.op_threads = 2;
    backend_ = *backend::CpuBackend::Create(options);
  }

  // precision fp16: the base weights rounded from fp32 to fp16.
  std::unique_ptr<ResidentModel> MakeModel(backend::DType precision = backend::DType::kBf16) {
    auto m = ResidentModel::Create(g_.config, backend_.get(),
                                   {.recompute = true, .lora = spec_, .precision = precision});
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return nullptr;
    std::map<std::string, std::vector<uint16_t>> f16;
    if (precision == backend::DType::kF16) {
      for (const auto& [name, t] : g_.fp32.tensors) {
        std::vector<uint16_t>& bits = f16[name];
        for (const float x : t.data) bits.push_back(numeric::Fp32ToF16(x));
      }
    }
    EXPECT_TRUE((*m)->SetWeights(precision == backend::DType::kF16 ? f16 : g_.bf16).ok());
    return *std::move(m);
  }

  void LossAndGradients(backend::DType precision, double grad_tol);
  void FiveAdamWSteps(backend::DType precision, double move_tol);

  testing::Golden g_;
  std::string dir_;
  LoraSpec spec_;
  std::unique_ptr<backend::CpuBackend> backend_;
};

void LoraGoldenTest::LossAndGradients(backend::DType precision, double grad_tol) {
  auto adapter = reference::testing::LoadSafetensors(dir_ + "/adapter_model.safetensors");
  auto want_grads = reference::testing::LoadSafetensors(dir_ + "/grads.safetensors");
  auto outputs = reference::testing::LoadSafetensors(dir_ + "/outputs.safetensors");
  ASSERT_TRUE(adapter.ok() && want_grads.ok() && outputs.ok());
  auto model = MakeModel(precision);
  ASSERT_NE(model, nullptr);
  // Every adapter tensor PEFT wrote is one of ours, and the other way round.
  EXPECT_EQ(model->AdapterTensors().size(), adapter->tensors.size());
  for (const auto& [name, elements] : model->AdapterTensors()) {
    ASSERT_TRUE(adapter->tensors.count(name)) << name;
    ASSERT_EQ(static_cast<int64_t>(adapter->at(name).data.size()), elements) << name;
    ASSERT_TRUE(model->SetAdapter(name, adapter->at(name).data.data()).ok());
  }
  auto loss = model->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1);
  ASSERT_TRUE(loss.ok()) << loss.status();
  const float want = outputs->at("loss").data[0];
  std::printf("  loss %.6f PEFT %.6f\n", *loss, want);
  EXPECT_NEAR(*loss, want, 2e-2 * std::fabs(want));
  auto grads = model->Grads();
  ASSERT_TRUE(grads.ok()) << grads.status();
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, g] : *grads) {
    ASSERT_TRUE(want_grads->tensors.count(name)) << name;
    const auto d = MaxDiff(g, want_grads->at(name).data);
    EXPECT_LE(d.max_abs, grad_tol * d.max_want + 1e-6) << name;
    if (d.max_abs / (d.max_want + 1e-12) > worst) {
      worst = d.max_abs / (d.max_want + 1e-12);
      worst_name = name;
    }
  }
  std::printf("  %zu adapter gradients, worst max|diff| / max|PEFT| %.3g (%s)\n", grads->size(),
              worst, worst_name.c_str());
}

void LoraGoldenTest::FiveAdamWSteps(backend::DType precision, double move_tol) {
  auto adapter = reference::testing::LoadSafetensors(dir_ + "/adapter_model.safetensors");
  auto final_adapter = reference::testing::LoadSafetensors(dir_ + "/final_adapter.safetensors");
  auto outputs = reference::testing::LoadSafetensors(dir_ + "/outputs.safetensors");
  ASSERT_TRUE(adapter.ok() && final_adapter.ok() && outputs.ok());
  const std::vector<float>& want = outputs->at("train_losses").data;
  auto model = MakeModel(precision);
  ASSERT_NE(model, nullptr);
  std::map<std::string, std::vector<float>> master, m, v;
  for (const auto& [name, elements] : model->AdapterTensors()) {
    master[name] = adapter->at(name).data;
    m[name].assign(elements, 0.0f);
    v[name].assign(elements, 0.0f);
  }
  auto adamw = optim::CpuAdamW::Create(
      {.config = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.0},
       .num_threads = 1});
  ASSERT_TRUE(adamw.ok()) << adamw.status();
  for (int step = 0; step < static_cast<int>(want.size()); ++step) {
    for (const auto& [name, p] : master) ASSERT_TRUE(model->SetAdapter(name, p.data()).ok());
    auto loss = model->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1);
    ASSERT_TRUE(loss.ok()) << loss.status();
    std::printf("  step %d loss %.5f PEFT %.5f\n", step + 1, *loss, want[step]);
    EXPECT_NEAR(*loss, want[step], 2e-2 * std::fabs(want[step])) << "step " << step + 1;
    auto grads = model->Grads();
    ASSERT_TRUE(grads.ok()) << grads.status();
    std::vector<optim::ParamBuffers> buffers;
    for (auto& [name, p] : master) {
      buffers.push_back({.master = p.data(), .m = m[name].data(), .v = v[name].data(),
                         .grad = grads->at(name).data(), .n = p.size(), .decay = false});
    }
    ASSERT_TRUE((*adamw)->Step(step + 1, 1.0f, buffers).ok());
  }
  // Adam's first steps move each element by about lr whatever its gradient's size, so elements
  // whose gradient is near zero take bf16-noise-sized steps either way: compare the whole movement
  // of each tensor, ||ours - PEFT's|| / ||PEFT's - initial||.
  double worst = 0;
  for (const auto& [name, p] : master) {
    const std::vector<float>& init = adapter->at(name).data;
    const std::vector<float>& peft = final_adapter->at(name).data;
    double diff = 0, moved = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      diff += (double{p[i]} - peft[i]) * (double{p[i]} - peft[i]);
      moved += (double{peft[i]} - init[i]) * (double{peft[i]} - init[i]);
    }
    const double rel = std::sqrt(diff / moved);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, move_tol) << name;
  }
  std::printf("  final adapters: worst ||ours - PEFT|| / ||PEFT's movement|| %.3f\n", worst);
}

TEST_P(LoraGoldenTest, LossAndAdapterGradientsMatchPeft) {
  LossAndGradients(backend::DType::kBf16, GetParam().grad_tol);
}

TEST_P(LoraGoldenTest, FiveAdamWStepsTrackPeft) {
  FiveAdamWSteps(backend::DType::kBf16, GetParam().move_tol);
}

TEST_P(LoraGoldenTest, Fp16LossAndAdapterGradientsMatchPeftCloser) {
  LossAndGradients(backend::DType::kF16, kF16GradTol);
}

TEST_P(LoraGoldenTest, Fp16FiveAdamWStepsTrackPeftCloser) {
  FiveAdamWSteps(backend::DType::kF16, GetParam().f16_move_tol);
}

TEST_P(LoraGoldenTest, ZeroBIsTheBaseModelAndTheBaseIsFrozen) {
  auto model = MakeModel();  // adapters zero-initialised on the device: B = 0
  ASSERT_NE(model, nullptr);
  auto lora_loss = model->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1);
  ASSERT_TRUE(lora_loss.ok()) << lora_loss.status();
  auto base = ResidentModel::Create(g_.config, backend_.get(), {.recompute = true});
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE((*base)->SetWeights(g_.bf16).ok());
  auto base_loss = (*base)->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1);
  ASSERT_TRUE(base_loss.ok());
  EXPECT_EQ(*lora_loss, *base_loss);
  // Only the adapters have gradients (A's are zero here: dA = gh^T x with gh = scale dy B = 0).
  auto grads = model->Grads();
  ASSERT_TRUE(grads.ok());
  EXPECT_EQ(grads->size(), model->AdapterTensors().size());
  float b_grad = 0;
  for (const auto& [name, g] : *grads) {
    if (name.find("lora_B") == std::string::npos) continue;
    for (float x : g) b_grad = std::max(b_grad, std::fabs(x));
  }
  EXPECT_EQ(b_grad, 0.0f) << "B's gradient is scale dy^T (x A^T), zero with A = 0";
}

// Token chunks (issue 30) with adapters, dropout on: every linear's adapter term over a chunk of
// rows (its h, gh and dropout mask rows offset), so chunks of 5 and 13 of the 32 rows give the
// unchunked loss bitwise and the adapter gradients within 1e-5 of max (their sums over rows run
// per chunk), with the same masks (a mask depends on the token's row in the batch, not the chunk).
TEST_P(LoraGoldenTest, TokenChunksWithDropoutMatchUnchunked) {
  auto adapter = reference::testing::LoadSafetensors(dir_ + "/adapter_model.safetensors");
  ASSERT_TRUE(adapter.ok());
  LoraSpec spec = spec_;
  spec.dropout = 0.1f;
  auto run = [&](int64_t chunk) -> std::pair<float, std::map<std::string, std::vector<float>>> {
    auto m = ResidentModel::Create(g_.config, backend_.get(),
                                   {.recompute = true, .lora = spec, .chunk_tokens = chunk});
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return {};
    EXPECT_TRUE((*m)->SetWeights(g_.bf16).ok());
    for (const auto& [name, elements] : (*m)->AdapterTensors()) {
      EXPECT_TRUE((*m)->SetAdapter(name, adapter->at(name).data.data()).ok());
    }
    auto loss = (*m)->Step(g_.tokens.data(), g_.targets.data(), g_.b, g_.t, 1,
                           kernels::LoraDropoutStepKey(/*seed=*/7, /*step=*/1));
    EXPECT_TRUE(loss.ok()) << loss.status();
    auto grads = (*m)->Grads();
    EXPECT_TRUE(grads.ok());
    std::map<std::string, std::vector<float>> out;
    if (grads.ok()) out = *std::move(grads);
    return {loss.ok() ? *loss : NAN, std::move(out)};
  };
  const auto [base_loss, base] = run(-1);
  ASSERT_FALSE(base.empty());
  for (int64_t chunk : {5, 13}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    const auto [loss, grads] = run(chunk);
    EXPECT_EQ(loss, base_loss);
    for (const auto& [name, want] : base) {
      const auto d = MaxDiff(grads.at(name), want);
      // Fewer rows per GEMM: OpenBLAS's AVX2 kernels (Haswell, Zen) sum in a shape-dependent
      // order, and a bf16 rounding of the frozen path that flips moves an adapter gradient by a
      // bf16 ulp's share of it (units_golden_test; measured here up to 3.6e-4 of max).
      EXPECT_LE(d.max_abs, 4e-3 * d.max_want + 1e-7) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Peft, LoraGoldenTest,
                         ::testing::Values(Case{"llama_gqa", "llama_gqa"},
                                           Case{"llama_gqa_qv", "llama_gqa"},
                                           Case{"gpt2", "gpt2"}, Case{"gpt2_c_attn", "gpt2"},
                                           Case{"mixtral_experts", "mixtral_aux"},
                                           // Layer 0's expert 3 sees few tokens: its small
                                           // gradients differ by 0.125 x max in bf16, 0.014 in
                                           // fp16 (rounding: 9x less with 3 more bits). After
                                           // step 1 PEFT's top-2 margin falls to 0.001
                                           // (make_lora_golden.py prints it): a token's routing
                                           // flips in 16 bits and steps 2-5 track PEFT within
                                           // 0.4% (fp16) and 1.8% (bf16) of the loss, the
                                           // adapters' movement within 0.25 and 0.26.
                                           Case{"qwen3_moe_experts", "qwen3_moe", 0.15, 0.35, 0.3}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace mobius::units
