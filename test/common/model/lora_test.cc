// LoRA module table (common/model/lora.h) against what PEFT 0.10 does on the same models
// (test/reference/golden_lora/*: tensor names and shapes of PEFT's own adapter_model.safetensors).
#include "common/model/lora.h"

#include "common/model/model_config_parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelConfig Load(const std::string& dir) {
  auto c = LoadModelConfig(mobius::testing::SourcePath("test/reference/golden/" + dir));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(LoraTest, LlamaModulesNamesAndShapesArePefts) {
  const ModelConfig c = Load("llama_gqa");  // C 32, I 48, 4 heads, 2 kv heads, hd 8
  EXPECT_THAT(LoraTargetNames(c), ElementsAre("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                              "up_proj", "down_proj"));
  EXPECT_THAT(DefaultLoraTargets(c), ElementsAre("q_proj", "v_proj"));
  auto m = LoraModules(c, {"v_proj", "q_proj", "down_proj"});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 6u);  // 2 layers x 3, block order
  EXPECT_EQ((*m)[0].target, "q_proj");
  EXPECT_EQ((*m)[0].a_name(), "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ((*m)[0].weight, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ((*m)[0].in, 32);
  EXPECT_EQ((*m)[0].out, 32);
  EXPECT_EQ((*m)[1].target, "v_proj");
  EXPECT_EQ((*m)[1].out, 16);  // 2 kv heads x 8
  EXPECT_EQ((*m)[2].b_name(), "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
  EXPECT_EQ((*m)[2].in, 48);
  EXPECT_FALSE((*m)[2].in_out);
  EXPECT_EQ((*m)[5].layer, 1);
  EXPECT_EQ(LoraParameters(*m, 4), 2 * 4 * ((32 + 32) + (32 + 16) + (48 + 32)));
}

TEST(LoraTest, Gpt2CProjMatchesAttentionAndMlp) {
  const ModelConfig c = Load("gpt2");  // C 32, I 128
  EXPECT_THAT(LoraTargetNames(c), ElementsAre("c_attn", "c_proj", "c_fc"));
  EXPECT_THAT(DefaultLoraTargets(c), ElementsAre("c_attn"));
  auto m = LoraModules(c, {"c_attn", "c_proj", "c_fc"});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 8u);  // 2 layers x (c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj)
  EXPECT_EQ((*m)[0].a_name(), "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  EXPECT_EQ((*m)[0].out, 96);
  EXPECT_TRUE((*m)[0].in_out);
  EXPECT_EQ((*m)[1].path, "transformer.h.0.attn.c_proj");
  EXPECT_EQ((*m)[2].path, "transformer.h.0.mlp.c_fc");
  EXPECT_EQ((*m)[3].path, "transformer.h.0.mlp.c_proj");
  EXPECT_EQ((*m)[3].in, 128);
}

// Mixtures of experts: the dense MLP's modules exist only in dense blocks (Qwen3-MoE's
// mlp_only_layers; none in Mixtral), and adapters on the experts are refused, saying so.
TEST(LoraTest, MixtureOfExpertsAdaptsAttentionAndDenseBlocksOnly) {
  const ModelConfig qwen = Load("qwen3_moe");  // 3 layers, layer 1 dense (mlp_only_layers)
  EXPECT_THAT(LoraTargetNames(qwen), ElementsAre("q_proj", "k_proj", "v_proj", "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"));
  auto m = LoraModules(qwen, {"q_proj", "gate_proj"});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 4u);  // q_proj x 3, gate_proj of the dense layer 1 only
  EXPECT_EQ((*m)[1].path, "model.layers.1.self_attn.q_proj");
  EXPECT_EQ((*m)[2].path, "model.layers.1.mlp.gate_proj");
  EXPECT_EQ((*m)[3].path, "model.layers.2.self_attn.q_proj");

  const ModelConfig mixtral = Load("mixtral_aux");
  EXPECT_THAT(LoraTargetNames(mixtral), ElementsAre("q_proj", "k_proj", "v_proj", "o_proj"));
  auto bad = LoraModules(mixtral, {"q_proj", "w1"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("target_modules[1]"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("experts are not implemented"));
}

TEST(LoraTest, BadTargetsAndRanksNameTheField) {
  const ModelConfig c = Load("llama_gqa");
  absl::Status s =
      ValidateLora(c, 4, {"q_proj", "c_attn"}, "adapter.rank", "adapter.target_modules");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("adapter.target_modules[1]: \"c_attn\" is not a linear "
                                     "module of llama models (they have q_proj, k_proj"));
  EXPECT_THAT(ValidateLora(c, 4, {"q_proj", "q_proj"}).message(), HasSubstr("listed twice"));
  EXPECT_THAT(ValidateLora(c, 4, {}).message(), HasSubstr("target_modules: empty"));
  EXPECT_THAT(ValidateLora(c, 0, {"q_proj"}, "adapter.rank").message(),
              HasSubstr("adapter.rank: must be in [1, 32]"));
  EXPECT_THAT(ValidateLora(c, 17, {"q_proj", "k_proj"}).message(),
              HasSubstr("must be in [1, 16] (the smallest adapted dimension, k_proj's) (got 17)"));
  EXPECT_TRUE(ValidateLora(c, 16, {"q_proj", "k_proj"}).ok());
}

}  // namespace
}  // namespace mobius::model
