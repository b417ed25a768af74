#include "bench/pipeline/bench_setup.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include <stdlib.h>

#include "absl/strings/str_cat.h"
#include "common/numeric/bf16.h"
#include "common/numeric/nf4.h"
#include "common/status_macros.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/checkpoint/model_init.h"
#include "common/data/token_file.h"

namespace mobius::bench {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

absl::StatusOr<BenchInputs> WriteBenchInputs(const std::string& dir, const ModelShape& shape,
                                             int64_t seq_len, int64_t num_tokens) {
  checkpoint::SizeOverrides o;
  o.layers = shape.layers;
  o.hidden = shape.hidden;
  o.heads = shape.heads;
  o.kv_heads = shape.kv_heads;
  o.intermediate = shape.intermediate;
  o.vocab = shape.vocab;
  o.max_positions = std::max<int64_t>(256, seq_len);
  if (shape.experts > 0) {
    o.experts = shape.experts;
    o.experts_per_token = shape.experts_per_token;
  }
  MOBIUS_ASSIGN_OR_RETURN(
      model::ModelConfig config,
      checkpoint::PresetConfig(shape.experts > 0 ? model::Family::kQwen3Moe : model::Family::kLlama,
                               "tiny", o));
  return WriteBenchInputsFor(dir, config, num_tokens);
}

absl::StatusOr<BenchInputs> WriteBenchInputsFor(const std::string& dir,
                                                const model::ModelConfig& config,
                                                int64_t num_tokens) {
  BenchInputs in;
  in.model_dir = dir + "/model";
  in.data_path = dir + "/data.tok";
  std::error_code ec;
  std::filesystem::create_directories(in.model_dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(in.model_dir, ": ", ec.message()));
  in.config = config;
  const reference::Parameters params = checkpoint::InitModelParameters(in.config, /*seed=*/1);
  MOBIUS_RETURN_IF_ERROR(checkpoint::WriteModelDirectory(in.model_dir, in.config, params, {}));
  MOBIUS_ASSIGN_OR_RETURN(in.description, model::DescribeModel(in.config));
  in.parameters = model::TotalParameters(in.description);

  // Random ids: the benchmark measures time, not learning; seeded so runs see the same batches.
  const int64_t vocab = in.config.vocab_size;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab) - 1);
  std::vector<data::TokenizedDoc> docs;
  constexpr int64_t kDocTokens = 4096;
  for (int64_t left = num_tokens; left > 0; left -= kDocTokens) {
    data::TokenizedDoc d;
    d.ids.resize(static_cast<size_t>(std::min(left, kDocTokens)));
    for (int32_t& t : d.ids) t = id(rng);
    docs.push_back(std::move(d));
  }
  MOBIUS_RETURN_IF_ERROR(data::WriteTokenFile(in.data_path, docs, vocab));
  in.num_tokens = num_tokens;
  return in;
}

namespace {

struct StandaloneRun {
  std::vector<double> timed_seconds;  // steps after the first
  std::vector<float> losses;          // every step
};

absl::StatusOr<StandaloneRun> RunStandalone(train::TrainerOptions o) {
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<train::StandaloneTrainer> trainer,
                          train::StandaloneTrainer::Create(o));
  StandaloneRun run;
  while (!trainer->done()) {
    MOBIUS_ASSIGN_OR_RETURN(train::StepStats s, trainer->Step());
    if (s.step > 1) run.timed_seconds.push_back(s.milliseconds / 1e3);
    run.losses.push_back(s.loss);
  }
  return run;
}

}  // namespace

absl::StatusOr<Calibration> CalibrateStandalone(const BenchInputs& inputs,
                                                const train::TrainerOptions& base, int steps,
                                                int reps) {
  Calibration c;
  const int64_t mb = base.EffectiveMicrobatch();
  c.small_batch = mb;
  c.large_batch = base.batch > mb ? base.batch : 2 * mb;
  c.small_microbatches = 1;
  c.large_microbatches = c.large_batch / mb;
  train::TrainerOptions o = base;
  o.model_dir = inputs.model_dir;
  o.data_path = inputs.data_path;
  o.microbatch = mb;
  o.steps = steps + 1;
  o.checkpoint_dir.clear();
  o.eval_every = 0;
  for (int r = 0; r < reps; ++r) {
    for (const bool large : {false, true}) {
      o.batch = large ? c.large_batch : c.small_batch;
      absl::StatusOr<StandaloneRun> run = RunStandalone(o);
      if (!run.ok()) {
        return absl::Status(
            run.status().code(),
            absl::StrCat("standalone calibration (batch ", o.batch, "): ", run.status().message()));
      }
      std::vector<double>& dst = large ? c.large_step_seconds : c.small_step_seconds;
      dst.insert(dst.end(), run->timed_seconds.begin(), run->timed_seconds.end());
      if (large && c.large_losses.empty()) c.large_losses = run->losses;
    }
  }
  const double small = Median(c.small_step_seconds), large = Median(c.large_step_seconds);
  c.microbatch_seconds = (large - small) / static_cast<double>(c.large_microbatches - 1);
  if (!(c.microbatch_seconds > 0)) {
    return absl::FailedPreconditionError(
        absl::StrCat("calibration: a step with ", c.large_microbatches, " microbatches (median ",
                     large, " s) was not slower than one with 1 (", small,
                     " s); the machine is too noisy, rerun with more --calib_steps"));
  }
  c.fixed_seconds = std::max(0.0, small - c.microbatch_seconds);
  const model::UnitFlopsPerToken f = model::ModelFlops(inputs.description, base.seq);
  c.flops_per_microbatch =
      (2 * f.forward_flops + f.backward_flops) * static_cast<double>(mb * base.seq);
  c.effective_flops_per_s = c.flops_per_microbatch / c.microbatch_seconds;
  c.fixed_seconds_per_billion_params =
      c.fixed_seconds / static_cast<double>(inputs.parameters) * 1e9;
  return c;
}

train::TrainerOptions BenchTrainingOptions(const BenchInputs& in, int64_t steps, int64_t batch,
                                           int64_t microbatch, int64_t seq, int threads,
                                           double grad_clip) {
  train::TrainerOptions o;
  o.model_dir = in.model_dir;
  o.data_path = in.data_path;
  o.steps = steps;
  o.batch = batch;
  o.microbatch = microbatch;
  o.seq = seq;
  o.lr = 3e-4;
  o.schedule = "constant";
  o.weight_decay = 0.1;
  o.grad_clip = grad_clip;
  o.threads = threads;
  return o;
}

absl::StatusOr<std::unique_ptr<BenchWorkDir>> BenchWorkDir::Make(const std::string& dir,
                                                                const std::string& tool,
                                                                bool keep) {
  std::error_code ec;
  if (!dir.empty()) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
    return std::unique_ptr<BenchWorkDir>(new BenchWorkDir(dir, /*remove=*/false));
  }
  std::string tmpl = (std::filesystem::temp_directory_path(ec) / (tool + ".XXXXXX")).string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, " failed"));
  }
  return std::unique_ptr<BenchWorkDir>(new BenchWorkDir(tmpl, /*remove=*/!keep));
}

BenchWorkDir::~BenchWorkDir() {
  std::error_code ec;
  if (remove_) std::filesystem::remove_all(path_, ec);
}

absl::StatusOr<double> MeasureNf4DequantizeRate(int64_t values, int threads) {
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<backend::CpuBackend> be,
                          backend::CpuBackend::Create({.op_threads = std::max(threads, 1)}));
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Queue> q,
                          be->CreateQueue(backend::QueueKind::kCompute, 0));
  std::vector<uint16_t> bits(static_cast<size_t>(values));
  for (int64_t i = 0; i < values; ++i) {
    bits[i] = numeric::Fp32ToBf16(0.02f * static_cast<float>((i * 7919) % 2001 - 1000) / 1000);
  }
  const numeric::Nf4Tensor t = numeric::QuantizeNf4(bits.data(), values);
  std::vector<uint8_t> blob(static_cast<size_t>(numeric::Nf4Bytes(values)));
  numeric::WriteNf4Blob(t, blob.data());
  MOBIUS_ASSIGN_OR_RETURN(backend::DeviceBuffer src, be->Allocate(blob.size(), "nf4.blob"));
  MOBIUS_ASSIGN_OR_RETURN(backend::DeviceBuffer dst, be->Allocate(2 * values, "nf4.out"));
  MOBIUS_RETURN_IF_ERROR(be->CopyToDevice(*q, blob.data(), src, 0, blob.size()));
  auto run = [&](int reps) -> absl::StatusOr<double> {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      MOBIUS_RETURN_IF_ERROR(be->DequantizeNf4(
          *q, {.n = values, .src = src.data(), .dst_type = backend::DType::kBf16,
               .out = dst.data()}));
    }
    MOBIUS_RETURN_IF_ERROR(be->Synchronize(*q));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  MOBIUS_RETURN_IF_ERROR(run(3).status());  // warm-up: pages, caches
  constexpr int kReps = 50;
  MOBIUS_ASSIGN_OR_RETURN(const double seconds, run(kReps));
  return static_cast<double>(kReps * values) / std::max(seconds, 1e-9);
}

}  // namespace mobius::bench
