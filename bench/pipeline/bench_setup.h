// Inputs of the pipeline benchmark (pipeline_bench.cc): a seeded Llama-style model directory and a
// token file written into a work directory, and the calibration of the simulator's compute model
// from standalone training steps of the same model on this machine.
//
// Calibration. The standalone trainer (worker/train/standalone_trainer.h, the single-process
// oracle the pipeline reproduces) runs steps with 1 and with M microbatches of the benchmark's
// shape, alternating; the median step times give, by difference, the seconds of one microbatch's
// forward + backward (recompute included) and the per-step fixed cost (data, gradient norm, AdamW,
// bf16 copies). Dividing the model's analytic FLOPs per microbatch (profile.h's convention:
// forward + recompute forward + backward) by the former gives the effective FLOP/s a DeviceSpec
// override needs for the planner's analytic profile to describe this CPU; the fixed cost per
// billion parameters stands in for the planner's CPU optimizer rate.
//
// Pure functions over files; single-threaded callers.
#ifndef MOBIUS_BENCH_PIPELINE_BENCH_SETUP_H_
#define MOBIUS_BENCH_PIPELINE_BENCH_SETUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/model/model_config.h"
#include "worker/train/standalone_trainer.h"

namespace mobius::bench {

struct ModelShape {  // a Llama preset ("tiny") with these sizes (model_init.h SizeOverrides)
  int64_t layers = 16;
  int64_t hidden = 256;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t intermediate = 688;
  int64_t vocab = 512;
  // > 0: a Qwen3-MoE preset instead, with this many experts of width intermediate / 4 (the
  // preset's rule), experts_per_token of them per token.
  int64_t experts = 0;
  int64_t experts_per_token = 2;
  const char* family() const { return experts > 0 ? "qwen3_moe" : "llama"; }
};

struct BenchInputs {
  std::string model_dir;  // config.json + model.safetensors
  std::string data_path;  // token file (token_file.h)
  model::ModelConfig config;
  model::ModelDescription description;
  int64_t parameters = 0;
  int64_t num_tokens = 0;  // in the token file
};

// Writes `dir`/model (seed 1) and `dir`/data.tok: `num_tokens` uniformly random ids in documents
// of 4096 tokens (seeded, so every run trains on the same data). INVALID_ARGUMENT for sizes the
// preset rejects (the message names the size).
absl::StatusOr<BenchInputs> WriteBenchInputs(const std::string& dir, const ModelShape& shape,
                                             int64_t seq_len, int64_t num_tokens);
// The same for any validated model config (checkpoint::PresetConfig): `dir`/model and
// `dir`/data.tok with ids below config.vocab_size.
absl::StatusOr<BenchInputs> WriteBenchInputsFor(const std::string& dir,
                                                const model::ModelConfig& config,
                                                int64_t num_tokens);

struct Calibration {
  int64_t small_batch = 0, large_batch = 0;  // sequences per step of the two configurations
  int64_t small_microbatches = 0, large_microbatches = 0;
  std::vector<double> small_step_seconds;  // timed steps (the first step of a run dropped)
  std::vector<double> large_step_seconds;
  std::vector<float> large_losses;  // every step of the first large run (oracle)
  double microbatch_seconds = 0;    // one microbatch: forward, recompute, backward
  double fixed_seconds = 0;         // per step, beside the microbatches (>= 0)
  double flops_per_microbatch = 0;  // analytic: (2 x forward + backward) x tokens
  double effective_flops_per_s = 0;
  double fixed_seconds_per_billion_params = 0;
};

// NF4 values per second the CPU backend's DequantizeNf4 turns into bf16 with `threads` op threads
// (the workers' setting), timed on a blob of `values` (a bench model's largest linear) after a
// warm-up: what a QLoRA stage pays per dequantise on this machine (planner::DeviceSpec::
// nf4_dequantize_values_per_s).
absl::StatusOr<double> MeasureNf4DequantizeRate(int64_t values, int threads);

// `base` carries model, data, sequence, microbatch, threads, optimizer settings; its batch is the
// large configuration (M = batch / microbatch microbatches; M = 2 when the benchmark's M is 1).
// Each configuration runs `reps` times for `steps` + 1 steps. FAILED_PRECONDITION when the large
// configuration is not slower than the small one (the machine was too noisy to calibrate).
absl::StatusOr<Calibration> CalibrateStandalone(const BenchInputs& inputs,
                                                const train::TrainerOptions& base, int steps,
                                                int reps);

double Median(std::vector<double> v);  // 0 for an empty vector

// A benchmark's work directory: `dir` when given (created; kept), else a fresh
// $TMPDIR/<tool>.XXXXXX, removed with this object unless `keep`. Not copyable.
class BenchWorkDir {
 public:
  // INTERNAL naming the path when it cannot be made.
  static absl::StatusOr<std::unique_ptr<BenchWorkDir>> Make(const std::string& dir,
                                                            const std::string& tool, bool keep);
  ~BenchWorkDir();
  BenchWorkDir(const BenchWorkDir&) = delete;
  BenchWorkDir& operator=(const BenchWorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  BenchWorkDir(std::string path, bool remove) : path_(std::move(path)), remove_(remove) {}
  std::string path_;
  bool remove_;
};

// The pipeline benchmarks' trainer options for `in`: constant lr 3e-4 (so that the standalone
// calibration's losses are a prefix of a run's), weight decay 0.1, the given shape.
train::TrainerOptions BenchTrainingOptions(const BenchInputs& in, int64_t steps, int64_t batch,
                                           int64_t microbatch, int64_t seq, int threads,
                                           double grad_clip);

}  // namespace mobius::bench

#endif  // MOBIUS_BENCH_PIPELINE_BENCH_SETUP_H_
