#include "common/rpc/jobspec_convert.h"

#include <filesystem>
#include <string>

#include "common/jobspec/yaml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius {
namespace {

TEST(JobSpecConvertTest, EveryGoodSpecRoundTripsThroughTheWire) {
  int specs = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::SourcePath("test/data/specs/good"))) {
    absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpecFile(entry.path().string());
    ASSERT_TRUE(spec.ok()) << spec.status();
    const v1::JobSpec proto = JobSpecToProto(*spec);
    v1::JobSpec reparsed;  // through the bytes, as gRPC carries it
    ASSERT_TRUE(reparsed.ParseFromString(proto.SerializeAsString()));
    EXPECT_EQ(JobSpecFromProto(reparsed), *spec) << entry.path();
    ++specs;
  }
  EXPECT_GE(specs, 4);
}

TEST(JobSpecConvertTest, FieldsLandWhereExpected) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpecFile(
      testing::SourcePath("test/data/specs/good/every-field.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::JobSpec p = JobSpecToProto(*spec);
  EXPECT_EQ(p.name(), "every-field");
  EXPECT_EQ(p.labels().at("b"), "two");
  EXPECT_EQ(p.priority(), -5);
  EXPECT_EQ(p.dataset().tokenizer(), "/t");
  EXPECT_EQ(p.training().microbatch(), 3);
  EXPECT_TRUE(p.training().has_grad_clip());
  EXPECT_EQ(p.training().grad_clip(), 0);  // explicit 0 (off) survives, unlike a plain proto3 0
  EXPECT_EQ(p.training().seed(), 18446744073709551615ull);
  EXPECT_EQ(p.resources().device_memory_bytes(), 21474836480);
  EXPECT_EQ(p.plan().partitioner(), "mip");
  EXPECT_EQ(p.training().optimizer_staleness(), 0);
  ASSERT_TRUE(p.has_adapter());
  EXPECT_EQ(p.adapter().type(), "lora");
  EXPECT_TRUE(p.adapter().has_rank());
  EXPECT_EQ(p.adapter().rank(), 16);
  EXPECT_EQ(p.adapter().alpha(), 32);
  EXPECT_EQ(p.adapter().dropout(), 0.05);
  EXPECT_THAT(p.adapter().target_modules(), ::testing::ElementsAre("q_proj", "v_proj", "down_proj"));
  EXPECT_EQ(p.adapter().init_from(), "/adapters/start");
  EXPECT_EQ(JobSpecFromProto(p), *spec);
  EXPECT_EQ(p.checkpoint().every_steps(), 100);
  EXPECT_TRUE(p.has_max_restarts());
  EXPECT_EQ(p.max_restarts(), 0);
}

TEST(JobSpecConvertTest, PoolDispatchTravels) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpecFile(
      testing::SourcePath("test/data/specs/good/flow-style-all-gpus.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::JobSpec p = JobSpecToProto(*spec);
  EXPECT_EQ(p.plan().dispatch(), "pool");
  EXPECT_EQ(p.training().optimizer_staleness(), 1);
  EXPECT_EQ(JobSpecFromProto(p), *spec);
}

TEST(JobSpecConvertTest, PrecisionTravelsAndDefaultsToBf16) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpecFile(
      testing::SourcePath("test/data/specs/good/flow-style-all-gpus.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->training.precision = "fp16";
  v1::JobSpec p = JobSpecToProto(*spec);
  EXPECT_EQ(p.training().precision(), "fp16");
  EXPECT_EQ(JobSpecFromProto(p), *spec);
  p.mutable_training()->clear_precision();  // an older client
  EXPECT_EQ(JobSpecFromProto(p).training.precision, "bf16");
}

// No adapter message: full fine-tuning, both ways. A message with only its type set takes
// PEFT's defaults for rank and alpha; one with nothing set is an adapter without a type (which
// the validator refuses), not "no adapter".
TEST(JobSpecConvertTest, AdapterPresenceSurvivesTheWire) {
  jobspec::JobSpec s;
  s.model_dir = "/m";
  EXPECT_FALSE(JobSpecToProto(s).has_adapter());
  EXPECT_FALSE(JobSpecFromProto(JobSpecToProto(s)).adapter.has_value());

  v1::JobSpec p;
  p.mutable_adapter()->set_type("lora");
  v1::JobSpec reparsed;
  ASSERT_TRUE(reparsed.ParseFromString(p.SerializeAsString()));
  jobspec::JobSpec from = JobSpecFromProto(reparsed);
  ASSERT_TRUE(from.adapter.has_value());
  EXPECT_EQ(*from.adapter, (jobspec::AdapterSpec{.type = "lora", .rank = 8, .alpha = 8.0}));

  p.mutable_adapter()->Clear();
  ASSERT_TRUE(reparsed.ParseFromString(p.SerializeAsString()));
  EXPECT_TRUE(reparsed.has_adapter());
  from = JobSpecFromProto(reparsed);
  ASSERT_TRUE(from.adapter.has_value());
  EXPECT_EQ(from.adapter->type, "");

  // Explicit values, zeros included, come back as sent.
  s.adapter = jobspec::AdapterSpec{.type = "lora", .rank = 1, .alpha = 0.5, .dropout = 0,
                                   .target_modules = {"c_attn"}, .init_from = "/a"};
  ASSERT_TRUE(reparsed.ParseFromString(JobSpecToProto(s).SerializeAsString()));
  EXPECT_EQ(JobSpecFromProto(reparsed), s);
}

TEST(JobSpecConvertTest, AbsentFieldsMeanDefaults) {
  // What a client in another language sends when it sets only the required fields.
  v1::JobSpec p;
  p.set_model_dir("/m");
  p.mutable_dataset()->set_path("/d");
  p.mutable_training()->set_steps(10);
  p.mutable_training()->set_global_batch(8);
  p.mutable_training()->set_seq_len(16);
  jobspec::JobSpec want;
  want.model_dir = "/m";
  want.dataset.path = "/d";
  want.training.steps = 10;
  want.training.global_batch = 8;
  want.training.seq_len = 16;
  EXPECT_EQ(JobSpecFromProto(p), want);
  EXPECT_EQ(JobSpecFromProto(p).training.lr, 3e-4);
  EXPECT_EQ(JobSpecFromProto(p).max_restarts, 1);
  EXPECT_EQ(JobSpecFromProto(v1::JobSpec()), jobspec::JobSpec());
}

}  // namespace
}  // namespace mobius
