#include "common/model/model_config_parse.h"

#include <dirent.h>

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius::model {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Fixture(const std::string& name) {
  return testing::SourcePath("test/data/models/" + name);
}

ModelConfig LoadOk(const std::string& name) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(Fixture(name));
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ModelConfig{};
}

TEST(ParseModelConfigTest, Gpt2) {
  ModelConfig c = LoadOk("gpt2.json");
  EXPECT_EQ(c.family, Family::kGpt2);
  EXPECT_EQ(c.model_type, "gpt2");
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_layers, 12);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.num_kv_heads, 12);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 4 * 768);  // n_inner absent
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_EQ(c.norm, NormKind::kLayerNorm);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.mlp, MlpKind::kGeluTanh);
  EXPECT_EQ(c.position, PositionKind::kLearned);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_output_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.bos_token_id, 50256);
  EXPECT_EQ(c.eos_token_id, 50256);
  EXPECT_EQ(c.sliding_window, 0);
}

TEST(ParseModelConfigTest, Gpt2NInnerNullMeansFourC) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(
      R"({"model_type": "gpt2", "vocab_size": 100, "n_embd": 32, "n_layer": 2, "n_head": 4,
          "n_inner": null, "n_positions": 64})",
      "inline");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->intermediate_size, 128);
  EXPECT_EQ(c->bos_token_id, -1);
}

TEST(ParseModelConfigTest, Llama2) {
  ModelConfig c = LoadOk("llama-2-7b.json");
  EXPECT_EQ(c.family, Family::kLlama);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 11008);
  EXPECT_EQ(c.norm, NormKind::kRmsNorm);
  EXPECT_EQ(c.mlp, MlpKind::kSwiGlu);
  EXPECT_EQ(c.position, PositionKind::kRope);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_output_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
}

TEST(ParseModelConfigTest, Llama3AndLlama31RopeScaling) {
  ModelConfig l3 = LoadOk("meta-llama-3-8b.json");
  EXPECT_EQ(l3.num_kv_heads, 8);
  EXPECT_DOUBLE_EQ(l3.rope_theta, 500000.0);
  EXPECT_EQ(l3.rope_scaling.type, RopeScaling::Type::kNone);

  ModelConfig l31 = LoadOk("llama-3.1-8b-instruct.json");
  EXPECT_EQ(l31.max_position_embeddings, 131072);
  EXPECT_EQ(l31.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(l31.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(l31.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(l31.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(l31.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(l31.eos_token_id, 128001);  // first of [128001, 128008, 128009]
}

TEST(ParseModelConfigTest, LinearRopeScalingWithLegacyTypeKey) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(
      R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64,
          "rope_scaling": {"type": "linear", "factor": 2.0}, "head_dim": 32,
          "attention_bias": true, "mlp_bias": true, "tie_word_embeddings": true})",
      "inline");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 2.0);
  EXPECT_EQ(c->head_dim, 32);  // explicit, although 64 / 4 = 16
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_TRUE(c->attention_output_bias);  // Llama's attention_bias covers o_proj too
  EXPECT_TRUE(c->mlp_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c->norm_eps, 1e-6);  // LlamaConfig default
}

TEST(ParseModelConfigTest, Mistral) {
  ModelConfig c = LoadOk("mistral-7b-v0.1.json");
  EXPECT_EQ(c.family, Family::kMistral);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_output_bias);
}

TEST(ParseModelConfigTest, Qwen2HasQkvBiasButNoOutputBias) {
  ModelConfig c = LoadOk("qwen2-7b.json");
  EXPECT_EQ(c.family, Family::kQwen2);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_output_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.sliding_window, 0);  // sliding_window is set but use_sliding_window is false
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
}

TEST(ParseModelConfigTest, Qwen3) {
  ModelConfig c = LoadOk("qwen3-8b.json");
  EXPECT_EQ(c.family, Family::kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_id, 151645);

  ModelConfig small = LoadOk("qwen3-0.6b.json");
  EXPECT_EQ(small.num_heads * small.head_dim, 2048);  // wider than hidden_size 1024
  EXPECT_TRUE(small.tie_word_embeddings);
}

TEST(LoadModelConfigTest, DirectoryReadsConfigJson) {
  ModelConfig c = LoadOk("tiny-llama");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 2);
}

TEST(LoadModelConfigTest, MissingFileIsNotFound) {
  absl::StatusOr<ModelConfig> c = LoadModelConfig(Fixture("no-such-model"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("no-such-model"));
  // A directory without config.json names the file it looked for.
  c = LoadModelConfig(Fixture("bad"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("bad/config.json"));
}

TEST(ParseModelConfigTest, TooLargeTextIsRejected) {
  std::string text(kMaxConfigJsonBytes + 1, ' ');
  absl::StatusOr<ModelConfig> c = ParseModelConfig(text, "big.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), StartsWith("big.json: "));
}

TEST(ParseModelConfigTest, InvalidUtf8InAnErrorValueDoesNotThrow) {
  absl::StatusOr<ModelConfig> c =
      ParseModelConfig("{\"model_type\": \"ll\xff\xfe\"}", "utf8.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

// Every file under test/data/models/bad/ with the field path and reason its error must name.
struct BadCase {
  const char* file;
  const char* field;  // "" when the error is about the document, not a field
  const char* reason;
};

constexpr BadCase kBadCases[] = {
    {"missing_num_attention_heads", "num_attention_heads", "missing"},
    {"negative_num_attention_heads", "num_attention_heads", "must be a positive integer (got -4)"},
    {"string_n_head", "n_head", "must be a positive integer (got \"12\")"},
    {"unknown_model_type", "model_type",
     "unknown model_type \"bert\" (supported: gpt2, llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, "
     "gpt_oss)"},
    {"missing_model_type", "model_type", "missing"},
    {"numeric_model_type", "model_type", "must be a string (got 7)"},
    {"hidden_not_divisible_by_heads", "num_attention_heads",
     "hidden_size 4097 is not divisible by 32 heads"},
    {"gpt2_n_embd_not_divisible", "n_head", "n_embd 770 is not divisible by 12 heads"},
    {"heads_not_divisible_by_kv", "num_key_value_heads",
     "32 attention heads are not divisible by 5 key/value heads"},
    {"zero_vocab", "vocab_size", "must be a positive integer (got 0)"},
    {"fractional_vocab", "vocab_size", "must be a positive integer (got 32000.5)"},
    {"huge_hidden_size", "hidden_size", "1000000000000 is more than the supported 131072"},
    {"huge_unsigned_layers", "num_hidden_layers", "must be a positive integer"},
    {"negative_rms_norm_eps", "rms_norm_eps", "must be a positive number"},
    {"string_rope_theta", "rope_theta", "must be a positive number (got \"10000\")"},
    {"rope_scaling_longrope", "rope_scaling.rope_type", "unsupported rope scaling \"longrope\""},
    {"gpt_oss_output_router_logits", "output_router_logits",
     "true is not supported for gpt_oss"},
    {"gpt_oss_bad_layer_types", "layer_types[1]",
     "must be \"sliding_attention\" or \"full_attention\" (got \"chunked_attention\")"},
    {"gpt_oss_swiglu_limit", "swiglu_limit", "must be 7"},
    {"rope_scaling_dynamic_legacy_type", "rope_scaling.type", "unsupported rope scaling \"dynamic\""},
    {"rope_scaling_missing_factor", "rope_scaling.factor", "missing"},
    {"rope_scaling_inverted_freq_factors", "rope_scaling.high_freq_factor",
     "must be greater than low_freq_factor"},
    {"rope_scaling_without_type", "rope_scaling.rope_type", "missing"},
    {"rope_scaling_not_object", "rope_scaling", "must be an object or null (got 8)"},
    {"rope_scaling_linear_zero_factor", "rope_scaling.factor", "must be a positive number"},
    {"string_tie_word_embeddings", "tie_word_embeddings", "must be true or false"},
    {"eos_outside_vocab", "eos_token_id", "must be a token id in [0, 50257) (got 50257)"},
    {"eos_list_of_strings", "eos_token_id", "must be a token id"},
    {"negative_bos", "bos_token_id", "must be a token id in [0, 32000) (got -1)"},
    {"qwen3_missing_head_dim", "head_dim", "missing"},
    {"odd_head_dim", "head_dim", "must be even for rotary embeddings"},
    {"too_wide_attention", "head_dim", "4096 heads x 128 is more than the supported 262144"},
    {"gpt2_relu", "activation_function", "unsupported \"relu\""},
    {"llama_gelu", "hidden_act", "unsupported \"gelu\" (supported: silu)"},
    {"qwen2_use_sliding_window", "use_sliding_window", "true is not supported"},
    {"mistral_negative_sliding_window", "sliding_window", "must be a positive integer (got -1)"},
    {"mixtral_router_jitter", "router_jitter_noise",
     "router jitter (0.01) is not supported: set it to 0"},
    {"gpt2_zero_n_inner", "n_inner", "must be a positive integer (got 0)"},
    {"missing_intermediate_size", "intermediate_size", "missing"},
    {"missing_max_position_embeddings", "max_position_embeddings", "missing"},
    {"gpt2_missing_n_positions", "n_positions", "missing"},
    {"boolean_num_hidden_layers", "num_hidden_layers", "must be a positive integer (got true)"},
    {"top_level_array", "", "must be a JSON object (got [{\"model_type\":\"llama\"}])"},
    {"truncated", "", "not valid JSON: parse error at line 11"},
    {"empty", "", "not valid JSON: parse error at line 1, column 1"},
    {"trailing_garbage", "", "not valid JSON: parse error"},
};

TEST(BadConfigTest, EachFileFailsNamingItsField) {
  for (const BadCase& bad : kBadCases) {
    SCOPED_TRACE(bad.file);
    const std::string path = Fixture(std::string("bad/") + bad.file + ".json");
    absl::StatusOr<ModelConfig> c = LoadModelConfig(path);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
    const std::string prefix =
        *bad.field ? path + ": field \"" + bad.field + "\": " : path + ": ";
    EXPECT_THAT(std::string(c.status().message()), StartsWith(prefix + bad.reason));
  }
}

TEST(BadConfigTest, EveryFileInTheCorpusHasAnExpectation) {
  std::set<std::string> expected;
  for (const BadCase& bad : kBadCases) expected.insert(std::string(bad.file) + ".json");
  DIR* dir = opendir(Fixture("bad").c_str());
  ASSERT_NE(dir, nullptr);
  int files = 0;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    ++files;
    EXPECT_TRUE(expected.count(name)) << name << " has no entry in kBadCases";
  }
  closedir(dir);
  EXPECT_EQ(files, static_cast<int>(expected.size()));
}

TEST(ValidateModelConfigTest, NamesTheMember) {
  ModelConfig c = LoadOk("llama-2-7b.json");
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  c.num_kv_heads = 3;
  EXPECT_THAT(std::string(ValidateModelConfig(c).message()), StartsWith("ModelConfig.num_kv_heads"));
  c = LoadOk("llama-2-7b.json");
  c.eos_token_id = 32000;
  EXPECT_THAT(std::string(ValidateModelConfig(c).message()), StartsWith("ModelConfig.eos_token_id"));
  c = LoadOk("gpt2.json");
  c.head_dim = 32;
  EXPECT_THAT(std::string(ValidateModelConfig(c).message()), StartsWith("ModelConfig.head_dim"));
  EXPECT_STREQ(FamilyName(Family::kQwen3), "qwen3");
}

}  // namespace
}  // namespace mobius::model
