// MakePlan on the hwloc fixtures and real config.json files: the paper's claims hold end to end,
// the comparison table is complete, and bad input fails with numbers and a fix.
#include "host/planner/api/make_plan.h"
#include "host/planner/api/plan_context.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/model/model_config_parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/planner/partition.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::planner {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  topology::Topology topology;
  topology::TopologyFacts facts;
};

Fixture LoadTopology(const std::string& name) {
  auto loaded = topology::MakeHwlocXmlFileSource(testing::TopologyFixture(name))->Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  Fixture f;
  if (loaded.ok()) {
    f.topology = loaded->topology;
    f.facts = topology::Analyze(f.topology);
  }
  return f;
}

model::ModelDescription LoadModel(const std::string& name) {
  auto config = model::LoadModelConfig(testing::SourcePath("test/data/models/" + name));
  EXPECT_TRUE(config.ok()) << config.status();
  auto m = model::DescribeModel(*config);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

JobShape Job(int64_t batch, int64_t microbatch, int64_t seq) {
  JobShape j;
  j.global_batch = batch;
  j.microbatch = microbatch;
  j.seq_len = seq;
  return j;
}

const Alternative* Row(const PlanReport& r, const std::string& dim, const std::string& name) {
  for (const Alternative& a : r.alternatives) {
    if (a.dimension == dim && a.name == name) return &a;
  }
  return nullptr;
}

TEST(MakePlan, PaperTestbedLlama7bMobius) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("llama-2-7b.json");
  PlanOptions o;
  o.mip_time_limit_seconds = 0.5;
  // The traffic argument below is the paper's, against the ZeRO-3 offload reference that uploads
  // every weight to every GPU in each pass (the realistic default row is checked after it).
  o.zero_as_deepspeed_runs_it = false;
  auto r = MakePlan(m, f.topology, f.facts, Job(8, 1, 1024), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->plan.schedule, runtime::Schedule::kMobius);
  EXPECT_EQ(r->num_gpus, 8);
  EXPECT_EQ(r->plan.num_microbatches, 8);
  EXPECT_GE(r->plan.num_stages(), 8);
  EXPECT_GT(r->step_seconds, 0);
  EXPECT_EQ(r->plan.predicted_step_seconds, r->step_seconds);
  EXPECT_GT(r->objective_seconds, 0);
  EXPECT_NEAR(r->tokens_per_second, 8 * 1024 / r->step_seconds, 1e-6);
  EXPECT_GT(r->bubble_fraction, 0);
  EXPECT_LT(r->bubble_fraction, 1);
  EXPECT_FALSE(r->links.empty());
  EXPECT_EQ(r->device, "RTX 3090");

  // Cross mapping alternates root complexes (paper testbed: one switch per socket).
  ASSERT_EQ(r->placements.size(), 8u);
  for (size_t i = 0; i + 1 < r->placements.size(); ++i) {
    EXPECT_NE(r->placements[i].root_complex, r->placements[i + 1].root_complex) << i;
  }
  // Stages cover the model; memory fits the GPUs and the host.
  int64_t stage_bytes = 0;
  for (int64_t b : r->stage_parameter_bytes) stage_bytes += b;
  EXPECT_GE(stage_bytes, 2 * r->parameters);
  EXPECT_GT(r->plan.memory.max_gpu_bytes, 0);
  EXPECT_LE(r->plan.memory.max_gpu_bytes, r->plan.memory.gpu_capacity_bytes);
  // bf16 weights 2 + fp32 gradients 4 (what the runtime keeps) + master and Adam moments 12.
  EXPECT_EQ(r->plan.memory.host_model_state_bytes, 18 * r->parameters);
  EXPECT_EQ(r->gradient_bytes_per_parameter, 4);
  EXPECT_GT(r->plan.memory.pinned_bytes, 0);
  EXPECT_EQ(r->host_memory_available_bytes, int64_t{2} * 824633720832);

  // Traffic: ZeRO-offload uploads each weight once per GPU per pass, Mobius at most once per pass
  // (1/N): every stage in forward, in backward only those that are not among their GPU's last two
  // forward stages, which its two slots still hold (s + 2N < S, sim/schedules.h).
  const Alternative* zero = Row(*r, "schedule", "zero");
  ASSERT_NE(zero, nullptr);
  const int num_stages = r->plan.num_stages();
  int64_t expected = 0;
  for (int s = 0; s < num_stages; ++s) {
    expected += r->stage_parameter_bytes[s] * (s + 2 * r->num_gpus < num_stages ? 2 : 1);
  }
  EXPECT_EQ(r->weight_upload_bytes, expected);
  const double ratio = double(r->weight_upload_bytes) / zero->weight_upload_bytes;
  EXPECT_LE(ratio, 1.0 / 8 + 1e-9);
  EXPECT_GE(ratio, 1.0 / 16 - 1e-9);
  EXPECT_LT(r->step_seconds, zero->step_seconds);

  // The default comparison row: ZeRO-3 offload as DeepSpeed runs this job (one microbatch per GPU
  // per micro-step, three gathers, collectives through host memory on GeForce cards): slower
  // still than the reference, as the published measurements order them (docs/planner.md).
  o.zero_as_deepspeed_runs_it = true;
  auto real = MakePlan(m, f.topology, f.facts, Job(8, 1, 1024), o);
  ASSERT_TRUE(real.ok()) << real.status();
  const Alternative* deepspeed = Row(*real, "schedule", "zero");
  ASSERT_NE(deepspeed, nullptr);
  EXPECT_GT(deepspeed->step_seconds, zero->step_seconds);
  EXPECT_LT(real->step_seconds, deepspeed->step_seconds);
}

// Issue 21: the stage count is chosen by simulation among the J-best ones, and no GPU is left
// without a stage when the memory allows S >= N. Llama-3.1-8B on the 8x RTX 4090 fixture at
// batch 256 x 2048: the J-optimal partition has 7 stages (GPU 7 idle).
TEST(MakePlan, ChoiceBySimulationUsesEveryGpuAndIsNeverSlowerThanTheJOptimum) {
  const Fixture f = LoadTopology("rtx4090_2s_4sw_8gpu.xml");
  const model::ModelDescription m = LoadModel("llama-3.1-8b-instruct.json");
  PlanOptions o;
  o.compare = false;
  PlanOptions j_only = o;
  j_only.choose_by_simulation = false;
  auto chosen = MakePlan(m, f.topology, f.facts, Job(256, 1, 2048), o);
  auto j = MakePlan(m, f.topology, f.facts, Job(256, 1, 2048), j_only);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->plan.num_stages(), 7);  // the J optimum leaves a GPU idle
  EXPECT_GE(chosen->plan.num_stages(), 8);
  for (const GpuPlacement& g : chosen->placements) EXPECT_FALSE(g.stages.empty()) << g.gpu;
  EXPECT_LE(chosen->step_seconds, j->step_seconds);
  EXPECT_THAT(chosen->partitioner_note, HasSubstr("chosen by simulation"));
  EXPECT_THAT(chosen->partitioner_note, HasSubstr("would leave 1 GPU(s) without a stage"));
  std::printf("llama-3.1-8b on 8x4090: J-optimal S=%d %.3f s/step; chosen S=%d %.3f s/step\n",
              j->plan.num_stages(), j->step_seconds, chosen->plan.num_stages(),
              chosen->step_seconds);

  // Across models, servers and batch shapes: never slower (simulated) than the J-optimal plan
  // whenever that plan already uses every GPU, and always every GPU when S >= N fits.
  struct Case {
    const char* topology;
    const char* model;
    int64_t batch, microbatch, seq;
  };
  for (const Case& c : {Case{"paper_testbed_2s_2sw_8x3090.xml", "llama-2-7b.json", 8, 1, 1024},
                        Case{"paper_testbed_2s_2sw_8x3090.xml", "qwen3-8b.json", 64, 2, 2048},
                        Case{"rtx4090_2s_4sw_8gpu.xml", "mistral-7b-v0.1.json", 32, 1, 4096},
                        Case{"root_ports_1s_4gpu.xml", "qwen3-1.7b.json", 16, 4, 1024},
                        Case{"root_ports_1s_4gpu.xml", "llama-2-7b.json", 32, 1, 2048}}) {
    const Fixture fc = LoadTopology(c.topology);
    const model::ModelDescription mc = LoadModel(c.model);
    auto a = MakePlan(mc, fc.topology, fc.facts, Job(c.batch, c.microbatch, c.seq), o);
    auto b = MakePlan(mc, fc.topology, fc.facts, Job(c.batch, c.microbatch, c.seq), j_only);
    ASSERT_TRUE(a.ok()) << c.model << ": " << a.status();
    ASSERT_TRUE(b.ok()) << c.model << ": " << b.status();
    EXPECT_GE(a->plan.num_stages(), a->num_gpus) << c.model << " on " << c.topology;
    if (b->plan.num_stages() >= b->num_gpus) {
      EXPECT_LE(a->step_seconds, b->step_seconds * (1 + 1e-12)) << c.model << " on " << c.topology;
    }
  }
}

// Round-robin under the runtime's memory model: the partition is the fastest simulated of the
// J-best pass counts whose per-GPU need fits (a worker sizes its slots for its largest pass, every
// pass when passes rotate), never slower than the J optimum where that fits too.
TEST(MakePlan, RoundRobinChoiceBySimulationFitsEveryGpu) {
  const Fixture f = LoadTopology("rtx4090_2s_4sw_8gpu.xml");
  const model::ModelDescription m = LoadModel("llama-3.1-8b-instruct.json");
  PlanOptions o;
  o.compare = false;
  o.schedule = runtime::Schedule::kRoundRobin;
  o.optimizer_staleness = 1;
  PlanOptions j_only = o;
  j_only.choose_by_simulation = false;
  JobShape job = Job(256, 4, 2048);
  job.dtype = "fp16";
  job.fp16_accumulate = true;
  auto chosen = MakePlan(m, f.topology, f.facts, job, o);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_LE(chosen->plan.memory.max_gpu_bytes, chosen->plan.memory.gpu_capacity_bytes);
  auto j = MakePlan(m, f.topology, f.facts, job, j_only);
  if (j.ok()) {
    EXPECT_LE(chosen->step_seconds, j->step_seconds + 1e-9);
  } else {
    EXPECT_THAT(j.status().message(), HasSubstr("GPU memory too small"));
  }
  std::printf("llama-3.1-8b fp16 roundrobin mb 4: chosen %d passes %.3f s/step; J optimum %s\n",
              chosen->plan.num_passes(), chosen->step_seconds,
              j.ok() ? absl::StrFormat("%d passes %.3f s/step", j->plan.num_passes(),
                                       j->step_seconds).c_str()
                     : "does not fit");
}

TEST(MakePlan, ComparisonTableHasEveryAlternative) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("llama-2-7b.json");
  PlanOptions o;
  o.mip_time_limit_seconds = 0.5;
  auto r = MakePlan(m, f.topology, f.facts, Job(4, 1, 512), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"partitioner", "exact"},   {"partitioner", "mip"},    {"partitioner", "uniform"},
      {"mapper", "cross"},        {"mapper", "sequential"},  {"schedule", "mobius"},
      {"schedule", "roundrobin"}, {"schedule", "rr-shared"}, {"schedule", "resident"},
      {"schedule", "zero"}};
  EXPECT_EQ(r->alternatives.size(), expected.size());
  for (const auto& [dim, name] : expected) {
    const Alternative* a = Row(*r, dim, name);
    ASSERT_NE(a, nullptr) << dim << " " << name;
    if (!a->available) {
      EXPECT_FALSE(a->note.empty());
      continue;
    }
    EXPECT_GT(a->step_seconds, 0) << name;
    EXPECT_GT(a->tokens_per_second, 0) << name;
  }
  EXPECT_TRUE(Row(*r, "partitioner", "exact")->chosen);
  EXPECT_TRUE(Row(*r, "mapper", "cross")->chosen);
  EXPECT_TRUE(Row(*r, "schedule", "mobius")->chosen);
  EXPECT_EQ(Row(*r, "partitioner", "mip")->available, MipAvailable());
  // exact is optimal for J (with the two-slot reuse): uniform is never better, nor is mip, which
  // optimises the paper's J (every backward uploads) and is re-scored with the reuse for the row.
  // Here (symmetric links, fp32 gradients) the reuse never lowers a stage's tau (the gradient
  // offload bounds the backward), so a finished mip matches exact.
  const double exact = Row(*r, "partitioner", "exact")->objective_seconds;
  EXPECT_LE(exact, Row(*r, "partitioner", "uniform")->objective_seconds + 1e-9);
  const Alternative* mip = Row(*r, "partitioner", "mip");
  if (mip->available) {
    EXPECT_THAT(mip->note, HasSubstr("paper's J"));
    EXPECT_GE(mip->objective_seconds, exact * (1 - 1e-9));
    if (mip->note.find("optimal") != std::string::npos) {
      EXPECT_NEAR(mip->objective_seconds, exact, 1e-9 * exact);
    }
  }
  EXPECT_LE(Row(*r, "mapper", "cross")->contention_score,
            Row(*r, "mapper", "sequential")->contention_score);
}

TEST(MakePlan, ResidentIsUnavailableWhenItDoesNotFitAndAnErrorWhenChosen) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("llama-2-7b.json");
  PlanOptions o;
  o.partitioner = "uniform";
  o.mip_time_limit_seconds = 0.3;  // the table's mip row; the test is not about it
  o.gpu_memory_bytes = int64_t{8} << 30;
  auto r = MakePlan(m, f.topology, f.facts, Job(2, 1, 256), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const Alternative* res = Row(*r, "schedule", "resident");
  ASSERT_NE(res, nullptr);
  EXPECT_FALSE(res->available);
  EXPECT_THAT(res->note, HasSubstr("does not fit"));
  o.schedule = runtime::Schedule::kResident;
  auto bad = MakePlan(m, f.topology, f.facts, Job(2, 1, 256), o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("GPUs of this size"));
}

TEST(MakePlan, SmallModelOtherSchedulesSubsetAndTrace) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("gpt2.json");
  PlanOptions o;
  o.gpus = {5, 0, 4, 1};
  o.compare = false;
  o.trace = true;
  for (const char* schedule : {"mobius", "roundrobin", "resident", "zero"}) {
    o.schedule = *runtime::ParseSchedule(schedule);
    auto r = MakePlan(m, f.topology, f.facts, Job(8, 2, 512), o);
    ASSERT_TRUE(r.ok()) << schedule << ": " << r.status();
    EXPECT_EQ(r->num_gpus, 4);
    EXPECT_GT(r->step_seconds, 0) << schedule;
    EXPECT_TRUE(r->alternatives.empty());
    ASSERT_FALSE(r->chrome_trace_json.empty());
    EXPECT_EQ(r->chrome_trace_json.front(), '{');
    for (const GpuPlacement& p : r->placements) {
      EXPECT_TRUE(p.gpu == 0 || p.gpu == 1 || p.gpu == 4 || p.gpu == 5) << p.gpu;
    }
  }
}

// The round-robin schedule's plan carries separate forward and backward partitions that each cover
// the model and fit the GPUs; backward stages (~3x the compute) hold fewer units.
TEST(MakePlan, RoundRobinHasSeparateForwardAndBackwardPartitions) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("llama-2-7b.json");
  PlanOptions o;
  o.schedule = runtime::Schedule::kRoundRobin;
  o.mip_time_limit_seconds = 0.3;
  auto r = MakePlan(m, f.topology, f.facts, Job(16, 1, 2048), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const Plan& p = r->plan;
  ASSERT_TRUE(p.round_robin.has_value());
  const RoundRobinPartition& rr = *p.round_robin;
  EXPECT_EQ(p.partition.stages, rr.forward.stages);
  for (const Partition* part : {&rr.forward, &rr.backward}) {
    int next = 0;
    for (const StageRange& s : part->stages) {
      EXPECT_EQ(s.begin, next);
      next = s.end;
    }
    EXPECT_EQ(next, m.num_units());
    for (const StageCost& c : part->costs) {
      EXPECT_LE(c.memory_bytes, p.memory.gpu_capacity_bytes);
    }
  }
  EXPECT_GE(rr.backward.num_stages(), rr.forward.num_stages());
  EXPECT_LE(p.memory.max_gpu_bytes, p.memory.gpu_capacity_bytes);
  EXPECT_EQ(p.num_passes(), rr.forward.num_stages() + rr.backward.num_stages());
  EXPECT_EQ(p.PassAt(0).backward, false);
  EXPECT_EQ(p.PassAt(p.num_passes() - 1).backward, true);
  EXPECT_EQ(p.PassAt(p.num_passes() - 1).stage, 0);
  EXPECT_DOUBLE_EQ(r->objective_seconds, rr.objective_seconds);
  EXPECT_EQ(r->backward_stage_parameter_bytes.size(), rr.backward.stages.size());
  // Every forward and backward stage start (but unit 0) is checkpointed.
  for (const StageRange& s : rr.backward.stages) {
    if (s.begin == 0) continue;
    const std::vector<int> ck = p.CheckpointUnits();
    EXPECT_TRUE(std::find(ck.begin(), ck.end(), s.begin) != ck.end()) << s.begin;
  }
  // The table compares it with one shared partition and with mobius.
  const Alternative* own = Row(*r, "schedule", "roundrobin");
  const Alternative* shared = Row(*r, "schedule", "rr-shared");
  ASSERT_TRUE(own && shared && Row(*r, "schedule", "mobius"));
  EXPECT_TRUE(own->chosen);
  EXPECT_THAT(own->note, HasSubstr("bwd stages"));
  EXPECT_LE(own->objective_seconds, shared->objective_seconds + 1e-9);
  EXPECT_EQ(own->num_stages, p.num_passes());
}

// A measured profile replaces the analytic one: the report says so, and a profile for another
// model or shape is rejected with the numbers.
TEST(MakePlan, MeasuredProfileIsUsedAndChecked) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("gpt2.json");
  absl::StatusOr<Profile> measured = AnalyticProfile(m, {1, 512}, Rtx3090Spec());
  ASSERT_TRUE(measured.ok());
  measured->source = "measured";
  measured->device = "cpu";
  for (UnitProfile& u : measured->units) u.backward_seconds *= 2;
  PlanOptions o;
  o.compare = false;
  o.profile = *measured;
  auto r = MakePlan(m, f.topology, f.facts, Job(8, 1, 512), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->profile_source, "measured");
  EXPECT_EQ(r->device, "cpu");
  PlanOptions analytic;
  analytic.compare = false;
  auto a = MakePlan(m, f.topology, f.facts, Job(8, 1, 512), analytic);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->profile_source, "analytic");
  EXPECT_GT(r->step_seconds, a->step_seconds);  // slower backward measured
  auto wrong_shape = MakePlan(m, f.topology, f.facts, Job(8, 1, 256), o);
  EXPECT_EQ(wrong_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_shape.status().message(), HasSubstr("seq 512"));
  auto wrong_model = MakePlan(LoadModel("llama-2-7b.json"), f.topology, f.facts, Job(8, 1, 512), o);
  EXPECT_EQ(wrong_model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_model.status().message(), HasSubstr("another model"));
  // A profile measured in one precision plans jobs of that precision only.
  o.profile->precision = "bf16";
  JobShape fp16 = Job(8, 1, 512);
  fp16.dtype = "fp16";
  auto wrong_precision = MakePlan(m, f.topology, f.facts, fp16, o);
  EXPECT_EQ(wrong_precision.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_precision.status().message(),
              HasSubstr("measured in bf16 but the job trains in fp16; profile again with "
                        "--precision fp16"));
  o.profile->precision = "fp16";
  EXPECT_TRUE(MakePlan(m, f.topology, f.facts, fp16, o).ok());
}

// A GPU the presets do not know plans with a measured profile (no peak FLOP/s needed), its
// memory from the topology: a 24 GB card unknown by name gets the plan a known one gets; without
// a profile it is refused, asking for a peak.
TEST(MakePlan, UnknownGpuWithMeasuredProfileTakesTheTopologysMemory) {
  Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("gpt2.json");
  absl::StatusOr<Profile> measured = AnalyticProfile(m, {1, 512}, Rtx3090Spec());
  ASSERT_TRUE(measured.ok());
  measured->source = "measured";
  PlanOptions o;
  o.compare = false;
  o.profile = *measured;
  auto known = MakePlan(m, f.topology, f.facts, Job(8, 1, 512), o);
  ASSERT_TRUE(known.ok()) << known.status();
  for (auto& gpu : f.topology.gpus) gpu.name = "Mystery Accelerator 24GB";
  auto unknown = MakePlan(m, f.topology, f.facts, Job(8, 1, 512), o);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_GT(unknown->plan.memory.gpu_capacity_bytes, int64_t{20} << 30);
  EXPECT_EQ(unknown->plan.memory.gpu_capacity_bytes, known->plan.memory.gpu_capacity_bytes);
  EXPECT_EQ(unknown->plan.num_stages(), known->plan.num_stages());
  PlanOptions analytic;
  analytic.compare = false;
  EXPECT_EQ(MakePlan(m, f.topology, f.facts, Job(8, 1, 512), analytic).status().code(),
            absl::StatusCode::kInvalidArgument);  // no preset and no profile: asks for a peak
}

// The plan's J counts the two-slot reuse (cost_model.h) where it binds: a measured profile whose
// H2D rate (1 GB/s) is well below the topology's D2H (0.8 x 15.75 / 4 = 3.15 GB/s per GPU), with
// GPT-2's small compute, makes the upload the backward's largest term; the last min(S, 2N) stages
// (all 4 of the plan's: S <= 2N) run their backward without it, so J is below what the paper's
// every-backward-uploads model gives (0.243 s vs 0.291 s, the same 4 stages), and the mip row
// (paper's objective, re-scored) cannot beat exact.
TEST(MakePlan, ObjectiveCountsTheTwoSlotReuseWhereUploadsBind) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("gpt2.json");
  absl::StatusOr<Profile> measured = AnalyticProfile(m, {1, 512}, Rtx3090Spec());
  ASSERT_TRUE(measured.ok());
  measured->source = "measured";
  measured->links = LinkProfile{};
  measured->links->h2d_bytes_per_s = 1e9;  // D2H not measured: the topology's rate
  PlanOptions o;
  o.profile = *measured;
  o.mip_time_limit_seconds = 1;
  o.choose_by_simulation = false;  // this test is about J itself (the J-optimal partition)
  auto r = MakePlan(m, f.topology, f.facts, Job(8, 1, 512), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const Partition& part = r->plan.partition;
  const int s = part.num_stages(), reused = std::min(s, 2 * r->num_gpus);
  for (int i = 0; i < s; ++i) EXPECT_EQ(part.costs[i].backward_upload, i < s - reused) << i;

  absl::StatusOr<PartitionProblem> problem =
      MakePartitionProblem(*measured, m, f.topology, f.facts, {0, 1, 2, 3, 4, 5, 6, 7}, 8, 0);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_NEAR(problem->h2d_bytes_per_s, 1e9, 1);
  EXPECT_NEAR(problem->d2h_bytes_per_s, 3.15e9, 1e7);
  absl::StatusOr<Partition> rescored = ScorePartition(*problem, part.stages);
  ASSERT_TRUE(rescored.ok());
  EXPECT_DOUBLE_EQ(rescored->objective_seconds, r->objective_seconds);
  problem->backward_uploads = BackwardUploads::kEveryStage;
  absl::StatusOr<Partition> paper = ExactPartition(*problem);
  ASSERT_TRUE(paper.ok());
  EXPECT_LT(r->objective_seconds, paper->objective_seconds * (1 - 1e-3));
  std::printf("gpt2, H2D 1 GB/s: J %.4f s with the reuse (%d stages), %.4f s without (%d)\n",
              r->objective_seconds, s, paper->objective_seconds, paper->num_stages());
  const Alternative* mip = Row(*r, "partitioner", "mip");
  ASSERT_NE(mip, nullptr);
  if (mip->available) EXPECT_GE(mip->objective_seconds, r->objective_seconds * (1 - 1e-9));
}

TEST(MakePlan, CrossEqualsSequentialWithoutSharedUplinks) {
  const Fixture f = LoadTopology("root_ports_1s_4gpu.xml");
  const model::ModelDescription m = LoadModel("qwen3-0.6b.json");
  PlanOptions o;
  o.partitioner = "uniform";
  o.mip_time_limit_seconds = 0.3;  // the table's mip row; the test is not about it
  auto r = MakePlan(m, f.topology, f.facts, Job(4, 1, 512), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const Alternative* cross = Row(*r, "mapper", "cross");
  const Alternative* seq = Row(*r, "mapper", "sequential");
  ASSERT_TRUE(cross && seq);
  EXPECT_DOUBLE_EQ(cross->step_seconds, seq->step_seconds);
  EXPECT_EQ(r->plan.mapping.gpu_order, (std::vector<int>{0, 1, 2, 3}));
}

// ---- Bad input -----------------------------------------------------------------------------

TEST(MakePlanBadInput, UnitDoesNotFit) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  PlanOptions o;
  o.gpu_memory_bytes = int64_t{3} << 29;  // 1.5 GiB: the 1 GiB margin leaves too little
  auto r = MakePlan(LoadModel("llama-2-7b.json"), f.topology, f.facts, Job(8, 1, 1024), o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("does not fit on a GPU even alone"));
  EXPECT_THAT(r.status().message(), HasSubstr("GiB"));
}

TEST(MakePlanBadInput, HostRamTooSmall) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  PlanOptions o;
  o.host_memory_bytes = int64_t{64} << 30;
  auto r = MakePlan(LoadModel("llama-2-7b.json"), f.topology, f.facts, Job(8, 1, 1024), o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("host RAM too small"));
  EXPECT_THAT(r.status().message(), HasSubstr("64.00 GiB"));
  EXPECT_THAT(r.status().message(), HasSubstr("to fit"));
}

// Every stage fits alone, but a worker sizes its two slots for its largest W + G and its
// activation buffers for its longest stage, which can come from different stages: a plan whose
// largest per-GPU need exceeds the GPU is a misfit, named with the numbers.
TEST(MakePlanBadInput, GpuRamTooSmallForAWorkersPasses) {
  internal::PlanContext ctx;
  ctx.job = Job(128, 8, 2048);
  ctx.problem.reserved_bytes = int64_t{7} << 30;
  Plan plan;
  plan.memory.gpu_capacity_bytes = int64_t{24} << 30;
  plan.memory.gpu_bytes = {int64_t{20} << 30, int64_t{25} << 30, int64_t{23} << 30};
  plan.memory.max_gpu_bytes = int64_t{25} << 30;
  const absl::Status s = internal::CheckGpuMemory(ctx, plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  for (const char* part : {"GPU memory too small", "GPU position 1 needs 25.00 GiB",
                           "reserved 7.00 GiB", "at microbatch 8", "but has 24.00 GiB"}) {
    EXPECT_THAT(s.message(), HasSubstr(part));
  }
  plan.memory.max_gpu_bytes = plan.memory.gpu_capacity_bytes;
  EXPECT_TRUE(internal::CheckGpuMemory(ctx, plan).ok());
}

TEST(MakePlanBadInput, NoGpus) {
  const Fixture f = LoadTopology("cpu_only_1s.xml");
  auto r = MakePlan(LoadModel("gpt2.json"), f.topology, f.facts, Job(8, 1, 512));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("0 NVIDIA GPUs"));
}

TEST(MakePlanBadInput, BatchNotMultipleOfMicrobatch) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  auto r = MakePlan(LoadModel("gpt2.json"), f.topology, f.facts, Job(10, 4, 512));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("global batch 10 is not a multiple of the microbatch 4"));
  EXPECT_THAT(r.status().message(), HasSubstr("use batch 8 or 12"));
}

TEST(MakePlanBadInput, OtherInvalidArguments) {
  const Fixture f = LoadTopology("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = LoadModel("gpt2.json");
  PlanOptions o;
  o.gpus = {0, 9};
  EXPECT_THAT(MakePlan(m, f.topology, f.facts, Job(8, 1, 512), o).status().message(),
              HasSubstr("granted GPU 9 does not exist"));
  o.gpus = {};
  // A schedule is a type in the planner; unknown names are refused where they are parsed.
  EXPECT_EQ(runtime::ParseSchedule("pipedream").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MakePlan(m, f.topology, f.facts, Job(8, 1, 4096), o).status().message(),
              HasSubstr("exceeds the model's max_position_embeddings 1024"));
  EXPECT_EQ(MakePlan(m, f.topology, f.facts, Job(0, 1, 512), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.partitioner = "mip";
  auto mip = MakePlan(m, f.topology, f.facts, Job(8, 1, 512), o);
  if (!MipAvailable()) {
    EXPECT_THAT(mip.status().message(), HasSubstr("mip not available in this build"));
  } else {
    EXPECT_TRUE(mip.ok()) << mip.status();
  }
}

}  // namespace
}  // namespace mobius::planner
