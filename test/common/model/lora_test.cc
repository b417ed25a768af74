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

// Mixtures of experts: a name adapts every expert of every block with experts (PEFT's suffix match)
// and the dense MLP's module in dense blocks (Qwen3-MoE's mlp_only_layers); the router is refused
// by name. The experts' state shares K slots per target name.
TEST(LoraTest, MixtureOfExpertsAdaptsEveryExpertAndNotTheRouter) {
  const ModelConfig qwen = Load("qwen3_moe");  // 3 layers, layer 1 dense, 6 experts, k 2
  EXPECT_THAT(LoraTargetNames(qwen), ElementsAre("q_proj", "k_proj", "v_proj", "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"));
  auto m = LoraModules(qwen, {"q_proj", "gate_proj"});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 3u + 1 + 2 * 6);  // q_proj x 3, layer 1's gate_proj, 6 experts x 2 layers
  EXPECT_EQ((*m)[0].path, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ((*m)[1].path, "model.layers.0.mlp.experts.0.gate_proj");
  EXPECT_EQ((*m)[1].expert, 0);
  EXPECT_FALSE((*m)[1].in_mlp());
  EXPECT_EQ((*m)[1].in, 32);
  EXPECT_EQ((*m)[1].out, 24);
  EXPECT_EQ((*m)[6].path, "model.layers.0.mlp.experts.5.gate_proj");
  EXPECT_EQ((*m)[6].weight, "model.layers.0.mlp.experts.5.gate_proj.weight");
  EXPECT_EQ((*m)[6].a_name(),
            "base_model.model.model.layers.0.mlp.experts.5.gate_proj.lora_A.weight");
  EXPECT_EQ((*m)[7].path, "model.layers.1.self_attn.q_proj");
  EXPECT_EQ((*m)[8].path, "model.layers.1.mlp.gate_proj");
  EXPECT_EQ((*m)[8].expert, -1);
  EXPECT_TRUE((*m)[8].in_mlp());
  EXPECT_EQ((*m)[8].out, 48);
  EXPECT_EQ((*m)[9].path, "model.layers.2.self_attn.q_proj");

  // Layer 0's modules: q_proj one slot; the 6 experts' gate_proj share k = 2; scratch k = 2.
  const std::vector<LoraModule> layer0(m->begin(), m->begin() + 7);
  const LoraStateSlots slots = AssignLoraStateSlots(layer0, 2);
  EXPECT_THAT(slots.first, ElementsAre(0, 1, 1, 1, 1, 1, 1));
  EXPECT_EQ(slots.count, 3);
  EXPECT_EQ(slots.scratch, 2);
  auto both = LoraModules(qwen, {"down_proj", "up_proj"});
  ASSERT_TRUE(both.ok());
  const std::vector<LoraModule> l0(both->begin(), both->begin() + 12);
  EXPECT_EQ(AssignLoraStateSlots(l0, 2).count, 4);
  EXPECT_EQ(AssignLoraStateSlots({(*m)[7], (*m)[8]}, 2).scratch, 1);  // no expert: 1

  const ModelConfig mixtral = Load("mixtral_aux");  // 2 layers, 4 experts
  EXPECT_THAT(LoraTargetNames(mixtral),
              ElementsAre("q_proj", "k_proj", "v_proj", "o_proj", "w1", "w3", "w2"));
  auto x = LoraModules(mixtral, {"w2", "w1"});
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_EQ(x->size(), 2u * 4 * 2);
  EXPECT_EQ((*x)[0].path, "model.layers.0.block_sparse_moe.experts.0.w1");
  EXPECT_EQ((*x)[1].path, "model.layers.0.block_sparse_moe.experts.0.w2");
  EXPECT_EQ((*x)[1].in, 24);
  EXPECT_EQ((*x)[1].out, 32);
  EXPECT_EQ((*x)[7].path, "model.layers.0.block_sparse_moe.experts.3.w2");
  auto bad = LoraModules(mixtral, {"q_proj", "gate"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("target_modules[1]: \"gate\" is the experts' router "
                        "(block_sparse_moe.gate), which stays frozen"));
  EXPECT_THAT(std::string(LoraModules(mixtral, {"gate_proj"}).status().message()),
              HasSubstr("is not a linear module of mixtral models"));
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
