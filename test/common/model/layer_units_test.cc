#include "common/model/layer_units.h"

#include <string>

#include "common/model/model_config_parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius::model {
namespace {

ModelDescription Describe(const std::string& fixture) {
  absl::StatusOr<ModelConfig> config =
      LoadModelConfig(testing::SourcePath("test/data/models/" + fixture));
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  absl::StatusOr<ModelDescription> model = DescribeModel(*config);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : ModelDescription{};
}

const ParamSpec* FindParam(const LayerUnit& unit, const std::string& name) {
  for (const ParamSpec& p : unit.params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// Published totals. GPT-2: 124,439,808 (wte counted once). Llama-2-7b: 6,738,415,616,
// Meta-Llama-3-8B: 8,030,261,248, Mistral-7B-v0.1: 7,241,732,096, Qwen2-7B: 7,615,616,512 (the
// sums of their safetensors shards). Qwen3 model cards give rounded figures: Qwen3-8B "8.2B,
// non-embedding 6.95B", Qwen3-1.7B "1.7B, non-embedding 1.4B" (tied), Qwen3-0.6B "0.6B,
// non-embedding 0.44B" (tied); the exact values are the config arithmetic, e.g. Qwen3-8B:
// 2 * 151936 * 4096 + 36 * (2*4096*4096 + 2*4096*1024 + 2*128 + 3*4096*12288 + 2*4096) + 4096.
struct Expected {
  const char* fixture;
  int64_t total;
  int64_t non_embedding;
};
constexpr Expected kExpected[] = {
    {"gpt2.json", 124'439'808, 85'056'000},
    {"llama-2-7b.json", 6'738'415'616, 6'476'271'616},
    {"meta-llama-3-8b.json", 8'030'261'248, 6'979'588'096},
    {"llama-3.1-8b-instruct.json", 8'030'261'248, 6'979'588'096},
    {"mistral-7b-v0.1.json", 7'241'732'096, 6'979'588'096},
    {"qwen2-7b.json", 7'615'616'512, 6'525'621'760},
    {"qwen3-8b.json", 8'190'735'360, 6'946'075'648},
    {"qwen3-1.7b.json", 1'720'574'976, 1'409'410'048},
    {"qwen3-0.6b.json", 596'049'920, 440'467'456},
};

TEST(LayerUnitsTest, ParameterCountsMatchPublishedTotals) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.fixture);
    ModelDescription model = Describe(e.fixture);
    EXPECT_EQ(model.num_units(), model.config.num_layers + 2);
    EXPECT_EQ(TotalParameters(model), e.total);
    EXPECT_EQ(NonEmbeddingParameters(model), e.non_embedding);
    EXPECT_EQ(ModelParameterBytes(model), 2 * e.total);
    int64_t unit_bytes = 0;
    for (const LayerUnit& unit : model.units) unit_bytes += UnitParameterBytes(unit, 4);
    EXPECT_EQ(unit_bytes, 4 * e.total);
  }
}

// Mixtures of experts (issue 32): totals and the parameters a token uses, against the model
// cards (Qwen3-30B-A3B: 30.5B total, 3.3B activated; Mixtral-8x7B: 46.7B, 12.9B active) within
// 0.5%, and exactly the config arithmetic, e.g. Qwen3-30B-A3B: 2 * 151936 * 2048 + 2048 +
// 48 * (2048*4096*2 + 2048*512*2 + 2*128 + 2*2048 + 128*2048 + 128 * 3*2048*768); active: 8 of
// the 128 experts per layer (3,353,032,704).
TEST(LayerUnitsTest, MixtureOfExpertsCountsTotalAndActiveParameters) {
  struct Moe {
    const char* fixture;
    int64_t total, active;
    double card_total, card_active;
    int64_t experts, per_token;
  };
  for (const Moe& e : {Moe{"qwen3-30b-a3b.json", 30'532'122'624, 3'353'032'704, 30.5e9, 3.3e9,
                           128, 8},
                       Moe{"mixtral-8x7b.json", 46'702'792'704, 12'879'925'248, 46.7e9, 12.9e9,
                           8, 2}}) {
    SCOPED_TRACE(e.fixture);
    ModelDescription model = Describe(e.fixture);
    ASSERT_EQ(model.config.moe.num_experts, e.experts);
    ASSERT_EQ(model.config.moe.experts_per_token, e.per_token);
    EXPECT_EQ(TotalParameters(model), e.total);
    EXPECT_EQ(ActiveParameters(model), e.active);
    EXPECT_NEAR(TotalParameters(model) / e.card_total, 1.0, 0.005);
    EXPECT_NEAR(ActiveParameters(model) / e.card_active, 1.0, 0.02);  // cards round to 0.1B
    // Every block routes: the router and E x 3 expert weights, no dense MLP; FLOPs count the
    // router and k / E of the experts.
    const LayerUnit& block = model.units[1];
    int64_t experts = 0, matmul = 0;
    for (const ParamSpec& p : block.params) {
      experts += p.expert >= 0 ? 1 : 0;
      matmul += p.role == ParamRole::kMatmulWeight ? p.num_elements : 0;
    }
    EXPECT_EQ(experts, 3 * e.experts);
    const double attention = UnitAttentionForwardFlopsPerToken(model, 1, 2048);
    const double active_block = static_cast<double>(matmul) -
                                (e.experts - e.per_token) * 3.0 * model.config.hidden_size *
                                    model.config.moe.expert_intermediate_size;
    EXPECT_NEAR(UnitFlops(model, 1, 2048).forward_flops - attention, 2 * active_block,
                1e-6 * active_block);
  }
}

// gpt-oss (OpenAI's model card: gpt-oss-20b 20.91B total, 3.61B active; gpt-oss-120b 116.83B,
// 5.13B, both "active" without the input embedding, a lookup): the config arithmetic exactly,
// e.g. 20b: 2 * 201088 * 2880 + 2880 + 24 * (attention with biases and 64 sinks + 2 norms +
// router 2880 * 32 + 32 + 32 experts * (2880 * 5760 + 5760 + 2880 * 2880 + 2880)). Sliding layers
// attend over 128 keys, the others over the sequence.
TEST(LayerUnitsTest, GptOssCountsTotalAndActiveParametersAndWindowedAttention) {
  struct Case {
    const char* fixture;
    int64_t total, active;
    double card_total, card_active;
  };
  for (const Case& e : {Case{"gpt-oss-20b.json", 20'914'757'184, 4'187'440'704, 20.91e9, 3.61e9},
                        Case{"gpt-oss-120b.json", 116'829'156'672, 5'711'982'912, 116.83e9,
                             5.13e9}}) {
    SCOPED_TRACE(e.fixture);
    ModelDescription model = Describe(e.fixture);
    EXPECT_EQ(TotalParameters(model), e.total);
    EXPECT_EQ(ActiveParameters(model), e.active);
    const double embedding = 201088.0 * 2880;
    EXPECT_NEAR(TotalParameters(model) / e.card_total, 1.0, 0.005);
    EXPECT_NEAR((ActiveParameters(model) - embedding) / e.card_active, 1.0, 0.005);
    EXPECT_EQ(model.config.WindowOf(0), 128);
    EXPECT_EQ(model.config.WindowOf(1), 0);
    EXPECT_LT(UnitAttentionForwardFlopsPerToken(model, 1, 4096),
              UnitAttentionForwardFlopsPerToken(model, 2, 4096) / 10);
  }
}

TEST(LayerUnitsTest, UnitOrderAndKinds) {
  ModelDescription model = Describe("llama-2-7b.json");
  ASSERT_EQ(model.num_units(), 34);
  EXPECT_EQ(model.units[0].kind, UnitKind::kEmbedding);
  for (int64_t i = 1; i <= 32; ++i) {
    EXPECT_EQ(model.units[i].index, i);
    EXPECT_EQ(model.units[i].kind, UnitKind::kDecoderBlock);
    EXPECT_EQ(model.units[i].layer, i - 1);
  }
  EXPECT_EQ(model.units[33].kind, UnitKind::kHead);
  EXPECT_STREQ(UnitKindName(model.head().kind), "head");
  ASSERT_EQ(model.units[5].params.size(), 9u);
  EXPECT_EQ(model.units[5].params[0].name, "model.layers.4.input_layernorm.weight");
}

TEST(LayerUnitsTest, Gpt2NamesShapesAndConv1DLayout) {
  ModelDescription model = Describe("gpt2.json");
  const LayerUnit& embedding = model.embedding();
  ASSERT_EQ(embedding.params.size(), 2u);
  EXPECT_EQ(embedding.params[0].name, "transformer.wte.weight");
  EXPECT_EQ(embedding.params[0].shape, (std::vector<int64_t>{50257, 768}));
  EXPECT_EQ(embedding.params[1].name, "transformer.wpe.weight");
  EXPECT_EQ(embedding.params[1].shape, (std::vector<int64_t>{1024, 768}));

  const LayerUnit& block = model.units[1];
  ASSERT_EQ(block.params.size(), 12u);
  const ParamSpec* c_attn = FindParam(block, "transformer.h.0.attn.c_attn.weight");
  ASSERT_NE(c_attn, nullptr);
  EXPECT_EQ(c_attn->shape, (std::vector<int64_t>{768, 2304}));  // Conv1D: [in, out]
  EXPECT_TRUE(c_attn->weight_decay);
  const ParamSpec* fc = FindParam(block, "transformer.h.0.mlp.c_fc.weight");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->shape, (std::vector<int64_t>{768, 3072}));
  const ParamSpec* proj = FindParam(block, "transformer.h.0.mlp.c_proj.weight");
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->shape, (std::vector<int64_t>{3072, 768}));
  for (const char* name : {"transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias",
                           "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.bias",
                           "transformer.h.0.ln_2.bias", "transformer.h.0.mlp.c_fc.bias"}) {
    const ParamSpec* p = FindParam(block, name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_FALSE(p->weight_decay) << name;
  }
  EXPECT_EQ(block.num_parameters(), 7'087'872);
  EXPECT_TRUE(embedding.params[0].weight_decay);  // embeddings keep decay
}

TEST(LayerUnitsTest, TiedHeadReadsTheEmbeddingAndCountsItOnce) {
  ModelDescription model = Describe("gpt2.json");
  const LayerUnit& head = model.head();
  EXPECT_EQ(head.shares_parameters_with_unit, 0);
  ASSERT_EQ(head.params.size(), 2u);  // ln_f weight and bias
  EXPECT_EQ(head.params[0].name, "transformer.ln_f.weight");
  ASSERT_EQ(head.shared_params.size(), 1u);
  EXPECT_EQ(head.shared_params[0].name, "transformer.wte.weight");
  EXPECT_EQ(head.shared_params[0].role, ParamRole::kMatmulWeight);
  EXPECT_EQ(UnitParameterBytes(head), 2 * 768 * 2);
  EXPECT_EQ(UnitResidentParameterBytes(head), 2 * 768 * 2 + 50257LL * 768 * 2);
  EXPECT_EQ(UnitResidentParameterBytes(model.embedding()), UnitParameterBytes(model.embedding()));
}

TEST(LayerUnitsTest, UntiedHeadOwnsLmHead) {
  ModelDescription model = Describe("llama-2-7b.json");
  const LayerUnit& head = model.head();
  EXPECT_EQ(head.shares_parameters_with_unit, -1);
  EXPECT_TRUE(head.shared_params.empty());
  ASSERT_EQ(head.params.size(), 2u);
  EXPECT_EQ(head.params[0].name, "model.norm.weight");
  EXPECT_EQ(head.params[1].name, "lm_head.weight");
  EXPECT_EQ(head.params[1].shape, (std::vector<int64_t>{32000, 4096}));
  EXPECT_EQ(UnitParameterBytes(head), (4096 + 32000LL * 4096) * 2);
  EXPECT_EQ(UnitResidentParameterBytes(head), UnitParameterBytes(head));
  EXPECT_EQ(model.embedding().params[0].name, "model.embed_tokens.weight");
}

TEST(LayerUnitsTest, GqaShapes) {
  ModelDescription model = Describe("meta-llama-3-8b.json");
  const LayerUnit& block = model.units[32];
  const ParamSpec* k = FindParam(block, "model.layers.31.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{1024, 4096}));
  const ParamSpec* down = FindParam(block, "model.layers.31.mlp.down_proj.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape, (std::vector<int64_t>{4096, 14336}));
  EXPECT_EQ(FindParam(block, "model.layers.31.self_attn.q_proj.bias"), nullptr);
}

TEST(LayerUnitsTest, Qwen2BiasesAndQwen3QkNorm) {
  ModelDescription qwen2 = Describe("qwen2-7b.json");
  const LayerUnit& b2 = qwen2.units[1];
  const ParamSpec* q_bias = FindParam(b2, "model.layers.0.self_attn.q_proj.bias");
  ASSERT_NE(q_bias, nullptr);
  EXPECT_EQ(q_bias->shape, (std::vector<int64_t>{3584}));
  EXPECT_FALSE(q_bias->weight_decay);
  const ParamSpec* k_bias = FindParam(b2, "model.layers.0.self_attn.k_proj.bias");
  ASSERT_NE(k_bias, nullptr);
  EXPECT_EQ(k_bias->shape, (std::vector<int64_t>{512}));
  EXPECT_NE(FindParam(b2, "model.layers.0.self_attn.v_proj.bias"), nullptr);
  EXPECT_EQ(FindParam(b2, "model.layers.0.self_attn.o_proj.bias"), nullptr);

  ModelDescription qwen3 = Describe("qwen3-0.6b.json");
  const LayerUnit& b3 = qwen3.units[1];
  const ParamSpec* q_norm = FindParam(b3, "model.layers.0.self_attn.q_norm.weight");
  ASSERT_NE(q_norm, nullptr);
  EXPECT_EQ(q_norm->shape, (std::vector<int64_t>{128}));
  EXPECT_FALSE(q_norm->weight_decay);
  EXPECT_NE(FindParam(b3, "model.layers.0.self_attn.k_norm.weight"), nullptr);
  const ParamSpec* o = FindParam(b3, "model.layers.0.self_attn.o_proj.weight");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->shape, (std::vector<int64_t>{1024, 2048}));  // [C, heads * head_dim]
  EXPECT_EQ(FindParam(b3, "model.layers.0.self_attn.q_proj.bias"), nullptr);
  EXPECT_EQ(qwen3.head().shares_parameters_with_unit, 0);
}

TEST(LayerUnitsTest, AttentionKeysPerQuery) {
  EXPECT_DOUBLE_EQ(AttentionKeysPerQuery(1, 0), 1.0);
  EXPECT_DOUBLE_EQ(AttentionKeysPerQuery(1024, 0), 512.5);
  EXPECT_DOUBLE_EQ(AttentionKeysPerQuery(4096, 4096), 2048.5);  // window not binding
  EXPECT_DOUBLE_EQ(AttentionKeysPerQuery(8192, 4096), 3072.25);
}

TEST(LayerUnitsTest, Gpt2FlopsExact) {
  ModelDescription model = Describe("gpt2.json");
  const int64_t T = 1024;
  EXPECT_DOUBLE_EQ(UnitFlops(model, 0, T).forward_flops, 0.0);
  EXPECT_DOUBLE_EQ(UnitFlops(model, 0, T).backward_flops, 0.0);
  // Block: 2 * 12 C^2 matmul + 2 * 2 * C * (T + 1) / 2 attention.
  UnitFlopsPerToken block = UnitFlops(model, 1, T);
  EXPECT_DOUBLE_EQ(block.forward_flops, 2.0 * 12 * 768 * 768 + 2.0 * 768 * 1025);
  EXPECT_DOUBLE_EQ(block.backward_flops, 2 * block.forward_flops);
  EXPECT_DOUBLE_EQ(UnitAttentionForwardFlopsPerToken(model, 1, T), 2.0 * 768 * 1025);
  // Tied head still does the V x C matmul.
  EXPECT_DOUBLE_EQ(UnitFlops(model, 13, T).forward_flops, 2.0 * 50257 * 768);
  EXPECT_DOUBLE_EQ(ModelFlops(model, T).forward_flops, 265'956'864.0);
}

// Forward FLOPs per token = 2 x (non-embedding params + the LM head matmul) + attention, up to
// norms and biases (not matmuls), which are a tiny fraction.
TEST(LayerUnitsTest, FlopsAreTwiceNonEmbeddingParamsPlusAttention) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.fixture);
    ModelDescription model = Describe(e.fixture);
    const ModelConfig& c = model.config;
    for (int64_t T : {1, 2048, 8192}) {
      double attention = 0;
      for (int64_t i = 0; i < model.num_units(); ++i) {
        attention += UnitAttentionForwardFlopsPerToken(model, i, T);
      }
      const double expected_attention =
          4.0 * c.num_layers * c.num_heads * c.head_dim * AttentionKeysPerQuery(T, c.sliding_window);
      EXPECT_DOUBLE_EQ(attention, expected_attention);
      const double lm_head = static_cast<double>(c.vocab_size) * c.hidden_size;
      const double params_term = 2.0 * (static_cast<double>(e.non_embedding) + lm_head);
      UnitFlopsPerToken flops = ModelFlops(model, T);
      EXPECT_NEAR(flops.forward_flops - attention, params_term, 1e-3 * params_term);
      EXPECT_LE(flops.forward_flops - attention, params_term);
      EXPECT_DOUBLE_EQ(flops.backward_flops, 2 * flops.forward_flops);
    }
  }
}

TEST(LayerUnitsTest, MistralSlidingWindowCapsAttention) {
  ModelDescription model = Describe("mistral-7b-v0.1.json");
  EXPECT_DOUBLE_EQ(UnitAttentionForwardFlopsPerToken(model, 1, 8192), 4.0 * 4096 * 3072.25);
  EXPECT_DOUBLE_EQ(UnitAttentionForwardFlopsPerToken(model, 1, 2048), 4.0 * 4096 * 1024.5);
}

TEST(LayerUnitsTest, ActivationBytes) {
  ModelDescription gpt2 = Describe("gpt2.json");
  UnitActivationBytes emb = UnitActivations(gpt2, 0);
  EXPECT_EQ(emb.boundary_bytes_per_token, 4);
  EXPECT_EQ(emb.SavedBytesPerToken(1024), 0);
  // GPT-2 block: (7 C + 2 I) bf16 + 2 LayerNorm stats (8 bytes each) + logsumexp 4 * 12.
  UnitActivationBytes block = UnitActivations(gpt2, 1);
  EXPECT_EQ(block.boundary_bytes_per_token, 768 * 2);
  EXPECT_EQ(block.saved_bytes_per_token, (7 * 768 + 2 * 3072) * 2 + 16 + 48);
  EXPECT_EQ(block.saved_bytes_per_token_per_position, 0);
  ActivationOptions eager;
  eager.flash_attention = false;
  UnitActivationBytes eager_block = UnitActivations(gpt2, 1, eager);
  EXPECT_EQ(eager_block.saved_bytes_per_token, (7 * 768 + 2 * 3072) * 2 + 16);
  EXPECT_EQ(eager_block.SavedBytesPerToken(1024), eager_block.saved_bytes_per_token + 12 * 2 * 1024);

  ModelDescription llama = Describe("llama-2-7b.json");
  // 3 C + 2 A + 2 K + 3 I elements, 2 RMSNorm rstd, logsumexp per head.
  EXPECT_EQ(UnitActivations(llama, 1).saved_bytes_per_token,
            (3 * 4096 + 2 * 4096 + 2 * 4096 + 3 * 11008) * 2 + 8 + 4 * 32);
  UnitActivationBytes head = UnitActivations(llama, 33);
  EXPECT_EQ(head.boundary_bytes_per_token, 4096 * 2);
  EXPECT_EQ(head.saved_bytes_per_token, 4096 * 2 + 4 + 32000 * 4 + 4);
  ActivationOptions fused;
  fused.logits_bytes = 0;
  EXPECT_EQ(UnitActivations(llama, 33, fused).saved_bytes_per_token, 4096 * 2 + 4 + 4);

  ModelDescription qwen3 = Describe("qwen3-8b.json");
  // Plus pre-norm q and k and their per-head rstd.
  EXPECT_EQ(UnitActivations(qwen3, 1).saved_bytes_per_token,
            (3 * 4096 + 2 * 4096 + 2 * 1024 + 3 * 12288 + 4096 + 1024) * 2 + 8 + 4 * (32 + 8) +
                4 * 32);
}

TEST(LayerUnitsTest, DescribeRejectsInvalidConfig) {
  ModelConfig config;  // all sizes zero
  absl::StatusOr<ModelDescription> model = DescribeModel(config);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::model
