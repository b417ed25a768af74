// SetUpRun, the one path from a spec to a run config (daemon and `mobius run`), on the paper
// testbed (8 x RTX 3090 behind 2 switches per socket) with Llama-2-7B's config: the granted GPUs
// are the run's, defaults come from the spec's normalisation, the workers' device memory cap is the
// planner's, the newest complete checkpoint is resumed, and PlanJob's fit_to_node re-plans a job
// for fewer GPUs than it asks for.
#include "host/run/run_setup.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "common/jobspec/json.h"
#include "common/jobspec/spec.h"
#include "common/run/checkpoint_dirs.h"
#include "common/run/checkpoint_owner.h"
#include "gtest/gtest.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::jobs {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kGiB = int64_t{1} << 30;

class RunSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = topology::MakeHwlocXmlFileSource(
                      testing::TopologyFixture("paper_testbed_2s_2sw_8x3090.xml"))->Load();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    topology_ = loaded->topology;
    facts_ = topology::Analyze(topology_);
    dir_ = fs::temp_directory_path() /
           ("run-setup-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
    fs::copy_file(testing::SourcePath("test/data/models/llama-2-7b.json"),
                  dir_ / "model/config.json");
    spec_.name = "setup";
    spec_.model_dir = (dir_ / "model").string();
    spec_.dataset.path = (dir_ / "data.tok").string();
    spec_.training.steps = 10;
    spec_.training.global_batch = 8;
    spec_.training.seq_len = 512;  // microbatch left 0: Normalize makes it the global batch
    spec_.resources.gpus = 4;
    spec_.checkpoint.dir = (dir_ / "ckpt").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunSetupOptions Options(std::vector<int> gpus) {
    RunSetupOptions o;
    o.topology = &topology_;
    o.facts = &facts_;
    for (size_t g = 0; g < topology_.gpus.size(); ++g) o.allowed.push_back(static_cast<int>(g));
    o.gpus = std::move(gpus);
    o.plan.host_memory_bytes = 4096 * kGiB;
    o.run_name = "j-000042";
    o.inspect = [this](const inspect::InspectRequest& r) {
      ++checks_;
      if (!r.run_config_json.empty()) ++launch_checks_;
      return ConfigOnlyChecks(r);
    };
    return o;
  }

  // The check child's verdict on a config-only model (the real checks refuse it: no weights):
  // config.json's text, the owner rule and the job's newest checkpoint, as inspection.h has them.
  static absl::StatusOr<inspect::InspectResult> ConfigOnlyChecks(const inspect::InspectRequest& r) {
    inspect::InspectResult out;
    absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(r.spec_json);
    if (!spec.ok()) return spec.status();
    std::ifstream in(spec->model_dir + "/config.json");
    std::stringstream text;
    text << in.rdbuf();
    out.model_config_json = text.str();
    out.status = checkpoint::CheckCheckpointOwner(r.checkpoint_dir, r.job_id);
    if (auto latest = checkpoint::LatestCheckpoint(r.checkpoint_dir); latest.ok()) {
      out.latest_checkpoint = *latest;
    }
    return out;
  }

  int checks_ = 0, launch_checks_ = 0;

  topology::Topology topology_;
  topology::TopologyFacts facts_;
  fs::path dir_;
  jobspec::JobSpec spec_;
};

TEST_F(RunSetupTest, TheGrantedGpusAreTheRunsAndDefaultsComeFromTheSpec) {
  absl::StatusOr<RunSetup> s = SetUpRun(spec_, Options({4, 5, 6, 7}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->run.job_id, "j-000042");
  std::set<int> used(s->run.rank_gpu.begin(), s->run.rank_gpu.end());
  for (int g : used) EXPECT_GE(g, 4) << "rank on GPU " << g << ", not one of those granted";
  EXPECT_EQ(s->spec.training.microbatch, 8);  // normalised once
  EXPECT_EQ(s->run.training.microbatch, 8);
  EXPECT_EQ(s->planned.report.plan.shape.microbatch_size, 8);
  EXPECT_EQ(s->run.training.checkpoint_dir, spec_.checkpoint.dir);
  EXPECT_FALSE(s->run.training.resume);
  EXPECT_TRUE(s->resume_from.empty());
  EXPECT_GT(s->host_store_bytes, 7'000'000'000LL * 12);  // fp32 master + 2 moments, at least
  EXPECT_FALSE(s->dataset.has_value());
}

TEST_F(RunSetupTest, WorkersGetThePlannersDeviceMemoryCap) {
  // Emulated GPUs (CPU backend): the plan's per-GPU capacity, not all of host RAM.
  RunSetupOptions o = Options({0, 1, 2, 3});
  o.plan.devices_in_host_memory = true;
  absl::StatusOr<RunSetup> s = SetUpRun(spec_, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const int64_t capacity = s->planned.report.plan.memory.gpu_capacity_bytes;
  EXPECT_GT(capacity, 20 * kGiB);  // an RTX 3090's 24 GiB
  EXPECT_EQ(s->run.training.device_memory_bytes, static_cast<uint64_t>(capacity));
  // Real GPUs without a cap: 0 (the CUDA backend takes what is free less its reserve).
  o.plan.devices_in_host_memory = false;
  s = SetUpRun(spec_, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->run.training.device_memory_bytes, 0u);
  // A cap below the GPU's memory reaches planner and workers alike; one above is clipped.
  spec_.resources.device_memory_bytes = 20 * kGiB;
  s = SetUpRun(spec_, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->planned.report.plan.memory.gpu_capacity_bytes, 20 * kGiB);
  EXPECT_EQ(s->run.training.device_memory_bytes, static_cast<uint64_t>(20 * kGiB));
  spec_.resources.device_memory_bytes = 100 * kGiB;
  s = SetUpRun(spec_, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->run.training.device_memory_bytes,
            static_cast<uint64_t>(s->planned.report.plan.memory.gpu_capacity_bytes));
  EXPECT_LT(s->run.training.device_memory_bytes, static_cast<uint64_t>(100 * kGiB));
}

TEST_F(RunSetupTest, ResumesFromTheNewestCompleteCheckpointOnlyWhenAsked) {
  for (const char* name : {"checkpoint-00000002", "checkpoint-00000005", "checkpoint-00000009"}) {
    fs::create_directories(dir_ / "ckpt" / name);
  }
  std::ofstream(dir_ / "ckpt/checkpoint-00000002/DONE") << "{}";
  std::ofstream(dir_ / "ckpt/checkpoint-00000005/DONE") << "{}";  // 9 has no DONE: incomplete
  absl::StatusOr<RunSetup> s = SetUpRun(spec_, Options({0, 1, 2, 3}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->resume_from, (dir_ / "ckpt/checkpoint-00000005").string());
  EXPECT_TRUE(s->run.training.resume);
  RunSetupOptions fresh = Options({0, 1, 2, 3});
  fresh.resume = false;
  s = SetUpRun(spec_, fresh);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->resume_from.empty());
  EXPECT_FALSE(s->run.training.resume);
}

// The file checks run before anything else, as the job's user in the daemon (the hook): their
// error is the call's, unchanged; on success they ran twice, the second time on the run config.
TEST_F(RunSetupTest, TheFileChecksComeFirstAndTheirErrorIsTheCalls) {
  RunSetupOptions o = Options({0, 1, 2, 3});
  absl::StatusOr<RunSetup> s = SetUpRun(spec_, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(checks_, 2);
  EXPECT_EQ(launch_checks_, 1);
  EXPECT_TRUE(s->validated);
  EXPECT_EQ(s->model_config.vocab_size, 32000);
  o.inspect = [](const inspect::InspectRequest&) -> absl::StatusOr<inspect::InspectResult> {
    inspect::InspectResult r;
    r.status = absl::PermissionDeniedError("model_dir: /data/bob/model/config.json: Permission "
                                           "denied");
    return r;
  };
  s = SetUpRun(spec_, o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kPermissionDenied) << s.status();
  EXPECT_NE(s.status().message().find("/data/bob/model"), std::string::npos) << s.status();
}

// Another job's checkpoint directory is neither resumed from nor written: the owner record.
TEST_F(RunSetupTest, AnotherJobsCheckpointDirectoryIsRefused) {
  ASSERT_TRUE(checkpoint::ClaimCheckpointDir((dir_ / "ckpt").string(), "j-000007").ok());
  fs::create_directories(dir_ / "ckpt/checkpoint-00000003");
  std::ofstream(dir_ / "ckpt/checkpoint-00000003/DONE") << "{}";
  absl::StatusOr<RunSetup> s = SetUpRun(spec_, Options({0, 1, 2, 3}));
  ASSERT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_NE(s.status().message().find("j-000007"), std::string::npos) << s.status();
}

TEST_F(RunSetupTest, BadCallsAndPlannerErrorsAreReported) {
  absl::StatusOr<RunSetup> s = SetUpRun(spec_, Options({}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  RunSetupOptions none = Options({0});
  none.topology = nullptr;
  EXPECT_EQ(SetUpRun(spec_, none).status().code(), absl::StatusCode::kInvalidArgument);
  // Host RAM too small for the model's state: the planner's refusal with its numbers.
  RunSetupOptions small = Options({0, 1, 2, 3});
  small.plan.host_memory_bytes = 8 * kGiB;
  s = SetUpRun(spec_, small);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
}

// A job with an adapter: checked against the model first (INVALID_ARGUMENT naming the field,
// before the launch checks); a valid one reaches the workers' trainer options, the family's PEFT
// targets filled in, and sizes the store for the frozen base (bf16 only) and the adapters.
TEST_F(RunSetupTest, AnAdapterIsCheckedAndReachesTheRun) {
  absl::StatusOr<RunSetup> full = SetUpRun(spec_, Options({0, 1, 2, 3}));
  ASSERT_TRUE(full.ok()) << full.status();
  spec_.adapter = jobspec::AdapterSpec{.type = "lora", .target_modules = {"q_proj", "c_attn"}};
  absl::StatusOr<RunSetup> s = SetUpRun(spec_, Options({0, 1, 2, 3}));
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_NE(s.status().message().find("adapter.target_modules[1]: \"c_attn\" is not a linear "
                                      "module of llama models"),
            std::string::npos)
      << s.status();
  EXPECT_EQ(launch_checks_, 1);  // the full job's only
  spec_.adapter->target_modules.clear();
  s = SetUpRun(spec_, Options({0, 1, 2, 3}));
  ASSERT_TRUE(s.ok()) << s.status();
  const train::AdapterOptions& a = s->run.training.adapter;
  EXPECT_EQ(a.type, "lora");
  EXPECT_EQ(a.rank, 8);
  EXPECT_EQ(a.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_GT(s->host_store_bytes, 0);
  EXPECT_LT(s->host_store_bytes, full->host_store_bytes / 4);  // 2 of 18+ bytes per parameter
}

TEST_F(RunSetupTest, FitToNodeReplansForTheGpusTheNodeHas) {
  jobspec::Normalize(spec_);
  spec_.resources.gpus = 8;
  const std::vector<int> two = {0, 1};
  PlanJobOptions po;
  po.host_memory_bytes = 4096 * kGiB;
  absl::StatusOr<PlannedJob> refused = PlanJob(spec_, topology_, facts_, two, {}, po);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("asks for 8 GPUs, this node has 2"),
            std::string::npos)
      << refused.status();
  po.fit_to_node = true;
  absl::StatusOr<PlannedJob> fitted = PlanJob(spec_, topology_, facts_, two, {}, po);
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  EXPECT_EQ(fitted->request.gpus, 2);
  std::set<int> used(fitted->report.plan.mapping.gpu_order.begin(),
                     fitted->report.plan.mapping.gpu_order.end());
  EXPECT_EQ(used, std::set<int>({0, 1}));
}

}  // namespace
}  // namespace mobius::jobs
