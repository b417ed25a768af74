// `mobius plan --topology-file`: text and JSON outputs, the Chrome trace, and bad input (exit 2,
// one line naming the problem).
#include "client/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "client/exit_codes.h"
#include "common/jobspec/yaml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "host/run/job_planning.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::cli {
namespace {

using ::testing::HasSubstr;

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunCommand(const PlanCommandOptions& o) {
  std::ostringstream out, err;
  int code = RunPlan(o, out, err);
  return {code, out.str(), err.str()};
}

// The fixed configuration the cases below were written for (the defaults before the planner chose
// them): mobius, static, staleness 0, microbatch 1. ConfigurationIsChosenBySimulation leaves them
// free.
PlanCommandOptions Options(const std::string& model, const std::string& topology) {
  PlanCommandOptions o;
  o.model = mobius::testing::SourcePath("test/data/models/" + model);
  o.topology_file = mobius::testing::TopologyFixture(topology);
  o.batch = 4;
  o.microbatch = 1;
  o.seq = 512;
  o.schedule = "mobius";
  o.dispatch = "static";
  o.optimizer_staleness = 0;
  o.precision = "bf16";
  o.mip_time_limit_seconds = 0.3;
  return o;
}

constexpr char kPaper[] = "paper_testbed_2s_2sw_8x3090.xml";

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(PlanCommand, TextShowsEverySection) {
  Result r = RunCommand(Options("llama-2-7b.json", kPaper));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(r.err.empty());
  for (const char* s : {"Stages (", "Mapping (", "Memory: GPU max", "host RAM", "pinned",
                        "Predicted step:", "tokens/s", "Traffic per step", "Links:", "uplink",
                        "Alternatives", "*exact", "uniform", "*cross", "sequential", "*mobius",
                        "roundrobin", "resident", "zero", "block 0"}) {
    EXPECT_THAT(r.out, HasSubstr(s)) << s;
  }
}

TEST(PlanCommand, JsonIsMachineReadable) {
  PlanCommandOptions o = Options("gpt2.json", kPaper);
  o.json = true;
  o.gpus = "0,4,1,5";
  o.mapper = "sequential";
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schedule"], "mobius");
  EXPECT_EQ(j["mapper"], "sequential");
  EXPECT_EQ(j["gpu_order"], nlohmann::json({0, 1, 4, 5}));
  EXPECT_EQ(j["gpus"].size(), 4u);
  EXPECT_GT(j["predicted"]["step_seconds"].get<double>(), 0);
  EXPECT_GT(j["predicted"]["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(j["memory"]["host_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(j["stages"].empty());
  EXPECT_EQ(j["stages"][0]["unit_begin"], 0);
  EXPECT_EQ(j["alternatives"].size(), 10u);  // + rr-shared
  EXPECT_EQ(j["profile"]["source"], "analytic");
  EXPECT_EQ(j["profile"]["gradient_bytes_per_parameter"], 4);
  EXPECT_FALSE(j["links"].empty());
}

// --link-scale slows every simulator link as mobiusd --link-scale slows the emulated links: a
// PCIe-bound plan's step grows, its link capacities shrink by exactly the scale.
TEST(PlanCommand, LinkScaleSlowsTheLinksLikeTheEmulation) {
  PlanCommandOptions o = Options("llama-2-7b.json", kPaper);
  o.json = true;
  Result full = RunCommand(o);
  o.link_scale = 0.02;
  Result scaled = RunCommand(o);
  ASSERT_EQ(full.code, kExitOk) << full.err;
  ASSERT_EQ(scaled.code, kExitOk) << scaled.err;
  nlohmann::json a = nlohmann::json::parse(full.out), b = nlohmann::json::parse(scaled.out);
  EXPECT_EQ(a["link_scale"], 1.0);
  EXPECT_EQ(b["link_scale"], 0.02);
  EXPECT_GT(b["predicted"]["step_seconds"].get<double>(),
            10 * a["predicted"]["step_seconds"].get<double>());
  ASSERT_FALSE(a["links"].empty());
  ASSERT_EQ(a["links"].size(), b["links"].size());
  const auto capacity = [](const nlohmann::json& l) {
    return l["capacity_bytes_per_s"].get<double>();
  };
  EXPECT_NEAR(capacity(b["links"][0]), 0.02 * capacity(a["links"][0]),
              1e-9 * capacity(a["links"][0]));
  o.json = false;
  EXPECT_THAT(RunCommand(o).out, HasSubstr("PCIe links x0.02 (emulated)"));
}

TEST(PlanCommand, TraceIsWrittenAndParses) {
  PlanCommandOptions o = Options("gpt2.json", kPaper);
  o.trace = ::testing::TempDir() + "/plan_trace.json";
  o.gpus = "0,1";
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Trace: "));
  std::ifstream f(o.trace);
  ASSERT_TRUE(f.good());
  nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_TRUE(j.contains("traceEvents"));
  EXPECT_FALSE(j["traceEvents"].empty());
  std::remove(o.trace.c_str());
}

// --profile=measured runs the real `mobius-worker profile` (tiny model, CPU backend), which caches;
// --profile=FILE reads that file; a profile file for another model, or a damaged one, exits 2.
TEST(PlanCommand, MeasuredProfileFromTheWorkerAndFromAFile) {
  const std::string worker = mobius::testing::BinaryPath("bin/mobius-worker");
  if (!std::filesystem::exists(worker)) GTEST_SKIP() << "no " << worker;
  const std::string dir = ::testing::TempDir() + "/plan_profile_cache";
  std::filesystem::remove_all(dir);
  PlanCommandOptions o = Options("tiny-llama", kPaper);
  o.batch = 4;
  o.microbatch = 2;
  o.seq = 32;
  o.gpus = "0,4";
  o.profile = "measured";
  o.profile_cache_dir = dir;
  o.worker_binary = worker;
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Profile: measured (cpu, " + dir));
  EXPECT_THAT(r.out, HasSubstr("gradients fp32"));
  // The cache now holds exactly one profile; plan from that file too.
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(dir)) file = e.path().string();
  ASSERT_FALSE(file.empty());
  o.profile = file;
  o.json = true;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["profile"]["source"], "measured");
  EXPECT_EQ(j["profile"]["path"], file);
  EXPECT_EQ(j["device"], "cpu");
  // LoRA on the measured (full fine-tuning) profile: converted (LoraFromMeasuredProfile), the
  // backward cheaper and the gradient offload gone.
  PlanCommandOptions lora = o;
  lora.lora = true;
  r = RunCommand(lora);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json jl = nlohmann::json::parse(r.out);
  EXPECT_EQ(jl["training"]["mode"], "lora");
  EXPECT_EQ(jl["profile"]["source"], "measured");
  EXPECT_LT(jl["traffic"]["d2h_bytes"].get<int64_t>(), j["traffic"]["d2h_bytes"].get<int64_t>());
  EXPECT_LT(jl["predicted"]["objective_seconds"].get<double>(),
            j["predicted"]["objective_seconds"].get<double>());
  // Another model, another shape, a damaged file: exit 2, one line naming the file.
  o.json = false;
  PlanCommandOptions other = o;
  other.model = mobius::testing::SourcePath("test/data/models/gpt2.json");
  r = RunCommand(other);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("another model"));
  EXPECT_THAT(r.err, HasSubstr(file));
  other = o;
  other.seq = 64;
  r = RunCommand(other);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("profile again at the job's shape"));
  const std::string bad = dir + "/bad.json";
  std::ofstream(bad) << "{\"format\": \"mobius-profile\", \"version\": 1}";
  other = o;
  other.profile = bad;
  r = RunCommand(other);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("profile " + bad + ": field model: missing"));
  other.profile = dir + "/none.json";
  r = RunCommand(other);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("no such file"));
  // --precision fp16 with --profile=measured: the worker profiles the fp16 units (its own cache
  // entry) and the plan is fp16; the bf16 file for an fp16 job: exit 2, naming the mismatch.
  PlanCommandOptions half = o;
  half.profile = "measured";
  half.precision = "fp16";
  r = RunCommand(half);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("-fp16.json)"));
  EXPECT_THAT(r.out, HasSubstr("x 32 tokens, 2 GPUs (cpu), fp16"));
  half.profile = file;
  r = RunCommand(half);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("measured in bf16 but the job trains in fp16"));
}

TEST(PlanCommand, RoundRobinShowsBothPartitions) {
  PlanCommandOptions o = Options("llama-2-7b.json", kPaper);
  o.schedule = "roundrobin";
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  for (const char* s : {"Forward stages (", "Backward stages (", "pass j runs on position",
                        "*roundrobin", "rr-shared", "bwd stages"}) {
    EXPECT_THAT(r.out, HasSubstr(s)) << s;
  }
  o.json = true;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("round_robin"));
  EXPECT_FALSE(j["round_robin"]["backward_stages"].empty());
  EXPECT_EQ(j["round_robin"]["num_passes"].get<int>(),
            j["stages"].size() + j["round_robin"]["backward_stages"].size());
}

TEST(PlanCommand, LoraShowsTheModeAndItsBytes) {
  PlanCommandOptions o = Options("llama-2-7b.json", kPaper);
  Result full = RunCommand(o);
  ASSERT_EQ(full.code, kExitOk) << full.err;
  EXPECT_THAT(full.out, HasSubstr("Training: full fine-tuning; host model state 18.00 bytes/parameter"));
  o.lora = true;  // rank 8, the family's default targets
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  // 8 x (4096 + 4096) x 2 modules x 32 blocks = 4.19M; the base 2 bytes/parameter + 16 bytes per
  // adapter parameter.
  EXPECT_THAT(r.out, HasSubstr("Training: LoRA rank 8 on q_proj, v_proj: 4.19M adapter parameters "
                               "(0.062%), the base frozen in bf16; host model state 2.01 "
                               "bytes/parameter"));
  EXPECT_THAT(r.out, HasSubstr("LoRA: the frozen base still partitioned and gathered"));

  o.lora = false;
  o.lora_rank = 16;
  o.lora_targets = "q_proj,k_proj,v_proj,o_proj";
  o.json = true;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["training"]["mode"], "lora");
  EXPECT_EQ(j["training"]["lora_rank"], 16);
  EXPECT_EQ(j["training"]["lora_targets"],
            nlohmann::json({"q_proj", "k_proj", "v_proj", "o_proj"}));
  EXPECT_EQ(j["training"]["adapter_parameters"], 16 * 4 * 8192 * 32);
  EXPECT_LT(j["training"]["host_model_state_bytes_per_parameter"].get<double>(), 2.1);
  o.lora_rank = 0;
  o.lora_targets.clear();
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["training"]["mode"], "full");

  // A job's adapter options (the seam for JOB.yaml's adapter section).
  train::AdapterOptions adapter;
  adapter.type = "lora";
  adapter.rank = 4;
  adapter.target_modules = {"q_proj", "o_proj"};
  PlanCommandOptions s;
  ASSERT_TRUE(SetAdapter(adapter, s).ok());
  EXPECT_TRUE(s.lora);
  EXPECT_EQ(s.lora_rank, 4);
  EXPECT_EQ(s.lora_targets, "q_proj,o_proj");
  adapter.type = "prefix";
  EXPECT_FALSE(SetAdapter(adapter, s).ok());
}

// --lora-base nf4 (QLoRA, issue 33): the base's linears in 4-bit, the plan compared in one line
// with the same job over a bf16 base; JSON carries both.
TEST(PlanCommand, Nf4BaseIsPlannedAndComparedWithBf16) {
  PlanCommandOptions o = Options("llama-2-7b.json", kPaper);
  o.lora_base = "nf4";  // implies LoRA (rank 8, the family's targets)
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Training: LoRA rank 8 on q_proj, v_proj: 4.19M adapter parameters "
                               "(0.062%), the base frozen in NF4 (its linears; norms, embeddings "
                               "and head bf16)"));
  EXPECT_THAT(r.out, HasSubstr("With a bf16 base instead: "));
  o.json = true;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["training"]["lora_base"], "nf4");
  // 6.48B of Llama-2-7B's 6.74B parameters are block linears: ~0.52 bytes each.
  EXPECT_LT(j["training"]["host_model_state_bytes_per_parameter"].get<double>(), 0.7);
  EXPECT_EQ(j["other_base"]["base"], "bf16");
  EXPECT_GT(j["other_base"]["host_bytes"].get<double>(),
            2.0 * j["memory"]["host_bytes"].get<double>());
  EXPECT_GT(j["other_base"]["weight_upload_bytes"].get<double>(),
            2.5 * j["traffic"]["weight_upload_bytes"].get<double>());
  // A bf16 LoRA plan names the NF4 alternative the same way.
  o.lora_base = "bf16";
  o.lora = true;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["other_base"]["base"], "nf4");
}

// `mobius plan JOB.yaml` plans the spec's adapter section; a target the family lacks is refused
// naming the field.
TEST(PlanCommand, JobSpecAdapterIsPlanned) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "plan_spec_adapter";
  std::filesystem::create_directories(dir / "model");
  std::filesystem::copy_file(mobius::testing::SourcePath("test/data/models/llama-2-7b.json"),
                             dir / "model/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto write = [&](const std::string& adapter) {
    std::ofstream(dir / "job.yaml") << "model_dir: " << (dir / "model").string()
                                    << "\ndataset: {path: /d/train.tok}\n"
                                       "training: {steps: 10, global_batch: 4, microbatch: 1, "
                                       "seq_len: 512}\nresources: {gpus: 8}\n"
                                    << adapter;
    return (dir / "job.yaml").string();
  };
  PlanCommandOptions base;
  base.topology_file = mobius::testing::TopologyFixture(kPaper);
  base.mip_time_limit_seconds = 0.3;
  std::ostringstream out, err;
  int code = RunPlanSpec(write("adapter: {type: lora, rank: 16, target_modules: [q_proj, o_proj]}\n"),
                         base, out, err);
  ASSERT_EQ(code, kExitOk) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("Training: LoRA rank 16 on q_proj, o_proj"));
  EXPECT_THAT(out.str(), HasSubstr("the base frozen in bf16"));
  // The base's format as the job gets it (QLoRA): the spec's base_quantization reaches the plan.
  std::ostringstream nf4_out, nf4_err;
  code = RunPlanSpec(write("adapter: {type: lora, rank: 16, target_modules: [q_proj, o_proj], "
                           "base_quantization: nf4}\n"),
                     base, nf4_out, nf4_err);
  ASSERT_EQ(code, kExitOk) << nf4_err.str();
  EXPECT_THAT(nf4_out.str(), HasSubstr("NF4 (its linears"));
  std::ostringstream out2, err2;
  code = RunPlanSpec(write("adapter: {type: lora, target_modules: [c_attn]}\n"), base, out2, err2);
  EXPECT_EQ(code, kExitUsage) << out2.str();
  EXPECT_THAT(err2.str(), HasSubstr("c_attn"));
}

// `mobius plan JOB.yaml` prints the plan the job then runs (issue 34): the same partition, GPU of
// each stage, schedule, microbatch, memory and step time as jobs::PlanJob (what mobiusd and
// `mobius run` plan with) gives for that spec on that topology, full and QLoRA, both schedules.
TEST(PlanCommand, JobSpecPrintsThePlanTheJobRuns) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "plan_spec_same";
  std::filesystem::create_directories(dir / "model");
  std::filesystem::copy_file(mobius::testing::SourcePath("test/data/models/llama-2-7b.json"),
                             dir / "model/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto loaded = topology::MakeHwlocXmlFileSource(mobius::testing::TopologyFixture(kPaper))->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);
  std::vector<int> allowed;
  for (int g = 0; g < 8; ++g) allowed.push_back(g);
  for (const char* tail :
       {"plan: {schedule: mobius}\n",
        "training: {steps: 10, global_batch: 8, microbatch: 2, seq_len: 512, grad_clip: 0}\n"
        "plan: {schedule: roundrobin, dispatch: pool}\n",
        "adapter: {type: lora, rank: 16, base_quantization: nf4}\n"
        "plan: {schedule: roundrobin}\n"}) {
    SCOPED_TRACE(tail);
    std::string text = "model_dir: " + (dir / "model").string() +
                       "\ndataset: {path: /d/train.tok}\nresources: {gpus: 8}\n" + tail;
    if (!absl::StrContains(tail, "training:")) {
      text += "training: {steps: 10, global_batch: 8, microbatch: 1, seq_len: 512}\n";
    }
    std::ofstream(dir / "job.yaml") << text;
    PlanCommandOptions o;
    o.topology_file = mobius::testing::TopologyFixture(kPaper);
    o.json = true;
    o.longest = false;
    std::ostringstream out, err;
    ASSERT_EQ(RunPlanSpec((dir / "job.yaml").string(), o, out, err), kExitOk) << err.str();
    const nlohmann::json printed = nlohmann::json::parse(out.str());

    absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpecFile((dir / "job.yaml").string());
    ASSERT_TRUE(spec.ok()) << spec.status();
    jobspec::Normalize(*spec);
    absl::StatusOr<jobs::PlannedJob> job =
        jobs::PlanJob(*spec, loaded->topology, facts, allowed, {});
    ASSERT_TRUE(job.ok()) << job.status();
    const planner::Plan& p = job->report.plan;
    EXPECT_EQ(printed["schedule"], runtime::ScheduleName(p.schedule));
    EXPECT_EQ(printed["job"]["microbatch"], p.shape.microbatch_size);
    ASSERT_EQ(printed["stages"].size(), static_cast<size_t>(p.num_stages()));
    for (int s = 0; s < p.num_stages(); ++s) {
      EXPECT_EQ(printed["stages"][s]["unit_begin"], p.partition.stages[s].begin) << s;
      EXPECT_EQ(printed["stages"][s]["unit_end"], p.partition.stages[s].end) << s;
      EXPECT_EQ(printed["stages"][s]["gpu"], p.GpuOfStage(s)) << s;
    }
    EXPECT_EQ(printed["memory"]["host_bytes"], p.memory.host_bytes);
    EXPECT_EQ(printed["memory"]["max_gpu_bytes"], p.memory.max_gpu_bytes);
    EXPECT_DOUBLE_EQ(printed["predicted"]["step_seconds"].get<double>(),
                     job->report.step_seconds);
  }
}

struct BadCase {
  const char* name;
  const char* model;
  const char* topology;
  void (*edit)(PlanCommandOptions&);
  const char* message;
};

// --nodes: the multi-node prediction, headed by how to run it; one row per node count.
TEST(PlanCommand, NodesPredictsScalingAndSaysHowToRunIt) {
  PlanCommandOptions o = Options("llama-2-7b.json", kPaper);
  o.batch = 16;
  o.nodes = "1,2,4";
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(r.err.empty());
  for (const char* s : {"Several nodes: predicted; run it with one `mobius run` per node",
                        "Inter-node link: 25.0 Gb/s per direction per node (3.125 GB/s), latency "
                        "20.0 us", "One node, the whole batch:", "batch/node", "exposed s",
                        "tokens/s", "efficiency", "100.0%"}) {
    EXPECT_THAT(r.out, HasSubstr(s)) << s;
  }
  // A single count adds its sentence and the per-stage all-reduce table.
  o.nodes = "2";
  o.internode_gbps = 100;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  for (const char* s : {"2 nodes: 8 sequences per node", "scaling efficiency",
                        "All-reduce per stage", "optimizer end", "100.0 Gb/s"}) {
    EXPECT_THAT(r.out, HasSubstr(s)) << s;
  }
  // A slow link: slower than one node, and said.
  o.internode_gbps = 1;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Slower than one node at 2 nodes"));

  o.json = true;
  o.nodes = "1,2";
  o.internode_gbps = 25;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["nodes"]["planned_only"], true);
  EXPECT_EQ(j["nodes"]["link"]["bytes_per_s"].get<double>(), 25e9 / 8);
  ASSERT_EQ(j["nodes"]["rows"].size(), 2u);
  const nlohmann::json& one = j["nodes"]["rows"][0];
  const nlohmann::json& two = j["nodes"]["rows"][1];
  EXPECT_EQ(one["step_seconds"], j["nodes"]["single_node"]["step_seconds"]);
  EXPECT_EQ(one["allreduce_bytes"], 0);
  EXPECT_EQ(two["node_batch"], 8);
  EXPECT_EQ(two["plan"]["job"]["global_batch"], 8);
  EXPECT_GT(two["allreduce_bytes"].get<int64_t>(), 0);
  EXPECT_GT(two["exposed_seconds"].get<double>(), 0);
  EXPECT_NEAR(two["step_seconds"].get<double>(),
              two["node_step_seconds"].get<double>() + two["exposed_seconds"].get<double>(),
              1e-9);
  EXPECT_FALSE(two["stages"].empty());
}

// The longest sequence that plans (issue 30): printed after the plan, in the JSON, and named in the
// error of a job too long for the GPUs; --nolongest skips it.
TEST(PlanCommand, LongestSequenceIsPrintedAndNamedWhenTheJobIsTooLong) {
  PlanCommandOptions o = Options("llama-3.1-8b-instruct.json", "rtx4090_2s_4sw_8gpu.xml");
  o.batch = 8;
  o.seq = 65536;
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Longest sequence (microbatch 1, global batch 8, this hardware): "
                               "full fine-tuning "));
  EXPECT_THAT(r.out, HasSubstr("LoRA rank 8 "));
  o.json = true;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  const int64_t full = j["longest_sequence"]["full"]["seq_len"].get<int64_t>();
  EXPECT_GE(full, 65536);
  EXPECT_GT(j["longest_sequence"]["lora"]["seq_len"].get<int64_t>(), full);
  o.json = false;
  o.seq = 131072;
  r = RunCommand(o);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("does not fit on a GPU even alone"));
  EXPECT_THAT(r.err, HasSubstr("the longest sequence that plans here at microbatch 1: " +
                               std::to_string(full) + " tokens"));
  EXPECT_EQ(Lines(r.err), 1);
  o.seq = 4096;
  o.longest = false;
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("Longest sequence")));
}

// Nothing pinned (the CLI's defaults): the schedule, dispatch, staleness and microbatch the
// simulation finds fastest, said with the runner-up; the JSON lists every candidate; what is
// pinned stays; the result is the plan of the chosen configuration.
TEST(PlanCommand, ConfigurationIsChosenBySimulation) {
  PlanCommandOptions o = Options("llama-3.1-8b-instruct.json", "rtx4090_2s_4sw_8gpu.xml");
  o.batch = 32;
  o.seq = 2048;
  o.schedule = "auto";
  o.dispatch = "auto";
  o.optimizer_staleness = -1;
  o.microbatch = 0;
  o.precision = "auto";
  o.longest = false;
  o.json = true;
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& c = j["configuration"];
  ASSERT_GT(c["candidates"].size(), 4u);
  const nlohmann::json& best = c["candidates"][0];
  EXPECT_TRUE(best["fits"].get<bool>());
  EXPECT_EQ(j["schedule"], best["schedule"]);
  EXPECT_EQ(j["job"]["microbatch"], best["microbatch"]);
  EXPECT_NEAR(j["predicted"]["tokens_per_second"].get<double>(),
              best["tokens_per_second"].get<double>(), 1e-6);
  for (const nlohmann::json& k : c["candidates"]) {
    if (k["fits"].get<bool>()) {
      EXPECT_LE(k["tokens_per_second"].get<double>(), best["tokens_per_second"].get<double>());
    } else {
      EXPECT_FALSE(k["refusal"].get<std::string>().empty());
    }
  }
  // Pinning the schedule keeps it (and mobius has no dispatch to choose).
  o.schedule = "mobius";
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schedule"], "mobius");
  for (const nlohmann::json& k : j["configuration"]["candidates"]) EXPECT_EQ(k["schedule"], "mobius");
  // Text: the chosen one and the runner-up.
  o.json = false;
  o.schedule = "auto";
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Configuration: chosen by simulation among "));
  EXPECT_THAT(r.out, HasSubstr("; runner-up "));
}

// --precision auto picks fp16 on GeForce cards (their tensor cores sum fp16 twice as fast, and
// the runtime's fp16 forward GEMMs do), bf16 where the rates are equal (a tie keeps bf16, which
// needs no loss scaling); a pinned precision stays; resident is no candidate for fp16.
TEST(PlanCommand, PrecisionIsChosenOrPinned) {
  PlanCommandOptions o = Options("llama-3.1-8b-instruct.json", "rtx4090_2s_4sw_8gpu.xml");
  o.batch = 16;
  o.seq = 2048;
  o.microbatch = 2;
  o.precision = "auto";
  o.longest = false;
  o.json = true;
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["job"]["precision"], "fp16");
  double bf16 = 0, fp16 = 0;
  for (const nlohmann::json& k : j["configuration"]["candidates"]) {
    (k["precision"] == "fp16" ? fp16 : bf16) = k["tokens_per_second"].get<double>();
  }
  std::printf("  8x RTX 4090, mobius, microbatch 2: bf16 %.0f, fp16 %.0f tokens/s\n", bf16, fp16);
  EXPECT_GT(fp16, 1.05 * bf16);
  o.precision = "bf16";
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["job"]["precision"], "bf16");
  o.json = false;
  o.precision = "fp16";
  r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("fp16 (dynamic loss scaling"));
  o.schedule = "resident";
  r = RunCommand(o);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("resident"));
  // An H100 sums fp16 no faster: auto keeps bf16.
  PlanCommandOptions h = Options("llama-3.1-8b-instruct.json", "nvlink_dgx_8xh100.xml");
  h.precision = "auto";
  h.longest = false;
  h.json = true;
  r = RunCommand(h);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["job"]["precision"], "bf16");
}

// gpt-oss-20b's released config.json (MXFP4 quantization_config, layer_types, YaRN): planned
// with its totals; RoundPipe publishes 18,122 tokens/s for its full fine-tuning on 8x RTX 4090
// (docs/planner.md has the comparison at batch 128, seq 2048).
TEST(PlanCommand, GptOssIsPlanned) {
  PlanCommandOptions o = Options("gpt-oss-20b.json", "rtx4090_2s_4sw_8gpu.xml");
  o.batch = 16;
  o.seq = 2048;
  o.schedule = "roundrobin";
  o.json = true;
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["parameters"].get<int64_t>(), 20'914'757'184) << j["model"].dump();
  EXPECT_GT(j["predicted"]["tokens_per_second"].get<double>(), 0);
}

TEST(PlanCommand, BadInputExits2WithOneLine) {
  const BadCase cases[] = {
      {"no model", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.model.clear(); },
       "--model DIR|config.json is required"},
      {"missing model", "nope.json", kPaper, nullptr, "nope.json"},
      {"batch", "gpt2.json", kPaper,
       [](PlanCommandOptions& o) { o.batch = 10, o.microbatch = 4; },
       "global batch 10 is not a multiple of the microbatch 4"},
      {"no gpus", "gpt2.json", "cpu_only_1s.xml", nullptr, "0 NVIDIA GPUs"},
      {"gpu list", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.gpus = "0,x"; },
       "--gpus: 'x' is not a GPU index"},
      {"gpu range", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.gpus = "0,8"; },
       "granted GPU 8 does not exist"},
      {"schedule", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.schedule = "gpipe"; },
       "unknown schedule 'gpipe'"},
      {"precision", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.precision = "fp8"; },
       "--precision must be auto, bf16 or fp16 (got \"fp8\")"},
      {"unit fit", "llama-2-7b.json", kPaper,
       [](PlanCommandOptions& o) { o.gpu_memory_gib = 1.5; }, "does not fit on a GPU even alone"},
      {"host ram", "llama-2-7b.json", kPaper,
       [](PlanCommandOptions& o) { o.host_memory_gib = 32; }, "host RAM too small"},
      {"topology", "gpt2.json", "does-not-exist.xml", nullptr, "does-not-exist.xml"},
      {"link scale", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.link_scale = 0; },
       "--link-scale must be > 0 (got 0)"},
      {"lora target", "llama-2-7b.json", kPaper,
       [](PlanCommandOptions& o) { o.lora_targets = "q_proj,c_attn"; },
       "lora.target_modules[1]: \"c_attn\" is not a linear module"},
      {"lora rank", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.lora_rank = -2; },
       "--lora-rank must be >= 1"},
      {"lora staleness", "gpt2.json", kPaper,
       [](PlanCommandOptions& o) { o.lora = true, o.optimizer_staleness = 1; },
       "staleness 1 with LoRA"},
      {"host ram lora", "llama-2-7b.json", kPaper,
       [](PlanCommandOptions& o) { o.host_memory_gib = 32; }, "or LoRA (the frozen base at 2 bytes"},
      {"lora base", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.lora_base = "int8"; },
       "--lora-base must be bf16 or nf4 (got \"int8\")"},
      {"lora base conv1d", "gpt2.json", kPaper,
       [](PlanCommandOptions& o) { o.lora_base = "nf4"; }, "NF4"},
      {"nodes zero", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.nodes = "0"; },
       "--nodes: must be >= 1 (got 0)"},
      {"nodes text", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.nodes = "2,x"; },
       "--nodes: 'x' is not a node count"},
      {"nodes split", "gpt2.json", kPaper, [](PlanCommandOptions& o) { o.nodes = "3"; },
       "--nodes: 3 nodes do not split the global batch of 4 sequences"},
      {"nodes resident", "gpt2.json", kPaper,
       [](PlanCommandOptions& o) { o.nodes = "2", o.schedule = "resident"; },
       "--nodes 2 with --schedule resident"},
      {"internode rate", "gpt2.json", kPaper,
       [](PlanCommandOptions& o) { o.nodes = "2", o.internode_gbps = 0; },
       "--internode-gbps: the inter-node link's rate must be > 0 Gb/s (got 0)"},
      {"internode latency", "gpt2.json", kPaper,
       [](PlanCommandOptions& o) { o.nodes = "2", o.internode_latency_us = -1; },
       "--internode-latency-us: must be >= 0"},
      {"bucket", "gpt2.json", kPaper,
       [](PlanCommandOptions& o) { o.nodes = "2", o.allreduce_bucket_mib = -1; },
       "--allreduce-bucket-mib: must be >= 0"},
  };
  for (const BadCase& c : cases) {
    PlanCommandOptions o = Options(c.model, c.topology);
    if (c.edit) c.edit(o);
    Result r = RunCommand(o);
    EXPECT_EQ(r.code, kExitUsage) << c.name << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.name;
    EXPECT_EQ(Lines(r.err), 1) << c.name << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.name;
    EXPECT_THAT(r.err, HasSubstr("mobius plan: ")) << c.name;
  }
}

}  // namespace
}  // namespace mobius::cli
