// BuildRunConfig on the paper testbed: the plan's stages and mapping become ranks, and each rank's
// emulated path is its GPU's own link plus its switch's shared uplink, at the simulator's bandwidths
// times the scale; cross mapping puts consecutive stages behind different uplinks.
#include "host/launch/run_builder.h"

#include <algorithm>
#include <set>

#include "common/model/model_config_parse.h"
#include "gtest/gtest.h"
#include "host/planner/api/make_plan.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::launch {
namespace {

struct Built {
  planner::PlanReport report;
  runtime::RunConfig run;
};

Built Build(const std::string& mapper, double scale, const std::string& schedule = "mobius") {
  auto loaded = topology::MakeHwlocXmlFileSource(
                    testing::TopologyFixture("paper_testbed_2s_2sw_8x3090.xml"))->Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);
  auto config = model::LoadModelConfig(testing::SourcePath("test/data/models/llama-2-7b.json"));
  EXPECT_TRUE(config.ok()) << config.status();
  auto desc = model::DescribeModel(*config);
  planner::JobShape job;
  job.global_batch = 8;
  job.microbatch = 1;
  job.seq_len = 512;
  planner::PlanOptions po;
  po.mapper = mapper;
  po.schedule = *runtime::ParseSchedule(schedule);
  po.compare = false;
  auto report = planner::MakePlan(*desc, loaded->topology, facts, job, po);
  EXPECT_TRUE(report.ok()) << report.status();
  train::TrainerOptions t;
  t.batch = 8;
  t.seq = 512;
  auto run = BuildRunConfig("j-1", t, report->plan, loaded->topology, facts,
                            {.enabled = true, .link_scale = scale});
  EXPECT_TRUE(run.ok()) << run.status();
  return {*report, *run};
}

TEST(RunBuilder, PlanBecomesRanksAndEmulatedLinks) {
  Built b = Build("cross", 0.5);
  const runtime::RunConfig& run = b.run;
  EXPECT_EQ(run.num_workers, 8);
  ASSERT_EQ(run.stages.size(), static_cast<size_t>(b.report.plan.num_stages()));
  EXPECT_EQ(run.stages.front().begin, 0);
  EXPECT_EQ(run.stages.back().end, 34);  // 32 blocks + embedding + head
  for (size_t s = 0; s < run.stages.size(); ++s) {
    EXPECT_EQ(run.rank_gpu[run.stage_rank[s]], b.report.plan.GpuOfStage(static_cast<int>(s)));
  }
  EXPECT_EQ(run.training.microbatch, 1);
  // 8 GPU links + 2 switch uplinks; every rank crosses its uplink, then its own link (host ->
  // GPU order).
  EXPECT_EQ(run.links.size(), 10u);
  ASSERT_EQ(run.rank_links.size(), 8u);
  for (const auto& path : run.rank_links) EXPECT_EQ(path.size(), 2u);
  // PCIe 3.0 x16: 15.75 GB/s x 0.8 DMA efficiency x 0.5 scale.
  EXPECT_NEAR(run.links[run.rank_links[0][0]].bytes_per_second, 15.75e9 * 0.8 * 0.5, 0.1e9);
  runtime::RunConfig with_store = run;
  with_store.store_path = "/dev/shm/x";
  EXPECT_TRUE(ValidateRunConfig(with_store, 34).ok()) << ValidateRunConfig(with_store, 34);
  // Cross mapping: consecutive stages sit behind different uplinks.
  const int uplink0 = run.rank_links[run.stage_rank[0]][0];
  const int uplink1 = run.rank_links[run.stage_rank[1]][0];
  EXPECT_NE(uplink0, uplink1);
}

TEST(RunBuilder, EveryRankGetsItsGpusNumaNodeCpus) {
  Built b = Build("cross", 1.0);
  auto loaded = topology::MakeHwlocXmlFileSource(
                    testing::TopologyFixture("paper_testbed_2s_2sw_8x3090.xml"))->Load();
  ASSERT_TRUE(loaded.ok());
  const topology::Topology& t = loaded->topology;
  ASSERT_EQ(b.run.rank_cpus.size(), 8u);
  std::set<std::vector<int>> distinct;
  for (int rank = 0; rank < 8; ++rank) {
    const int node = t.pci[t.gpus[b.run.rank_gpu[rank]].pci].numa_node;
    ASSERT_GE(node, 0);
    const auto it = std::find_if(t.numa_nodes.begin(), t.numa_nodes.end(),
                                 [&](const topology::NumaNode& n) { return n.os_index == node; });
    ASSERT_NE(it, t.numa_nodes.end());
    EXPECT_FALSE(b.run.rank_cpus[rank].empty());
    EXPECT_EQ(b.run.rank_cpus[rank], it->cpus) << "rank " << rank;
    distinct.insert(b.run.rank_cpus[rank]);
  }
  EXPECT_EQ(distinct.size(), 2u);  // two sockets, one node each
}

TEST(RunBuilder, SequentialMappingSharesAnUplinkBetweenNeighbours) {
  Built b = Build("sequential", 1.0);
  const int uplink0 = b.run.rank_links[b.run.stage_rank[0]][0];
  const int uplink1 = b.run.rank_links[b.run.stage_rank[1]][0];
  EXPECT_EQ(uplink0, uplink1);
}

TEST(RunBuilder, RoundRobinPlanBecomesPassesOverTheRanks) {
  Built b = Build("cross", 1.0, "roundrobin");
  const planner::Plan& plan = b.report.plan;
  ASSERT_TRUE(plan.round_robin.has_value());
  const runtime::RunConfig& run = b.run;
  EXPECT_EQ(run.schedule, runtime::Schedule::kRoundRobin);
  EXPECT_TRUE(run.stages.empty());
  EXPECT_TRUE(run.stage_rank.empty());
  ASSERT_EQ(run.forward_stages.size(), static_cast<size_t>(plan.round_robin->forward.num_stages()));
  ASSERT_EQ(run.backward_stages.size(),
            static_cast<size_t>(plan.round_robin->backward.num_stages()));
  for (size_t f = 0; f < run.forward_stages.size(); ++f) {
    EXPECT_EQ(run.forward_stages[f].begin, plan.round_robin->forward.stages[f].begin);
    EXPECT_EQ(run.forward_stages[f].end, plan.round_robin->forward.stages[f].end);
  }
  for (size_t k = 0; k < run.backward_stages.size(); ++k) {
    EXPECT_EQ(run.backward_stages[k].begin, plan.round_robin->backward.stages[k].begin);
    EXPECT_EQ(run.backward_stages[k].end, plan.round_robin->backward.stages[k].end);
  }
  // Pass j runs on the plan's GpuOfPass(j), and the run's pass stream is the plan's.
  ASSERT_EQ(run.pass_rank.size(), static_cast<size_t>(plan.num_passes()));
  for (int j = 0; j < plan.num_passes(); ++j) {
    EXPECT_EQ(run.rank_gpu[run.pass_rank[j]], plan.GpuOfPass(j)) << "pass " << j;
    const planner::PassRef want = plan.PassAt(j);
    const runtime::Pass got = runtime::PassAt(run, j);
    EXPECT_EQ(got.backward, want.backward) << "pass " << j;
    EXPECT_EQ(got.stage, want.stage) << "pass " << j;
  }
  const std::vector<int> plan_checkpoints = plan.CheckpointUnits();
  const std::vector<int64_t> want_checkpoints(plan_checkpoints.begin(), plan_checkpoints.end());
  EXPECT_EQ(runtime::CheckpointUnits(run), want_checkpoints);
  runtime::RunConfig with_store = run;
  with_store.store_path = "/dev/shm/x";
  EXPECT_TRUE(ValidateRunConfig(with_store, 34).ok()) << ValidateRunConfig(with_store, 34);
}

TEST(RunBuilder, RoundRobinPlanWithoutPartitionsIsRefused) {
  planner::Plan plan;
  plan.schedule = runtime::Schedule::kRoundRobin;
  plan.mapping.gpu_order = {0};
  auto r = BuildRunConfig("j", {}, plan, {}, {}, {.enabled = false});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RunBuilder, RejectsABadScale) {
  runtime::RunConfig unused;
  planner::Plan plan;
  plan.mapping.gpu_order = {0};
  auto r = BuildRunConfig("j", {}, plan, {}, {}, {.enabled = true, .link_scale = 0});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::launch
