// The job spec's adapter on its way to the workers (job_planning.h): TrainerOptionsFromSpec maps
// it to train::AdapterOptions (the family's default targets when the spec names none), and PlanJob
// refuses an adapter that does not fit the model (model::ValidateLora) with INVALID_ARGUMENT
// naming the field, before the planner runs. Tiny GPT-2 and Llama (GQA) configs from the golden
// references, on the paper testbed (8 x RTX 3090).
#include "host/run/job_planning.h"

#include <string>
#include <vector>

#include "common/model/model_config_parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::jobs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kGiB = int64_t{1} << 30;

std::string Golden(const std::string& model) {
  return testing::SourcePath("test/reference/golden/" + model);
}

class JobPlanningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = topology::MakeHwlocXmlFileSource(
                      testing::TopologyFixture("paper_testbed_2s_2sw_8x3090.xml"))->Load();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    topology_ = loaded->topology;
    facts_ = topology::Analyze(topology_);
    for (size_t g = 0; g < topology_.gpus.size(); ++g) allowed_.push_back(static_cast<int>(g));
  }

  static jobspec::JobSpec Spec(const std::string& model) {
    jobspec::JobSpec s;
    s.model_dir = Golden(model);
    s.dataset.path = "/data/train.tok";
    s.training.steps = 10;
    s.training.global_batch = 4;
    s.training.seq_len = 16;
    s.resources.gpus = 2;
    jobspec::Normalize(s);
    return s;
  }

  static model::ModelConfig Config(const std::string& model) {
    absl::StatusOr<model::ModelConfig> c = model::LoadModelConfig(Golden(model));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : model::ModelConfig{};
  }

  // PlanJob as the daemon calls it: with the config its check child read.
  absl::StatusOr<PlannedJob> Plan(const jobspec::JobSpec& spec, const model::ModelConfig& config) {
    PlanJobOptions o;
    o.host_memory_bytes = 1024 * kGiB;
    o.model_config = &config;
    return PlanJob(spec, topology_, facts_, allowed_, {}, o);
  }

  topology::Topology topology_;
  topology::TopologyFacts facts_;
  std::vector<int> allowed_;
};

TEST_F(JobPlanningTest, NoAdapterIsFullFineTuning) {
  const jobspec::JobSpec spec = Spec("gpt2");
  absl::StatusOr<train::TrainerOptions> o = TrainerOptionsFromSpec(spec, "/ckpt");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->adapter.enabled());
  EXPECT_TRUE(Plan(spec, Config("gpt2")).ok());
}

TEST_F(JobPlanningTest, TheAdapterBecomesTrainerOptionsWithTheFamilysDefaultTargets) {
  jobspec::JobSpec spec = Spec("llama_gqa");
  spec.adapter = jobspec::AdapterSpec{.type = "lora", .rank = 4, .alpha = 16, .dropout = 0.1,
                                      .init_from = "/adapters/start"};
  const model::ModelConfig llama = Config("llama_gqa");
  absl::StatusOr<train::TrainerOptions> o = TrainerOptionsFromSpec(spec, "/ckpt", &llama);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->adapter.type, "lora");
  EXPECT_EQ(o->adapter.rank, 4);
  EXPECT_EQ(o->adapter.alpha, 16);
  EXPECT_EQ(o->adapter.dropout, 0.1);
  EXPECT_THAT(o->adapter.target_modules, ElementsAre("q_proj", "v_proj"));  // PEFT's for llama
  EXPECT_EQ(o->adapter.init_dir, "/adapters/start");
  // Without the config (Submit's early check) the targets stay empty: the same default.
  o = TrainerOptionsFromSpec(spec, "/ckpt");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->adapter.target_modules, IsEmpty());

  const model::ModelConfig gpt2 = Config("gpt2");
  EXPECT_THAT(AdapterTargets(spec, gpt2), ElementsAre("c_attn"));
  spec.adapter->target_modules = {"c_fc", "c_proj"};  // as written, order included
  o = TrainerOptionsFromSpec(spec, "/ckpt", &gpt2);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_THAT(o->adapter.target_modules, ElementsAre("c_fc", "c_proj"));
}

TEST_F(JobPlanningTest, Gpt2RefusesLlamaModuleNamesNamingTheField) {
  jobspec::JobSpec spec = Spec("gpt2");
  spec.adapter = jobspec::AdapterSpec{.type = "lora", .target_modules = {"q_proj"}};
  absl::StatusOr<PlannedJob> planned = Plan(spec, Config("gpt2"));
  ASSERT_FALSE(planned.ok());
  EXPECT_EQ(planned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(planned.status().message(),
              HasSubstr("adapter.target_modules[0]: \"q_proj\" is not a linear module of gpt2 "
                        "models (they have c_attn, c_proj, c_fc)"));
  spec.adapter->target_modules = {"c_attn", "c_proj", "c_fc"};
  EXPECT_TRUE(Plan(spec, Config("gpt2")).ok());
  spec.adapter->target_modules.clear();  // the default, c_attn
  EXPECT_TRUE(Plan(spec, Config("gpt2")).ok());
}

TEST_F(JobPlanningTest, RankAboveTheSmallestAdaptedDimensionIsRefused) {
  // llama_gqa: hidden 32, 2 KV heads of 8, so v_proj is 32 -> 16; the default targets include it.
  jobspec::JobSpec spec = Spec("llama_gqa");
  spec.adapter = jobspec::AdapterSpec{.type = "lora", .rank = 17};
  absl::StatusOr<PlannedJob> planned = Plan(spec, Config("llama_gqa"));
  ASSERT_FALSE(planned.ok());
  EXPECT_EQ(planned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(planned.status().message(),
              HasSubstr("adapter.rank: must be in [1, 16] (the smallest adapted dimension, "
                        "v_proj's) (got 17)"));
  spec.adapter->rank = 16;
  EXPECT_TRUE(Plan(spec, Config("llama_gqa")).ok());
  spec.adapter->rank = 17;
  spec.adapter->target_modules = {"q_proj", "o_proj"};  // 32 x 32 both
  EXPECT_TRUE(Plan(spec, Config("llama_gqa")).ok());
}

// QLoRA: an NF4 base reaches the trainer options; GPT-2's Conv1D weights are refused, naming the
// field and the weight.
TEST_F(JobPlanningTest, Nf4BaseReachesTheTrainerAndGpt2IsRefused) {
  jobspec::JobSpec spec = Spec("llama_gqa");
  spec.adapter = jobspec::AdapterSpec{.type = "lora", .rank = 4, .base_quantization = "nf4"};
  const model::ModelConfig llama = Config("llama_gqa");
  absl::StatusOr<train::TrainerOptions> o = TrainerOptionsFromSpec(spec, "/ckpt", &llama);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->adapter.base_nf4());
  EXPECT_TRUE(Plan(spec, llama).ok());
  jobspec::JobSpec gpt2 = Spec("gpt2");
  gpt2.adapter = jobspec::AdapterSpec{.type = "lora", .base_quantization = "nf4"};
  absl::StatusOr<PlannedJob> planned = Plan(gpt2, Config("gpt2"));
  ASSERT_FALSE(planned.ok());
  EXPECT_EQ(planned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(planned.status().message(),
              HasSubstr("adapter.base_quantization: an NF4 base needs nn.Linear weights"));
  EXPECT_THAT(planned.status().message(), HasSubstr("Conv1D"));
}

// `mobius run` plans before it has any check result: PlanJob reads config.json itself.
TEST_F(JobPlanningTest, ReadingTheConfigItselfChecksTheAdapterToo) {
  jobspec::JobSpec spec = Spec("gpt2");
  spec.adapter = jobspec::AdapterSpec{.type = "lora", .target_modules = {"c_attn", "k_proj"}};
  PlanJobOptions o;
  o.host_memory_bytes = 1024 * kGiB;
  absl::StatusOr<PlannedJob> planned = PlanJob(spec, topology_, facts_, allowed_, {}, o);
  ASSERT_FALSE(planned.ok());
  EXPECT_EQ(planned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(planned.status().message(), HasSubstr("adapter.target_modules[1]: \"k_proj\""));
}

}  // namespace
}  // namespace mobius::jobs
