// The host store's activation gradients: one fp32 buffer per microbatch, whatever the number of
// backward boundaries (store_layout.h: the pass that reads a microbatch's gradient at boundary b
// writes it at b - 1). The runtime's use of it is checked bit for bit against the standalone
// trainer by pipeline_equivalence_test (up to 5 backward stages, every schedule and transport);
// the planner counts the same bytes (planner_estimator_test
// ActivationGradientsAreOneBufferPerMicrobatch).
#include "common/run/store_layout.h"

#include "absl/strings/str_cat.h"
#include "common/model/model_config_parse.h"
#include "gtest/gtest.h"

namespace mobius::runtime {
namespace {

model::ModelConfig TinyLlama(int layers) {
  absl::StatusOr<model::ModelConfig> c = model::ParseModelConfig(
      absl::StrCat(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64,
                      "num_attention_heads": 4, "intermediate_size": 128,
                      "max_position_embeddings": 64, "num_hidden_layers": )",
                   layers, "}"),
      "inline");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

RunConfig MobiusRun(const std::vector<int64_t>& cuts, int microbatches) {
  RunConfig run;
  run.job_id = "test";
  run.backend = "cpu";
  run.store_path = "unused";  // validated, not opened
  run.num_workers = cuts.size() > 2 ? 2 : 1;
  run.training.batch = 2 * microbatches;
  run.training.microbatch = 2;
  run.training.seq = 16;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    run.stages.push_back({cuts[i], cuts[i + 1]});
    run.stage_rank.push_back(static_cast<int>(i % run.num_workers));
  }
  return run;
}

uint64_t Align(uint64_t x) { return (x + 4095) & ~uint64_t{4095}; }

TEST(StoreLayoutTest, ActivationGradientsAreOneBufferPerMicrobatch) {
  const model::ModelConfig config = TinyLlama(4);  // units: embedding, 4 blocks, head
  for (const std::vector<int64_t>& cuts :
       {std::vector<int64_t>{0, 3, 6}, std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}}) {
    absl::StatusOr<StoreLayout> l = MakeStoreLayout(config, MobiusRun(cuts, 4));
    ASSERT_TRUE(l.ok()) << l.status();
    ASSERT_EQ(l->num_backward_boundaries(), static_cast<int>(cuts.size()) - 2);
    EXPECT_EQ(l->boundary_elements, 2u * 16 * 64);
    const uint64_t buffer = Align(4 * l->boundary_elements);
    for (int m = 0; m < 4; ++m) EXPECT_EQ(l->dgrad_offset(m), l->activation_grads + m * buffer);
    // The region ends where the next (the boundary-gradient channels' ids) begins.
    EXPECT_EQ(l->channel_ids - l->activation_grads, 4 * buffer) << cuts.size() - 1 << " stages";
    // Every boundary keeps its own ready word per microbatch (the counters are tiny).
    EXPECT_NE(l->dgrad_ready_word(0, 3), l->dgrad_ready_word(1, 3));
  }
  // One backward stage: no boundary, no buffer.
  absl::StatusOr<StoreLayout> one = MakeStoreLayout(config, MobiusRun({0, 6}, 4));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->channel_ids, one->activation_grads);
}

}  // namespace
}  // namespace mobius::runtime
