// RunConfig's JSON (what the launcher writes and every worker reads): every field survives the
// round trip; malformed input names the field.
#include "common/run/run_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::runtime {
namespace {

using ::testing::HasSubstr;

TEST(RunConfigTest, EveryTrainingFieldRoundTrips) {
  RunConfig c;
  c.job_id = "j-000042";
  train::TrainerOptions& t = c.training;
  t.model_dir = "/m";
  t.data_path = "/d.tok";
  t.data_raw_bytes = 4;
  t.steps = 7;
  t.batch = 8;
  t.microbatch = 2;
  t.seq = 64;
  t.lr = 1e-3;
  t.min_lr = 1e-5;
  t.warmup = 3;
  t.schedule = "constant";
  t.weight_decay = 0.1;
  t.grad_clip = 0.5;
  t.beta1 = 0.8;
  t.beta2 = 0.99;
  t.eps = 1e-6;
  t.seed = 12345678901234ull;
  t.eval_every = 5;
  t.eval_fraction = 0.2;
  t.checkpoint_dir = "/ckpt";
  t.checkpoint_every = 4;
  t.resume = true;
  t.device_memory_bytes = 1ull << 33;
  t.threads = 3;
  t.optimizer_staleness = 1;
  t.adapter = {.type = "lora", .rank = 4, .alpha = 8, .dropout = 0.1,
               .target_modules = {"q_proj", "v_proj"}, .init_dir = "/a"};
  c.stages = {{0, 2}, {2, 5}};
  c.stage_rank = {0, 1};
  c.num_workers = 2;
  c.store_path = "/dev/shm/x";
  c.links = {{"gpu0", 1e9}, {"uplink", 2e9}};
  c.rank_links = {{0, 1}, {1}};
  c.link_scale = 0.5;
  c.rank_gpu = {4, 6};
  c.rank_cpus = {{0, 1, 2}, {8, 9}};
  c.backend = "cuda";
  c.rank_device = {1, 0};
  c.transport = "nccl";

  absl::StatusOr<RunConfig> back = RunConfigFromJson(RunConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  const train::TrainerOptions& b = back->training;
  EXPECT_EQ(b.model_dir, t.model_dir);
  EXPECT_EQ(b.data_path, t.data_path);
  EXPECT_EQ(b.data_raw_bytes, t.data_raw_bytes);
  EXPECT_EQ(b.steps, t.steps);
  EXPECT_EQ(b.optimizer_staleness, 1);
  EXPECT_EQ(b.adapter.type, "lora");
  EXPECT_EQ(b.adapter.rank, 4);
  EXPECT_EQ(b.adapter.alpha, 8);
  EXPECT_EQ(b.adapter.dropout, 0.1);
  EXPECT_EQ(b.adapter.target_modules, t.adapter.target_modules);
  EXPECT_EQ(b.adapter.init_dir, "/a");
  EXPECT_EQ(b.batch, t.batch);
  EXPECT_EQ(b.microbatch, t.microbatch);
  EXPECT_EQ(b.seq, t.seq);
  EXPECT_EQ(b.lr, t.lr);
  EXPECT_EQ(b.min_lr, t.min_lr);
  EXPECT_EQ(b.warmup, t.warmup);
  EXPECT_EQ(b.schedule, t.schedule);
  EXPECT_EQ(b.weight_decay, t.weight_decay);
  EXPECT_EQ(b.grad_clip, t.grad_clip);
  EXPECT_EQ(b.beta1, t.beta1);
  EXPECT_EQ(b.beta2, t.beta2);
  EXPECT_EQ(b.eps, t.eps);
  EXPECT_EQ(b.seed, t.seed);
  EXPECT_EQ(b.eval_every, t.eval_every);
  EXPECT_EQ(b.eval_fraction, t.eval_fraction);
  EXPECT_EQ(b.checkpoint_dir, t.checkpoint_dir);
  EXPECT_EQ(b.checkpoint_every, t.checkpoint_every);
  EXPECT_EQ(b.resume, t.resume);
  EXPECT_EQ(b.device_memory_bytes, t.device_memory_bytes);
  EXPECT_EQ(b.threads, t.threads);
  EXPECT_EQ(back->job_id, c.job_id);
  ASSERT_EQ(back->stages.size(), 2u);
  EXPECT_EQ(back->stages[1].begin, 2);
  EXPECT_EQ(back->stages[1].end, 5);
  EXPECT_EQ(back->stage_rank, c.stage_rank);
  EXPECT_EQ(back->num_workers, c.num_workers);
  EXPECT_EQ(back->store_path, c.store_path);
  ASSERT_EQ(back->links.size(), 2u);
  EXPECT_EQ(back->links[1].name, "uplink");
  EXPECT_EQ(back->links[1].bytes_per_second, 2e9);
  EXPECT_EQ(back->rank_links, c.rank_links);
  EXPECT_EQ(back->link_scale, c.link_scale);
  EXPECT_EQ(back->rank_gpu, c.rank_gpu);
  EXPECT_EQ(back->rank_cpus, c.rank_cpus);
  EXPECT_EQ(back->backend, "cuda");
  EXPECT_EQ(back->rank_device, c.rank_device);
  EXPECT_EQ(back->transport, "nccl");
}

TEST(RunConfigTest, BackendAndTransportValidationNamesTheField) {
  RunConfig c;
  c.num_workers = 2;
  c.store_path = "/dev/shm/x";
  c.stages = {{0, 3}, {3, 6}};
  c.stage_rank = {0, 1};
  EXPECT_TRUE(ValidateRunConfig(c, 6).ok());  // defaults: auto, auto
  c.backend = "tpu";
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("backend must be auto, cpu or cuda"));
  c.backend = "cuda";
  c.transport = "infiniband";
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("transport must be auto, host, nccl or emulated"));
  c.transport = "nccl";
  c.rank_device = {0};
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("rank_device has 1 entries for 2"));
  c.rank_device = {0, -1};
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("rank_device[1] = -1"));
  c.rank_device = {1, 0};
  EXPECT_TRUE(ValidateRunConfig(c, 6).ok());
  c.transport = "emulated";
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("CPU backend's stand-in"));
}

TEST(RunConfigTest, DgradChannelsFollowTheBackwardRanks) {
  RunConfig c;
  c.num_workers = 3;
  c.stages = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}};
  c.stage_rank = {0, 1, 2, 0, 1};  // gradients flow 1->0, 0->2, 2->1, 1->0
  EXPECT_EQ(BackwardRank(c, 3), 0);
  EXPECT_EQ(DgradChannels(c), (std::vector<PeerChannel>{{0, 2}, {1, 0}, {2, 1}}));
  c.stage_rank = {0, 0, 1, 1, 1};  // same-rank boundaries need no channel
  EXPECT_EQ(DgradChannels(c), (std::vector<PeerChannel>{{1, 0}}));
  RunConfig rr;
  rr.num_workers = 2;
  rr.schedule = runtime::Schedule::kRoundRobin;
  rr.forward_stages = {{0, 3}, {3, 6}};
  rr.backward_stages = {{0, 2}, {2, 4}, {4, 6}};
  rr.pass_rank = {0, 1, 0, 1, 0};  // passes: F0 F1 B2 B1 B0
  EXPECT_EQ(BackwardRank(rr, 2), 0);
  EXPECT_EQ(BackwardRank(rr, 1), 1);
  EXPECT_EQ(BackwardRank(rr, 0), 0);
  EXPECT_EQ(DgradChannels(rr), (std::vector<PeerChannel>{{0, 1}, {1, 0}}));
}

TEST(RunConfigTest, RoundRobinScheduleRoundTrips) {
  RunConfig c;
  c.num_workers = 2;
  c.schedule = runtime::Schedule::kRoundRobin;
  c.store_path = "/dev/shm/x";
  c.forward_stages = {{0, 3}, {3, 6}};
  c.backward_stages = {{0, 2}, {2, 4}, {4, 6}};
  c.pass_rank = {0, 1, 0, 1, 0};
  absl::StatusOr<RunConfig> back = RunConfigFromJson(RunConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->schedule, Schedule::kRoundRobin);
  ASSERT_EQ(back->forward_stages.size(), 2u);
  EXPECT_EQ(back->forward_stages[1].begin, 3);
  EXPECT_EQ(back->forward_stages[1].end, 6);
  ASSERT_EQ(back->backward_stages.size(), 3u);
  EXPECT_EQ(back->backward_stages[1].begin, 2);
  EXPECT_EQ(back->backward_stages[1].end, 4);
  EXPECT_EQ(back->pass_rank, c.pass_rank);
  EXPECT_EQ(back->dispatch, "static");
  EXPECT_FALSE(PoolDispatch(*back));
  EXPECT_TRUE(back->stages.empty());
  EXPECT_TRUE(ValidateRunConfig(*back, 6).ok()) << ValidateRunConfig(*back, 6);

  // The pass stream: forward 0, 1, then backward 2, 1, 0; pass j on rank j mod 2.
  EXPECT_EQ(PassAt(c, 0), (Pass{false, 0}));
  EXPECT_EQ(PassAt(c, 2), (Pass{true, 2}));
  EXPECT_EQ(PassAt(c, 4), (Pass{true, 0}));
  EXPECT_EQ(PassesOfRank(c, 0), (std::vector<Pass>{{false, 0}, {true, 2}, {true, 0}}));
  EXPECT_EQ(PassesOfRank(c, 1), (std::vector<Pass>{{false, 1}, {true, 1}}));
  EXPECT_EQ(CheckpointUnits(c), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(ForwardStages(c).size(), 2u);
  EXPECT_EQ(BackwardStages(c).size(), 3u);
}

TEST(RunConfigTest, MobiusPassesAndCheckpoints) {
  RunConfig c;
  c.num_workers = 2;
  c.store_path = "/dev/shm/x";
  c.stages = {{0, 1}, {1, 3}, {3, 4}};
  c.stage_rank = {0, 1, 0};
  ASSERT_TRUE(ValidateRunConfig(c, 4).ok()) << ValidateRunConfig(c, 4);
  EXPECT_EQ(PassesOfRank(c, 0),
            (std::vector<Pass>{{false, 0}, {false, 2}, {true, 2}, {true, 0}}));
  EXPECT_EQ(CheckpointUnits(c), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(&ForwardStages(c), &BackwardStages(c));
}

TEST(RunConfigTest, RoundRobinValidationNamesTheField) {
  RunConfig c;
  c.num_workers = 2;
  c.schedule = runtime::Schedule::kRoundRobin;
  c.store_path = "/dev/shm/x";
  c.forward_stages = {{0, 3}, {3, 6}};
  c.backward_stages = {{0, 2}, {2, 5}};  // stops at 5 of 6
  c.pass_rank = {0, 1, 0, 1};
  absl::Status s = ValidateRunConfig(c, 6);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("backward_stages cover units [0, 5)"));

  c.backward_stages = {{0, 2}, {3, 6}};  // gap
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("backward_stages[1] = [3, 6)"));

  c.backward_stages = {{0, 2}, {2, 6}};
  c.pass_rank = {0, 0, 0, 0};
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("rank 1 runs no pass"));
  c.pass_rank = {0, 1, 0};
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("pass_rank has 3 entries for 4"));
  c.pass_rank = {0, 1, 2, 1};
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("pass_rank[2] = 2"));
  c.pass_rank = {0, 1, 0, 1};
  EXPECT_TRUE(ValidateRunConfig(c, 6).ok());

  c.stages = {{0, 6}};  // roundrobin takes its own fields only
  c.stage_rank = {0};
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("must be empty"));
  c.schedule = runtime::Schedule::kMobius;  // and mobius does not take them
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("roundrobin only"));
  c.schedule = runtime::Schedule::kZeroOffload;
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("planner baseline"));
}

// The static rotation carries over steps (run_config.h, PassRank): with 5 passes on 2 workers,
// step 2 starts on worker 1, so over two steps each worker runs 5 passes.
TEST(RunConfigTest, StaticRotationCarriesOverSteps) {
  RunConfig run;
  run.num_workers = 2;
  run.schedule = Schedule::kRoundRobin;
  run.forward_stages = {{0, 3}, {3, 6}};
  run.backward_stages = {{0, 2}, {2, 4}, {4, 6}};
  run.pass_rank = {0, 1, 0, 1, 0};
  EXPECT_TRUE(RankOfPassVaries(run));
  EXPECT_EQ(PassesOfRank(run, 0, 1).size(), 3u);
  EXPECT_EQ(PassesOfRank(run, 0, 2).size(), 2u);
  EXPECT_EQ(PassRank(run, 0, 2), 1);
  EXPECT_EQ(PassRank(run, 0, 3), 0);
  EXPECT_EQ(BackwardRank(run, 0, 1), 0);  // pass 4
  EXPECT_EQ(BackwardRank(run, 0, 2), 1);
  // Gradient channels: both directions, since the backward stages swap ranks every step.
  EXPECT_EQ(DgradChannels(run).size(), 2u);
}

TEST(RunConfigTest, PoolDispatchRoundTripsAndIsRefusedWhereItCannotWork) {
  RunConfig c;
  c.num_workers = 2;
  c.schedule = runtime::Schedule::kRoundRobin;
  c.store_path = "/dev/shm/x";
  c.forward_stages = {{0, 3}, {3, 6}};
  c.backward_stages = {{0, 2}, {2, 4}, {4, 6}};
  c.pass_rank = {0, 1, 0, 1, 0};
  c.dispatch = "pool";
  absl::StatusOr<RunConfig> back = RunConfigFromJson(RunConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dispatch, "pool");
  EXPECT_TRUE(PoolDispatch(*back));
  EXPECT_TRUE(ValidateRunConfig(*back, 6).ok()) << ValidateRunConfig(*back, 6);
  // Which rank runs a pass is decided at run time: no fixed gradient channels.
  EXPECT_TRUE(DgradChannels(c).empty());
  c.dispatch = "static";
  EXPECT_FALSE(DgradChannels(c).empty());

  c.dispatch = "pool";
  c.transport = "nccl";
  EXPECT_THAT(ValidateRunConfig(c, 6).message(), HasSubstr("transport must be host or auto"));
  c.transport = "auto";
  c.dispatch = "next-free";
  EXPECT_THAT(ValidateRunConfig(c, 6).message(),
              HasSubstr("dispatch must be static or pool (got \"next-free\")"));
  RunConfig m;
  m.num_workers = 1;
  m.store_path = "/dev/shm/x";
  m.stages = {{0, 6}};
  m.stage_rank = {0};
  m.dispatch = "pool";
  EXPECT_THAT(ValidateRunConfig(m, 6).message(), HasSubstr("for schedule roundrobin only"));
  m.dispatch = "static";
  m.schedule = runtime::Schedule::kResident;
  m.training.optimizer_staleness = 1;
  EXPECT_THAT(ValidateRunConfig(m, 6).message(),
              HasSubstr("training.optimizer_staleness 1 is for the host optimizer"));
}

TEST(RunConfigTest, TheScheduleTravelsByNameAndUnknownNamesAreRefused) {
  RunConfig c;
  c.schedule = runtime::Schedule::kResident;
  const std::string text = RunConfigToJson(c);
  EXPECT_THAT(text, HasSubstr("\"schedule\": \"resident\""));
  absl::StatusOr<RunConfig> back = RunConfigFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->schedule, runtime::Schedule::kResident);
  absl::StatusOr<RunConfig> bad =
      RunConfigFromJson(R"({"schedule": "pipedream", "training": {}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("field schedule: unknown schedule 'pipedream'"));
}

TEST(ScheduleTest, NamesRoundTripAndTraitsSayWhatDiffers) {
  for (runtime::Schedule s : runtime::kAllSchedules) {
    absl::StatusOr<runtime::Schedule> parsed = runtime::ParseSchedule(runtime::ScheduleName(s));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(runtime::ParseSchedule("Mobius").status().code(),
            absl::StatusCode::kInvalidArgument);
  using runtime::Traits;
  EXPECT_TRUE(Traits(runtime::Schedule::kRoundRobin).separate_pass_partitions);
  EXPECT_FALSE(Traits(runtime::Schedule::kMobius).separate_pass_partitions);
  EXPECT_TRUE(Traits(runtime::Schedule::kResident).weights_resident);
  EXPECT_FALSE(Traits(runtime::Schedule::kResident).takes_stage_count);
  EXPECT_FALSE(Traits(runtime::Schedule::kZeroOffload).runs_on_pipeline_runtime);
  EXPECT_TRUE(Traits(runtime::Schedule::kMobius).runs_on_pipeline_runtime);
  EXPECT_FALSE(Traits(runtime::Schedule::kResident).optimizer_on_host);
  EXPECT_TRUE(Traits(runtime::Schedule::kRoundRobin).optimizer_on_host);
  EXPECT_TRUE(Traits(runtime::Schedule::kRoundRobin).passes_dispatchable);
  EXPECT_FALSE(Traits(runtime::Schedule::kMobius).passes_dispatchable);
  EXPECT_FALSE(Traits(runtime::Schedule::kResident).trains_adapters);
  EXPECT_TRUE(Traits(runtime::Schedule::kMobius).trains_adapters);
  // Names from specs, plan options and flags: a known name's traits, none for anything else.
  ASSERT_NE(runtime::TraitsOfName("roundrobin"), nullptr);
  EXPECT_EQ(runtime::TraitsOfName("roundrobin"), &Traits(runtime::Schedule::kRoundRobin));
  EXPECT_EQ(runtime::TraitsOfName("auto"), nullptr);
  EXPECT_EQ(runtime::TraitsOfName(""), nullptr);
}

TEST(RunConfigTest, WrongTypesNameTheField) {
  absl::StatusOr<RunConfig> c = RunConfigFromJson(R"({"training": {"eval_every": "often"}})");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("training.eval_every"));
  EXPECT_FALSE(RunConfigFromJson("[1, 2]").ok());
  EXPECT_FALSE(RunConfigFromJson("{").ok());
}

}  // namespace
}  // namespace mobius::runtime
