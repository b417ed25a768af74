// Walks the model-family table (common/model/family.h): every family is found by its model_type,
// every preset builds a valid config, config.json round-trips (text and ModelConfig), and the
// tensor names and shapes of the layer units agree with the reference model's parameters.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/model/config_json.h"
#include "common/model/family.h"
#include "common/model/layer_units.h"
#include "common/model/model_config_parse.h"
#include "gtest/gtest.h"
#include "worker/reference/parameters.h"

namespace mobius::model {
namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

ModelConfig FromPreset(const FamilyDescriptor& d, const FamilyPreset& p) {
  ModelConfig c;
  c.family = d.family;
  c.model_type = d.model_type;
  c.num_layers = p.layers;
  c.hidden_size = p.hidden;
  c.num_heads = p.heads;
  c.num_kv_heads = d.kv_heads_follow_heads ? p.heads : p.kv_heads;
  c.head_dim = p.head_dim;
  c.intermediate_size = p.intermediate;
  c.vocab_size = p.vocab;
  c.max_position_embeddings = p.positions;
  d.set_defaults(c);
  return c;
}

void ExpectSameConfig(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.norm, b.norm);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.mlp, b.mlp);
  EXPECT_EQ(a.position, b.position);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.attention_output_bias, b.attention_output_bias);
  EXPECT_EQ(a.mlp_bias, b.mlp_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
}

Shapes LayerUnitShapes(const ModelConfig& c) {
  absl::StatusOr<ModelDescription> model = DescribeModel(c);
  EXPECT_TRUE(model.ok()) << model.status();
  Shapes out;
  if (!model.ok()) return out;
  for (const LayerUnit& unit : model->units) {
    for (const ParamSpec& p : unit.params) {
      EXPECT_TRUE(out.emplace(p.name, p.shape).second) << "duplicate " << p.name;
    }
    for (const ParamSpec& p : unit.shared_params) EXPECT_EQ(out.at(p.name), p.shape) << p.name;
  }
  return out;
}

Shapes ReferenceShapes(const ModelConfig& c) {
  Shapes out;
  for (const auto& [name, shape] : reference::ParameterShapes(c)) {
    EXPECT_TRUE(out.emplace(name, shape).second) << "duplicate " << name;
  }
  return out;
}

TEST(FamilyTableTest, EveryFamilyIsFoundByItsNames) {
  ASSERT_FALSE(Families().empty());
  std::string listed;
  for (const FamilyDescriptor* d : Families()) {
    EXPECT_EQ(FindFamily(d->model_type), d);
    EXPECT_EQ(&FamilyOf(d->family), d);
    EXPECT_STREQ(FamilyName(d->family), d->model_type);
    EXPECT_FALSE(d->presets.empty()) << d->model_type;
    listed += listed.empty() ? d->model_type : std::string(", ") + d->model_type;
  }
  EXPECT_EQ(SupportedModelTypes(), listed);
  EXPECT_EQ(FindFamily("bert"), nullptr);
}

TEST(FamilyTableTest, ConfigJsonRoundTripsForEveryPreset) {
  for (const FamilyDescriptor* d : Families()) {
    for (const FamilyPreset& p : d->presets) {
      SCOPED_TRACE(std::string(d->model_type) + "-" + p.name);
      const ModelConfig c = FromPreset(*d, p);
      if (d->check_generated != nullptr) ASSERT_TRUE(d->check_generated(c).ok());
      ASSERT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c);
      ASSERT_TRUE(reference::ValidateConfig(c).ok()) << reference::ValidateConfig(c);
      const std::string text = ModelConfigJson(c, "bfloat16");
      const nlohmann::json j = nlohmann::json::parse(text);
      EXPECT_EQ(j["architectures"][0], d->architecture);
      EXPECT_EQ(j["model_type"], d->model_type);
      absl::StatusOr<ModelConfig> parsed = ParseModelConfig(text, "config.json");
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      ExpectSameConfig(c, *parsed);
      EXPECT_EQ(ModelConfigJson(*parsed, "bfloat16"), text);
    }
  }
}

TEST(FamilyTableTest, LayerUnitsAndReferenceParametersNameTheSameTensors) {
  for (const FamilyDescriptor* d : Families()) {
    for (const FamilyPreset& p : d->presets) {
      const ModelConfig preset = FromPreset(*d, p);
      // The preset, its head untied (or tied), and every optional bias switched on.
      ModelConfig untied = preset;
      untied.tie_word_embeddings = !preset.tie_word_embeddings;
      ModelConfig biased = preset;
      biased.attention_bias = biased.attention_output_bias = biased.mlp_bias = true;
      for (const ModelConfig& c : {preset, untied, biased}) {
        SCOPED_TRACE(std::string(d->model_type) + "-" + p.name +
                     (c.tie_word_embeddings ? " tied" : " untied") + (c.mlp_bias ? " biased" : ""));
        const Shapes units = LayerUnitShapes(c);
        const Shapes reference = ReferenceShapes(c);
        EXPECT_EQ(units, reference);
        EXPECT_EQ(units.count(d->tensors.token_embedding), 1u);
        EXPECT_EQ(units.count(d->tensors.lm_head), c.tie_word_embeddings ? 0u : 1u);
      }
    }
  }
}

}  // namespace
}  // namespace mobius::model
