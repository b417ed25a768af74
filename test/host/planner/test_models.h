// Test helpers for the planner tests: a tiny Llama-like model whose numbers are easy to compute by
// hand, and topology fixtures loaded with their derived facts.
#ifndef MOBIUS_TEST_HOST_PLANNER_TEST_MODELS_H_
#define MOBIUS_TEST_HOST_PLANNER_TEST_MODELS_H_

#include <string>

#include "common/model/layer_units.h"
#include "common/model/model_config_parse.h"
#include "gtest/gtest.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::planner {

// V = 1000, C = 64, L = 2 blocks, 4 heads of 16 (no GQA), I = 128, untied, SwiGLU, RMSNorm.
// Parameters: embedding 64000; block 4*64*64 + 3*64*128 + 2*64 = 41088; head 64 + 64000;
// total 64000 + 2*41088 + 64064 = 210240.
inline model::ModelDescription TinyLlama() {
  model::ModelConfig c;
  c.family = model::Family::kLlama;
  c.model_type = "llama";
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.max_position_embeddings = 128;
  c.norm = model::NormKind::kRmsNorm;
  c.mlp = model::MlpKind::kSwiGlu;
  c.position = model::PositionKind::kRope;
  c.tie_word_embeddings = false;
  absl::StatusOr<model::ModelDescription> m = model::DescribeModel(c);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : model::ModelDescription{};
}

struct LoadedFixture {
  topology::Topology topology;
  topology::TopologyFacts facts;
};

inline LoadedFixture LoadFixture(const std::string& name) {
  auto source = topology::MakeHwlocXmlFileSource(testing::TopologyFixture(name));
  absl::StatusOr<topology::LoadedTopology> loaded = source->Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  LoadedFixture f;
  if (loaded.ok()) {
    f.topology = loaded->topology;
    f.facts = topology::Analyze(f.topology);
  }
  return f;
}

// A model of test/data/models (its config.json), described.
inline model::ModelDescription LoadModelFile(const std::string& name) {
  auto config = model::LoadModelConfig(testing::SourcePath("test/data/models/" + name));
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  auto m = model::DescribeModel(*config);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : model::ModelDescription{};
}

}  // namespace mobius::planner

#endif  // MOBIUS_TEST_HOST_PLANNER_TEST_MODELS_H_
