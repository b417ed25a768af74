// FindLongestSequence (issue 30): the longest sequence that plans on the 8x RTX 4090 fixture, the
// done-when figures of the issue, the search's answer at and beyond the model's context, and the
// plan at that length against the next one.
#include "host/planner/api/longest_sequence.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/host/planner/test_models.h"

namespace mobius::planner {
namespace {

using ::testing::HasSubstr;

LoadedFixture Rtx4090Box() { return LoadFixture("rtx4090_2s_4sw_8gpu.xml"); }
model::ModelDescription Load(const std::string& name) { return LoadModelFile(name); }

JobShape Job(int64_t batch) {
  JobShape j;
  j.global_batch = batch;
  j.microbatch = 1;
  return j;
}

// Llama-3.1-8B full fine-tuning on 24 GB cards: 64K tokens plan (the unchunked head's logits
// alone were 8 GiB at 16K), the longest is >= 64K, the next length is refused by a GPU's memory.
TEST(LongestSequence, Llama8bFullFineTuningReaches64kOn24GbCards) {
  const LoadedFixture f = Rtx4090Box();
  const model::ModelDescription m = Load("llama-3.1-8b-instruct.json");
  PlanOptions o;
  o.compare = false;
  JobShape j = Job(8);
  j.seq_len = 65536;
  absl::StatusOr<PlanReport> plan = MakePlan(m, f.topology, f.facts, j, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LE(plan->plan.memory.max_gpu_bytes, plan->plan.memory.gpu_capacity_bytes);

  absl::StatusOr<LongestSequence> l = FindLongestSequence(m, f.topology, f.facts, Job(8), o);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_GE(l->seq_len, 65536);
  EXPECT_LT(l->seq_len, l->limit);
  EXPECT_EQ(l->seq_len % 1024, 0);
  EXPECT_THAT(l->refusal, HasSubstr("does not fit"));
  j.seq_len = l->seq_len;
  EXPECT_TRUE(MakePlan(m, f.topology, f.facts, j, o).ok());
  j.seq_len = l->seq_len + 1024;
  EXPECT_FALSE(MakePlan(m, f.topology, f.facts, j, o).ok());

  // LoRA (rank 8, PEFT's default targets): no base gradients on the GPU, so longer still.
  o.lora.rank = 8;
  absl::StatusOr<LongestSequence> lora = FindLongestSequence(m, f.topology, f.facts, Job(8), o);
  ASSERT_TRUE(lora.ok()) << lora.status();
  EXPECT_GT(lora->seq_len, l->seq_len);
}

// Qwen3-32B: its whole context (40,960 tokens) at a global batch of 4 and of 8. Batch 8 was bound
// by the host's 1 TB while the store kept every microbatch's activation gradient at every backward
// boundary (31,744 tokens; now one buffer per microbatch), then by the GPUs' block workspace
// (38,912; now RoPE in place and the q/k gradients on dead buffers).
TEST(LongestSequence, Qwen32bReachesItsContext) {
  const LoadedFixture f = Rtx4090Box();
  const model::ModelDescription m = Load("qwen3-32b.json");
  PlanOptions o;
  absl::StatusOr<LongestSequence> l = FindLongestSequence(m, f.topology, f.facts, Job(4), o);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->seq_len, 40960);
  EXPECT_EQ(l->refusal, "");
  absl::StatusOr<LongestSequence> b8 = FindLongestSequence(m, f.topology, f.facts, Job(8), o);
  ASSERT_TRUE(b8.ok()) << b8.status();
  EXPECT_EQ(b8->seq_len, 40960);
  EXPECT_EQ(b8->refusal, "");
}

// The model's context bounds the search (Mistral-7B: 32,768) and says so with no refusal; a
// ceiling below it (max_seq) is taken as given; bad arguments are INVALID_ARGUMENT.
TEST(LongestSequence, StopsAtTheContextAndRejectsBadArguments) {
  const LoadedFixture f = Rtx4090Box();
  const model::ModelDescription m = Load("mistral-7b-v0.1.json");
  PlanOptions o;
  absl::StatusOr<LongestSequence> l = FindLongestSequence(m, f.topology, f.facts, Job(8), o);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->limit, 32768);
  EXPECT_EQ(l->seq_len, 32768);
  EXPECT_TRUE(l->refusal.empty());
  l = FindLongestSequence(m, f.topology, f.facts, Job(8), o, 1024, 8192);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->seq_len, 8192);
  EXPECT_EQ(FindLongestSequence(m, f.topology, f.facts, Job(8), o, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  JobShape bad = Job(8);
  bad.microbatch = 3;  // does not divide the batch: a job error, not a length
  EXPECT_EQ(FindLongestSequence(m, f.topology, f.facts, bad, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::planner
