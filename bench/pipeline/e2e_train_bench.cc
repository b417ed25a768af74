// End-to-end training throughput of the pipeline runtime on real devices, no link emulation: the
// Mobius side of the GPU kit's training table (docs/gpu.md; PyTorch and RoundPipe rows come from
// bench/gpu/torch_train.py in the same schema, bench/gpu/train_table.py renders them together).
//
//   1. a seeded model of a named shape (gpt2-124m = GPT-2 small; llama-1b = a Llama-3.2-1B-like
//      stack: 16 layers, C 2048, 32 heads, 8 KV heads, I 8192, vocab 32000, 1.1B parameters;
//      llama-long = 2 layers, C 1024, 16/4 heads, I 4096, Llama 3's vocabulary 128256 (untied:
//      293M parameters), for
//      32K-token sequences (the token-chunked head and MLP, issue 30);
//      tiny-gpt2 / tiny-llama for checks on the CPU) and a token file of random ids;
//   2. a plan from the planner (host/planner/api/make_plan.h) for one GPU of --topology (default
//      the 8x RTX 4090 fixture, GPU 0: a 24 GB consumer card) with every GPU's memory capped at
//      --cap_gib, schedule --schedule (mobius: stages streamed through two slots; resident: the
//      whole model and its optimizer on the GPU, when it fits the cap);
//   3. BuildRunConfig without emulation, backend --backend (cuda on the GPU machine; cpu to check
//      the driver here), each rank's device memory arena = the cap, and one Launcher run of
//      `mobius-worker run` processes;
//      With --measure_profile, `mobius-worker profile` first measures the model's units and the
//      copy bandwidth on that backend, and the plan (and its predicted step) uses that profile;
//   4. one JSON line (--out, appended; and stdout): tokens/s from the median step time after
//      --warmup steps, MFU = tokens/s x (6 P + 12 L C T) / (--peak_tflops x 1e12) (the formula
//      of bench/gpu/train_flops.py), the plan's predicted step, stages, losses.
// A plan that does not fit (e.g. resident above the cap) gives a record with status "not run" and
// the planner's reason, exit 0, so the kit goes on; bad arguments exit 2, a failed run exits 1
// after writing a "failed" record.
//
//   e2e_train_bench --model=gpt2-124m --schedule=mobius --seq=1024 --batch=8 --microbatch=4
//                   --steps=6 --warmup=2 --cap_gib=24 --backend=cuda --gpu_name="NVIDIA H200"
//                   --peak_tflops=989.4 [--precision=bf16|fp16 --measure_profile --num_stages=0
//                   --threads=4 --topology=F --gpu=0 --worker=PATH --work_dir=DIR --out=FILE]
// --precision=fp16 trains with training.precision fp16 (record mode "SCHEDULE-fp16"); its plan is
// the planner's fp16 mode (fp16 sums where the GPU's name says GeForce); a measured profile is
// measured in bf16 (the worker's profile verb has no precision yet).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/pipeline/bench_flags.h"
#include "bench/pipeline/bench_setup.h"
#include "common/host_memory.h"
#include "common/run/profile_runner.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "host/launch/launcher.h"
#include "host/launch/run_builder.h"
#include "host/planner/api/make_plan.h"
#include "host/planner/measured_profile.h"
#include "host/topology/hwloc_source.h"
#include "worker/checkpoint/model_init.h"

namespace mobius::bench {
namespace {

struct Args {
  std::string model = "tiny-llama", schedule = "mobius", backend = "cuda";
  std::string precision = "bf16";  // training.precision: bf16 | fp16
  int64_t seq = 1024, batch = 8, microbatch = 4, steps = 6, warmup = 2;
  int num_stages = 0, threads = 4, gpu = 0;
  double cap_gib = 24, peak_tflops = 0;
  bool measure_profile = false;
  std::string gpu_name, topology, worker, work_dir, out;
};

[[noreturn]] void Usage(const std::string& why) { BenchUsage("e2e_train_bench", why); }
int64_t Count(const std::string& key, const std::string& v) {
  return BenchCount("e2e_train_bench", key, v);
}
double Real(const std::string& key, const std::string& v) {
  return BenchReal("e2e_train_bench", key, v);
}

Args Parse(int argc, char** argv) {
  Args a;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  a.worker = (exe.parent_path() / "mobius-worker").string();
  const char* src = std::getenv("MOBIUS_SOURCE_DIR");
  a.topology =
      std::string(src ? src : MOBIUS_SOURCE_DIR) + "/test/data/topology/rtx4090_2s_4sw_8gpu.xml";
  std::map<std::string, int64_t*> counts = {{"--seq", &a.seq},
                                            {"--batch", &a.batch},
                                            {"--microbatch", &a.microbatch},
                                            {"--steps", &a.steps},
                                            {"--warmup", &a.warmup}};
  std::map<std::string, int*> small = {
      {"--num_stages", &a.num_stages}, {"--threads", &a.threads}, {"--gpu", &a.gpu}};
  std::map<std::string, std::string*> strings = {
      {"--model", &a.model},       {"--schedule", &a.schedule},
      {"--backend", &a.backend},   {"--gpu_name", &a.gpu_name},
      {"--topology", &a.topology}, {"--worker", &a.worker},
      {"--work_dir", &a.work_dir}, {"--out", &a.out},
      {"--precision", &a.precision}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (auto c = counts.find(key); c != counts.end()) {
      *c->second = Count(key, value);
    } else if (auto s = small.find(key); s != small.end()) {
      *s->second = static_cast<int>(std::min<int64_t>(Count(key, value), 1 << 20));
    } else if (auto t = strings.find(key); t != strings.end()) {
      *t->second = value;
    } else if (key == "--cap_gib") {
      a.cap_gib = Real(key, value);
    } else if (key == "--peak_tflops") {
      a.peak_tflops = Real(key, value);
    } else if (key == "--measure_profile") {
      a.measure_profile = true;
    } else {
      Usage(absl::StrCat("unknown argument ", arg));
    }
  }
  if (a.microbatch < 1 || a.batch < a.microbatch || a.batch % a.microbatch != 0) {
    Usage(absl::StrCat("--batch (", a.batch, ") must be a positive multiple of --microbatch (",
                       a.microbatch, ")"));
  }
  if (a.seq < 1) Usage("--seq must be >= 1");
  if (a.warmup < 1 || a.steps <= a.warmup) {
    Usage("--warmup must be >= 1 (the first step includes start-up) and < --steps");
  }
  if (a.threads < 1) Usage("--threads must be >= 1");
  if (!(a.cap_gib > 0)) Usage("--cap_gib must be positive");
  if (a.precision != "bf16" && a.precision != "fp16") {
    Usage(absl::StrCat("--precision: '", a.precision, "' is not bf16 or fp16"));
  }
  if (a.precision == "fp16" && a.schedule == "resident") {
    Usage("--precision=fp16 runs with --schedule mobius or roundrobin (resident trains in bf16)");
  }
  if (a.schedule != "mobius" && a.schedule != "resident" && a.schedule != "roundrobin") {
    Usage(absl::StrCat("--schedule: '", a.schedule, "' is not mobius, resident or roundrobin"));
  }
  if (a.backend != "cuda" && a.backend != "cpu" && a.backend != "auto") {
    Usage(absl::StrCat("--backend: '", a.backend, "' is not cuda, cpu or auto"));
  }
  return a;
}

// The named shapes (the same as bench/gpu/torch_train.py's).
absl::StatusOr<model::ModelConfig> ModelFor(const std::string& name, int64_t seq) {
  checkpoint::SizeOverrides o;
  if (name == "gpt2-124m") {
    o.max_positions = std::max<int64_t>(1024, seq);
    return checkpoint::PresetConfig(model::Family::kGpt2, "small", o);
  }
  // Llama shapes: layers, hidden, heads, KV heads, intermediate, vocabulary, positions at least.
  auto llama = [&](int64_t layers, int64_t hidden, int64_t heads, int64_t kv, int64_t inter,
                   int64_t vocab, int64_t positions) {
    o.layers = layers, o.hidden = hidden, o.heads = heads, o.kv_heads = kv;
    o.intermediate = inter, o.vocab = vocab, o.max_positions = std::max<int64_t>(positions, seq);
    return checkpoint::PresetConfig(model::Family::kLlama, "small", o);
  };
  if (name == "llama-1b") return llama(16, 2048, 32, 8, 8192, 32000, 2048);
  // Long sequences (issue 30): Llama 3's vocabulary, 2 short layers.
  if (name == "llama-long") return llama(2, 1024, 16, 4, 4096, 128256, 32768);
  if (name == "tiny-gpt2" || name == "tiny-llama") {
    o.max_positions = std::max<int64_t>(256, seq);
    return checkpoint::PresetConfig(
        name == "tiny-gpt2" ? model::Family::kGpt2 : model::Family::kLlama, "tiny", o);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--model: '", name,
                   "' is not gpt2-124m, llama-1b, llama-long, tiny-gpt2 or tiny-llama"));
}

// `mobius-worker profile` of the written model on the bench's backend (its stdout, one line naming
// the cache file, goes to our stderr), read back as the planner's measured profile: the plan and
// its predicted step then describe the device the run measures, not the fixture's analytic GPU.
absl::StatusOr<planner::Profile> MeasureProfile(const Args& a, const BenchInputs& in,
                                                const std::string& work, int64_t cap) {
  planner::WorkerProfileRequest req;
  req.worker = a.worker;
  req.model = in.model_dir;
  req.microbatch = a.microbatch;
  req.seq = a.seq;
  req.backend = a.backend;
  req.cache_dir = work + "/profiles";
  req.extra_args = {absl::StrCat("--device_memory_bytes=", cap),
                    absl::StrCat("--threads=", a.threads)};
  MOBIUS_ASSIGN_OR_RETURN(planner::MeasuredProfile measured, planner::RunWorkerProfile(req));
  return planner::MeasuredToProfile(measured, in.description);
}

nlohmann::json BaseRecord(const Args& a) {
  nlohmann::json r;
  r["bench"] = "train";
  r["impl"] = "mobius";
  r["mode"] = a.precision == "fp16" ? a.schedule + "-fp16" : a.schedule;
  r["precision"] = a.precision;
  r["model"] = a.model;
  r["seq"] = a.seq;
  r["batch"] = a.batch;
  r["microbatch"] = a.microbatch;
  r["backend"] = a.backend;
  r["gpu"] = a.gpu_name;
  r["cap_gib"] = a.cap_gib;
  r["peak_tflops"] = a.peak_tflops > 0 ? nlohmann::json(a.peak_tflops) : nlohmann::json();
  r["mfu"] = nullptr;
  r["peak_device_gib"] = nullptr;
  r["status"] = "ok";
  r["reason"] = "";
  return r;
}

int Emit(const Args& a, const nlohmann::json& r, int rc) {
  const std::string line = r.dump();
  std::printf("%s\n", line.c_str());
  if (!a.out.empty()) {
    std::ofstream f(a.out, std::ios::app);
    f << line << "\n";
    if (!f) {
      std::fprintf(stderr, "e2e_train_bench: cannot write %s\n", a.out.c_str());
      return 1;
    }
  }
  return rc;
}

int Main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  nlohmann::json rec = BaseRecord(a);
  auto fail = [&](const std::string& status, const absl::Status& why) {
    rec["status"] = status;
    // One line for the table: a worker's "error:" line when the launcher quotes its log.
    const std::string message(why.message());
    std::string reason = message.substr(0, message.find('\n'));
    for (absl::string_view line : absl::StrSplit(message, '\n')) {
      if (absl::StrContains(line, "error:")) reason = std::string(absl::StripAsciiWhitespace(line));
    }
    rec["reason"] = reason;
    std::fprintf(stderr, "e2e_train_bench: %s: %s\n", status.c_str(),
                 rec["reason"].get<std::string>().c_str());
    return Emit(a, rec, status == "failed" ? 1 : 0);
  };
  absl::StatusOr<model::ModelConfig> config = ModelFor(a.model, a.seq);
  if (!config.ok()) Usage(std::string(config.status().message()));

  absl::StatusOr<std::unique_ptr<BenchWorkDir>> work_dir =
      BenchWorkDir::Make(a.work_dir, "e2e_train_bench", /*keep=*/false);
  if (!work_dir.ok()) Usage(std::string(work_dir.status().message()));
  const std::string& work = (*work_dir)->path();

  absl::StatusOr<topology::LoadedTopology> loaded =
      topology::MakeHwlocXmlFileSource(a.topology)->Load();
  if (!loaded.ok()) return fail("failed", loaded.status());
  // The plan is for one GPU of --cap_gib: the cap replaces the fixture's card size, so that a
  // cap above it (the resident row on a large GPU) is the memory planned for, not the 24 GB card.
  for (topology::Gpu& g : loaded->topology.gpus) {
    g.memory_bytes = static_cast<uint64_t>(a.cap_gib * (int64_t{1} << 30));
  }
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);

  const int64_t tokens = (a.steps + 2) * a.batch * (a.seq + 1) + 4096;
  const auto t_init = std::chrono::steady_clock::now();
  absl::StatusOr<BenchInputs> in = WriteBenchInputsFor(work, *config, tokens);
  if (!in.ok()) return fail("failed", in.status());
  std::fprintf(stderr, "e2e_train_bench: %s, %.1fM parameters, written in %.1f s to %s\n",
               a.model.c_str(), in->parameters / 1e6,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_init).count(),
               work.c_str());
  rec["params"] = in->parameters;
  rec["layers"] = in->config.num_layers;
  rec["hidden"] = in->config.hidden_size;

  const int64_t cap = static_cast<int64_t>(a.cap_gib * (int64_t{1} << 30));
  planner::JobShape job;
  job.global_batch = a.batch;
  job.microbatch = a.microbatch;
  job.seq_len = a.seq;
  // fp16 sums in fp16 where the runtime does (CudaBackend::half_accumulate_faster: GeForce).
  job.dtype = a.precision;
  job.fp16_accumulate =
      a.precision == "fp16" && a.gpu_name.find("GeForce") != std::string::npos;
  planner::PlanOptions po;
  po.schedule = *runtime::ParseSchedule(a.schedule);  // checked with the flags above
  po.gpus = {a.gpu};
  po.num_stages = a.num_stages;
  po.gpu_memory_bytes = cap;
  if (absl::StatusOr<HostMemory> host = ReadHostMemory(); host.ok()) {
    po.host_memory_bytes = host->capacity_bytes();  // this machine's, not the fixture's
  }
  po.compare = false;
  rec["profile"] = "analytic";
  if (a.measure_profile) {
    absl::StatusOr<planner::Profile> measured = MeasureProfile(a, *in, work, cap);
    if (!measured.ok()) return fail("failed", measured.status());
    po.profile = *std::move(measured);
    rec["profile"] = "measured";
  }
  // The CPU backend's "device" memory is host memory (no CUDA context to reserve for).
  po.devices_in_host_memory = a.backend == "cpu";
  absl::StatusOr<planner::PlanReport> plan =
      planner::MakePlan(in->description, loaded->topology, facts, job, po);
  if (!plan.ok()) return fail("not run", plan.status());
  rec["stages"] = plan->plan.num_stages();
  rec["predicted_step_s"] = plan->step_seconds;
  rec["predicted_device"] = plan->device;
  rec["predicted_device_gib"] = plan->plan.memory.max_gpu_bytes / double(int64_t{1} << 30);
  rec["predicted_host_gib"] = plan->plan.memory.host_bytes / double(int64_t{1} << 30);

  train::TrainerOptions t;
  t.model_dir = in->model_dir;
  t.data_path = in->data_path;
  t.steps = a.steps;
  t.batch = a.batch;
  t.microbatch = a.microbatch;
  t.seq = a.seq;
  t.lr = 1e-4;
  t.schedule = "constant";
  t.weight_decay = 0.1;
  t.threads = a.threads;
  t.device_memory_bytes = static_cast<uint64_t>(cap);
  t.precision = a.precision;
  // No checkpoint: the run's last step would include writing it (a 1.1B model's master weights
  // and moments, seconds), and the median over few timed steps would take it in.
  launch::EmulationOptions em;
  em.enabled = false;
  absl::StatusOr<runtime::RunConfig> run = launch::BuildRunConfig(
      "e2e-" + a.model + "-" + a.schedule, t, plan->plan, loaded->topology, facts, em);
  if (!run.ok()) return fail("failed", run.status());
  run->backend = a.backend;
  run->rank_device.assign(run->rank_gpu.size(), 0);  // the one GPU of the machine it runs on
  runtime::LaunchOptions lo;
  lo.run = *run;
  lo.worker_binary = a.worker;
  lo.run_dir = work + "/run";
  lo.on_step = [&](const runtime::StepReport& s) {
    std::fprintf(stderr, "  [%s %s] %s\n", a.model.c_str(), a.schedule.c_str(),
                 runtime::FormatStepReport(s).c_str());
  };
  absl::StatusOr<std::unique_ptr<runtime::Launcher>> launcher = runtime::Launcher::Start(lo);
  if (!launcher.ok()) return fail("failed", launcher.status());
  runtime::LaunchResult result = (*launcher)->Wait();
  if (!result.status.ok()) return fail("failed", result.status);

  std::vector<double> timed;
  std::vector<float> losses;
  for (const runtime::StepReport& s : result.steps) {
    losses.push_back(s.loss);
    if (s.step > a.warmup) timed.push_back(s.step_seconds);
  }
  if (timed.empty()) return fail("failed", absl::InternalError("no timed steps were reported"));
  const double median = Median(timed);
  const double tokens_per_s = static_cast<double>(a.batch * a.seq) / median;
  const double flops_per_token = 6.0 * static_cast<double>(in->parameters) +
                                 12.0 * static_cast<double>(in->config.num_layers) *
                                     static_cast<double>(in->config.hidden_size) *
                                     static_cast<double>(a.seq);
  rec["steps_timed"] = static_cast<int64_t>(timed.size());
  rec["step_s_median"] = median;
  rec["step_s_min"] = *std::min_element(timed.begin(), timed.end());
  rec["step_s_max"] = *std::max_element(timed.begin(), timed.end());
  rec["tokens_per_s"] = tokens_per_s;
  rec["flops_per_token"] = flops_per_token;
  if (a.peak_tflops > 0) rec["mfu"] = tokens_per_s * flops_per_token / (a.peak_tflops * 1e12);
  rec["losses"] = losses;
  return Emit(a, rec, 0);
}

}  // namespace
}  // namespace mobius::bench

int main(int argc, char** argv) { return mobius::bench::Main(argc, argv); }
