// The pipeline runtime on the emulated 8-GPU paper testbed, PCIe-bound (issue 5, Verification):
// measured step time with cross vs sequential mapping, and measured vs the simulator's prediction
// for the same emulated machine.
//
//   1. a seeded Llama-style model whose weights are large relative to one microbatch's compute
//      (bench_setup.h), and a token file;
//   2. calibration: standalone training steps of that model on this machine give the effective
//      FLOP/s and the per-step fixed cost the planner's analytic model is fed (bench_setup.h);
//   3. plans for mapper sequential and cross on the fixture, same partition (by default 12 uniform
//      stages on 8 GPUs; --num_stages=0 --units_per_stage=K lets the partitioner choose under a
//      GPU memory cap of K units per stage slot), links scaled by --link_scale in the simulator
//      (bench_predict.h);
//   4. BuildRunConfig (host/launch/run_builder.h) with the same link scale, and a Launcher run of
//      8 `mobius-worker run` processes (threads 1 each), mappings alternating over --reps;
//   5. per mapping: measured step time (median over the steps after each run's first --warmup),
//      the two predictions, their ratios, bytes per emulated link per step (measured and
//      simulated), and the sequential / cross speedup measured vs predicted. A table on stdout,
//      JSON with --out.
// --schedules=mobius,roundrobin,resident runs every schedule (with each of --mappers) instead of
// mobius alone, the variants interleaved within each rep (rotated one place per rep), and adds
// each schedule's step time relative to mobius (bench_predict.h says which plan each gets). A
// schedule whose plan fails (resident: the model state does not fit the GPU cap) is reported as
// not run; the others still run. bench/pipeline/run_schedules.sh is that comparison.
// A schedule name may carry the runtime's modes: "-async" = training.optimizer_staleness 1,
// "-pool" = dispatch pool (roundrobin), e.g. mobius-async, roundrobin-pool, roundrobin-pool-async;
// bench/pipeline/run_async.sh compares them. "-lora" trains LoRA adapters (rank 16, alpha 32, every
// linear of the blocks) on the frozen bf16 base instead of the whole model, predicted with the
// planner's LoRA mode; bench/pipeline/run_lora.sh compares LoRA with full fine-tuning; "-nf4"
// (with -lora) holds that base's linears in NF4 (QLoRA, adapter.base_quantization nf4),
// bench/pipeline/run_qlora.sh compares it with the bf16 base. "-fp16"
// trains with training.precision fp16 (fp16 weights, activations and backward outputs, dynamic
// loss scaling), predicted from a second calibration of the standalone trainer in fp16 (the CPU
// backend's fp16 kernels have their own speed) with the planner's fp16 mode (no faster fp16
// accumulation on a CPU); bench/pipeline/run_fp16.sh compares it with bf16. With --grad_clip > 0 the runtime's optimizer waits
// for the whole backward (the clip needs the global norm), and the predictions model that.
// --rr_partitioner: roundrobin's partitions (exact | uniform: the planner's own forward and
// backward partitions; shared: the mobius stages for both passes). --gpus=0,1,..: plan and run on
// that subset of the fixture's GPUs (an odd count lets roundrobin reuse slots, schedules.h).
// Everything it reports is EMULATED: CPU processes behind token-bucket links, not GPUs.
//
//   pipeline_bench [--layers=16 --hidden=256 --heads=4 --kv_heads=2 --intermediate=688
//                   --vocab=512 --experts=0 --experts_per_token=2
//                   --seq=32 --batch=4 --microbatch=1 --steps=5 --reps=2
//                   --link_scale=1e-3 --num_stages=12 --units_per_stage=0 --partitioner=exact
//                   --mappers=sequential,cross --schedules=mobius --rr_partitioner=exact
//                   --warmup=1 --gpus=0,1,.. --grad_clip=0 --threads=1 --calib_steps=3
//                   --calib_reps=2 --plan_only --out=FILE --work_dir=DIR --keep
//                   --worker=PATH --topology=FILE]
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/pipeline/bench_flags.h"
#include "bench/pipeline/bench_predict.h"
#include "bench/pipeline/bench_report.h"
#include "bench/pipeline/bench_setup.h"
#include "host/launch/launcher.h"
#include "host/launch/run_builder.h"
#include "host/topology/hwloc_source.h"

namespace mobius::bench {
namespace {

struct Args {
  ModelShape shape;
  int64_t seq = 32, batch = 4, microbatch = 1, steps = 5, warmup = 1;
  int reps = 2, calib_steps = 3, calib_reps = 2, threads = 1, units_per_stage = 0, num_stages = 12;
  double link_scale = 1e-3, grad_clip = 0;
  std::string partitioner = "exact";
  std::vector<std::string> mappers = {"sequential", "cross"};
  std::vector<std::string> schedules = {"mobius"};
  std::string rr_partitioner = "exact";
  std::vector<int> gpus;  // empty: all of the topology's
  bool plan_only = false, keep = false;
  std::string out, work_dir, worker, topology;
};

[[noreturn]] void Usage(const std::string& why) { BenchUsage("pipeline_bench", why); }

// A --schedules entry: a schedule the runtime runs, optionally with "-pool" (roundrobin),
// "-async" (optimizer staleness 1; not resident), "-lora" (not resident, not async) and "-fp16"
// (not resident).
struct Variant {
  std::string schedule;
  int staleness = 0;
  std::string dispatch = "static";
  bool lora = false;
  bool nf4 = false;  // with lora: the base's linears in NF4
  bool fp16 = false;
};
absl::StatusOr<Variant> ParseVariant(const std::string& name) {
  std::vector<std::string> parts = absl::StrSplit(name, '-');
  Variant v;
  v.schedule = parts.front();
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "async") {
      v.staleness = 1;
    } else if (parts[i] == "pool") {
      v.dispatch = "pool";
    } else if (parts[i] == "lora") {
      v.lora = true;
    } else if (parts[i] == "nf4") {
      v.nf4 = true;
    } else if (parts[i] == "fp16") {
      v.fp16 = true;
    } else {
      v.schedule.clear();
    }
  }
  const bool known = v.schedule == "mobius" || v.schedule == "roundrobin" ||
                     v.schedule == "resident";
  if (!known || (v.dispatch == "pool" && v.schedule != "roundrobin") ||
      (v.staleness == 1 && v.schedule == "resident") ||
      (v.lora && (v.schedule == "resident" || v.staleness == 1)) || (v.nf4 && !v.lora) ||
      (v.fp16 && v.schedule == "resident")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--schedules: '", name, "' is not mobius, roundrobin or resident (the schedules the "
        "runtime runs), optionally with -pool (roundrobin), -async (not resident), -lora "
        "(not resident, not with -async), -nf4 (with -lora) and -fp16 (not resident)"));
  }
  return v;
}
int64_t Int(const std::string& key, const std::string& v) {
  return BenchCount("pipeline_bench", key, v);
}
double Real(const std::string& key, const std::string& v) {
  return BenchReal("pipeline_bench", key, v);
}

Args Parse(int argc, char** argv) {
  Args a;
  a.topology =
      std::string(MOBIUS_SOURCE_DIR) + "/test/data/topology/paper_testbed_2s_2sw_8x3090.xml";
  std::error_code ec;
  a.worker = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "mobius-worker";
  std::map<std::string, int64_t*> ints = {{"--layers", &a.shape.layers},
                                          {"--hidden", &a.shape.hidden},
                                          {"--heads", &a.shape.heads},
                                          {"--kv_heads", &a.shape.kv_heads},
                                          {"--intermediate", &a.shape.intermediate},
                                          {"--vocab", &a.shape.vocab},
                                          {"--experts", &a.shape.experts},
                                          {"--experts_per_token", &a.shape.experts_per_token},
                                          {"--seq", &a.seq},
                                          {"--batch", &a.batch},
                                          {"--microbatch", &a.microbatch},
                                          {"--steps", &a.steps},
                                          {"--warmup", &a.warmup}};
  std::map<std::string, int*> small = {{"--reps", &a.reps},
                                       {"--calib_steps", &a.calib_steps},
                                       {"--calib_reps", &a.calib_reps},
                                       {"--threads", &a.threads},
                                       {"--units_per_stage", &a.units_per_stage},
                                       {"--num_stages", &a.num_stages}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (auto it = ints.find(key); it != ints.end()) {
      *it->second = Int(key, value);
    } else if (auto s = small.find(key); s != small.end()) {
      *s->second = static_cast<int>(std::min<int64_t>(Int(key, value), 1 << 20));
    } else if (key == "--link_scale") {
      a.link_scale = Real(key, value);
    } else if (key == "--grad_clip") {
      a.grad_clip = Real(key, value);
    } else if (key == "--partitioner") {
      a.partitioner = value;
    } else if (key == "--mappers") {
      a.mappers = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (key == "--schedules") {
      a.schedules = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (key == "--gpus") {
      for (absl::string_view g : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        a.gpus.push_back(static_cast<int>(std::min<int64_t>(Int(key, std::string(g)), 1 << 20)));
      }
    } else if (key == "--rr_partitioner") {
      a.rr_partitioner = value;
    } else if (key == "--plan_only") {
      a.plan_only = true;
    } else if (key == "--keep") {
      a.keep = true;
    } else if (key == "--out") {
      a.out = value;
    } else if (key == "--work_dir") {
      a.work_dir = value;
    } else if (key == "--worker") {
      a.worker = value;
    } else if (key == "--topology") {
      a.topology = value;
    } else {
      Usage(absl::StrCat("unknown argument ", arg));
    }
  }
  if (a.microbatch < 1 || a.batch < a.microbatch || a.batch % a.microbatch != 0) {
    Usage(absl::StrCat("--batch (", a.batch, ") must be a positive multiple of --microbatch (",
                       a.microbatch, ")"));
  }
  if (a.warmup < 1 || a.steps <= a.warmup) {
    Usage("--warmup must be >= 1 (the first step includes start-up) and < --steps");
  }
  if (a.reps < 1 || a.calib_steps < 1 || a.calib_reps < 1 || a.threads < 1) {
    Usage("--reps, --calib_steps, --calib_reps and --threads must be >= 1");
  }
  if (!(a.link_scale > 0)) Usage("--link_scale must be positive");
  if (a.mappers.empty()) Usage("--mappers is empty");
  if (a.schedules.empty()) Usage("--schedules is empty");
  for (const std::string& sched : a.schedules) {
    if (!ParseVariant(sched).ok()) Usage(std::string(ParseVariant(sched).status().message()));
  }
  if (a.rr_partitioner == "shared" && a.num_stages == 0) {
    Usage("--rr_partitioner=shared needs --num_stages > 0");
  }
  return a;
}

double LoadAverage() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

train::TrainerOptions Training(const Args& a, const BenchInputs& in) {
  return BenchTrainingOptions(in, a.steps, a.batch, a.microbatch, a.seq, a.threads, a.grad_clip);
}

absl::StatusOr<MappingRun> RunOnce(const Args& a, const BenchInputs& in,
                                   const topology::Topology& topology,
                                   const topology::TopologyFacts& facts, const Prediction& pred,
                                   int rep, const std::string& work) {
  const std::string job = absl::StrCat("bench-", pred.name, "-", rep);
  launch::EmulationOptions em;
  em.enabled = true;
  em.link_scale = a.link_scale;
  train::TrainerOptions training = Training(a, in);
  training.optimizer_staleness = pred.optimizer_staleness;
  training.precision = pred.precision;
  if (pred.lora.enabled()) {
    training.adapter.type = "lora";
    training.adapter.rank = pred.lora.rank;
    training.adapter.alpha = 2.0 * pred.lora.rank;
    training.adapter.target_modules = pred.lora.target_modules;
    if (pred.lora.base_nf4) training.adapter.base_quantization = "nf4";
  }
  absl::StatusOr<runtime::RunConfig> run =
      launch::BuildRunConfig(job, training, pred.report.plan, topology, facts, em);
  if (!run.ok()) return run.status();
  if (runtime::Traits(run->schedule).separate_pass_partitions) run->dispatch = pred.dispatch;
  runtime::LaunchOptions lo;
  lo.run = *run;
  lo.worker_binary = a.worker;
  lo.run_dir = work + "/" + job;
  lo.on_step = [&](const runtime::StepReport& s) {
    std::fprintf(stderr, "  [%s rep %d] %s\n", pred.name.c_str(), rep,
                 runtime::FormatStepReport(s).c_str());
  };
  MappingRun out;
  out.name = pred.name;
  out.rep = rep;
  out.load_average = LoadAverage();
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<runtime::Launcher>> launcher = runtime::Launcher::Start(lo);
  if (!launcher.ok()) return launcher.status();
  runtime::LaunchResult result = (*launcher)->Wait();
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!result.status.ok()) {
    return absl::Status(result.status.code(),
                        absl::StrCat("pipeline run ", job, ": ", result.status.message()));
  }
  out.steps = std::move(result.steps);
  out.links = std::move(result.links);
  out.rank_links = run->rank_links;
  out.link_capacity.clear();
  for (const runtime::EmulatedLink& l : run->links) out.link_capacity.push_back(l.bytes_per_second);
  return out;
}

// Variant names: the mapper when only mappers vary, the schedule when only schedules do.
std::string VariantName(const Args& a, const std::string& schedule, const std::string& mapper) {
  if (a.schedules.size() > 1 && a.mappers.size() > 1) return absl::StrCat(schedule, "-", mapper);
  return a.schedules.size() > 1 ? schedule : mapper;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pipeline_bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  absl::StatusOr<topology::LoadedTopology> loaded =
      topology::MakeHwlocXmlFileSource(a.topology)->Load();
  if (!loaded.ok()) return Fail(loaded.status());
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);
  absl::StatusOr<std::unique_ptr<BenchWorkDir>> work_dir =
      BenchWorkDir::Make(a.work_dir, "pipeline_bench", a.keep);
  if (!work_dir.ok()) return Fail(work_dir.status());
  const std::string& work = (*work_dir)->path();

  // Enough tokens that no run wraps an epoch (the loader shuffles sequences within one).
  const int64_t tokens = (a.steps + 2) * a.batch * (a.seq + 1) * 2 + 4096;
  absl::StatusOr<BenchInputs> in = WriteBenchInputs(work, a.shape, a.seq, tokens);
  if (!in.ok()) return Fail(in.status());
  std::fprintf(stderr,
               "model: %s L=%lld C=%lld H=%lld KV=%lld I=%lld V=%lld E=%lld k=%lld, %.2fM "
               "params; work dir %s\n",
               a.shape.family(), static_cast<long long>(a.shape.layers), static_cast<long long>(a.shape.hidden),
               static_cast<long long>(a.shape.heads), static_cast<long long>(a.shape.kv_heads),
               static_cast<long long>(a.shape.intermediate), static_cast<long long>(a.shape.vocab),
               static_cast<long long>(a.shape.experts),
               static_cast<long long>(a.shape.experts_per_token), in->parameters / 1e6,
               work.c_str());

  std::fprintf(stderr, "calibrating: standalone steps with 1 and %lld microbatches...\n",
               static_cast<long long>(std::max<int64_t>(2, a.batch / a.microbatch)));
  absl::StatusOr<Calibration> cal =
      CalibrateStandalone(*in, Training(a, *in), a.calib_steps, a.calib_reps);
  if (!cal.ok()) return Fail(cal.status());
  // fp16 variants: the standalone trainer's speed in fp16 (the CPU backend's own fp16 kernels).
  std::optional<Calibration> cal16;
  for (const std::string& sched : a.schedules) {
    if (!ParseVariant(sched)->fp16 || cal16) continue;
    train::TrainerOptions t16 = Training(a, *in);
    t16.precision = "fp16";
    std::fprintf(stderr, "calibrating fp16...\n");
    absl::StatusOr<Calibration> c = CalibrateStandalone(*in, t16, a.calib_steps, a.calib_reps);
    if (!c.ok()) return Fail(c.status());
    cal16 = *std::move(c);
    std::fprintf(stderr, "calibration: bf16 %.2f GFLOP/s, fp16 %.2f GFLOP/s (%.2fx)\n",
                 cal->effective_flops_per_s / 1e9, cal16->effective_flops_per_s / 1e9,
                 cal16->effective_flops_per_s / cal->effective_flops_per_s);
  }

  planner::JobShape job;
  job.global_batch = a.batch;
  job.microbatch = a.microbatch;
  job.seq_len = a.seq;
  PredictOptions po;
  po.partitioner = a.partitioner;
  po.units_per_stage = a.units_per_stage;
  po.num_stages = a.num_stages;
  po.link_scale = a.link_scale;
  po.effective_flops_per_s = cal->effective_flops_per_s;
  po.optimizer_seconds_per_billion_params = cal->fixed_seconds_per_billion_params;
  // NF4 variants: what a dequantise costs here (the CPU kernel is compute-bound, not a copy).
  for (const std::string& sched : a.schedules) {
    if (!ParseVariant(sched)->nf4) continue;
    absl::StatusOr<double> rate =
        MeasureNf4DequantizeRate(a.shape.hidden * a.shape.intermediate, a.threads);
    if (!rate.ok()) return Fail(rate.status());
    po.nf4_dequantize_values_per_s = *rate;
    std::fprintf(stderr, "calibration: NF4 dequantise %.0f M values/s (%d thread%s)\n",
                 *rate / 1e6, a.threads, a.threads == 1 ? "" : "s");
    break;
  }
  po.roundrobin_partitioner = a.rr_partitioner;
  po.gpus = a.gpus;
  po.optimizer_after_backward = a.grad_clip > 0;
  std::vector<Prediction> preds;
  std::vector<std::string> not_run;
  for (const std::string& sched : a.schedules) {
    const Variant v = *ParseVariant(sched);
    PredictOptions vo = po;
    vo.optimizer_staleness = v.staleness;
    vo.dispatch = v.dispatch;
    planner::JobShape vjob = job;
    if (v.fp16) {
      vo.effective_flops_per_s = cal16->effective_flops_per_s;
      vo.optimizer_seconds_per_billion_params = cal16->fixed_seconds_per_billion_params;
      vjob.dtype = "fp16";  // no faster fp16 accumulation on the CPU backend
    }
    if (v.lora) {
      vo.lora.rank = 16;
      vo.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj",
                                "gate_proj", "up_proj", "down_proj"};
      vo.lora.base_nf4 = v.nf4;
    }
    for (const std::string& m : a.mappers) {
      absl::StatusOr<Prediction> p =
          Predict(in->description, loaded->topology, facts, vjob, vo, v.schedule, m);
      if (!p.ok() && v.schedule != "mobius" && absl::IsFailedPrecondition(p.status())) {
        not_run.push_back(std::string(p.status().message()));  // e.g. resident does not fit
        continue;
      }
      if (!p.ok()) return Fail(p.status());
      p->name = VariantName(a, sched, m);
      preds.push_back(*std::move(p));
    }
  }
  for (const std::string& why : not_run) std::fprintf(stderr, "not run: %s\n", why.c_str());

  std::vector<MappingRun> runs;
  const double load_before = LoadAverage();
  if (!a.plan_only) {
    // Interleaved, and rotated one place per rep, so that drifting load hits every variant alike.
    const size_t n = preds.size();
    for (int rep = 0; rep < a.reps; ++rep) {
      for (size_t i = 0; i < n; ++i) {
        const Prediction& p = preds[(i + static_cast<size_t>(rep)) % n];
        std::fprintf(stderr, "running %s (rep %d of %d; load %.2f)...\n", p.name.c_str(), rep + 1,
                     a.reps, LoadAverage());
        absl::StatusOr<MappingRun> r = RunOnce(a, *in, loaded->topology, facts, p, rep, work);
        if (!r.ok()) return Fail(r.status());
        runs.push_back(*std::move(r));
      }
    }
  }

  BenchSetup setup;
  setup.topology = a.topology;
  setup.model = absl::StrCat(
      a.shape.experts > 0 ? "qwen3_moe" : "llama", " L=", a.shape.layers, " C=", a.shape.hidden,
      " H=", a.shape.heads, " KV=", a.shape.kv_heads, " I=", a.shape.intermediate,
      " V=", a.shape.vocab,
      a.shape.experts > 0 ? absl::StrCat(" E=", a.shape.experts, " k=", a.shape.experts_per_token)
                          : "");
  setup.parameters = in->parameters;
  setup.seq = a.seq;
  setup.batch = a.batch;
  setup.microbatch = a.microbatch;
  setup.gpus = absl::StrJoin(a.gpus, ",");
  setup.steps = a.steps;
  setup.warmup = a.warmup;
  setup.reps = a.reps;
  setup.threads = a.threads;
  setup.link_scale = a.link_scale;
  setup.grad_clip = a.grad_clip;
  setup.units_per_stage = a.units_per_stage;
  setup.num_stages = a.num_stages;
  setup.partitioner = preds.front().report.plan.partitioner;  // "uniform" with --num_stages
  setup.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  BenchResult result = Summarize(setup, *cal, preds, runs);
  result.not_run = not_run;
  result.load_before = load_before;
  result.load_after = LoadAverage();
  PrintReport(result, stdout);
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << ResultJson(result) << "\n";
    if (!f) return Fail(absl::InternalError(absl::StrCat("cannot write ", a.out)));
    std::fprintf(stderr, "wrote %s\n", a.out.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace mobius::bench

int main(int argc, char** argv) { return mobius::bench::Main(argc, argv); }
