// TrainerOptions: the hyperparameters and inputs of one training run, shared by the standalone
// trainer (standalone_trainer.h), the pipeline runtime (common/run/run_config.h) and the daemon
// (which builds them from a job spec). Plain data, no dependencies, so that the daemon can carry them
// without linking the compute engine.
#ifndef MOBIUS_COMMON_RUN_TRAINER_OPTIONS_H_
#define MOBIUS_COMMON_RUN_TRAINER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mobius::train {

// The most optimizer steps one run may have. The pipeline's control words hold run-local step
// numbers as 32-bit futex values, so a run stays below 2^31 steps (also what int32 step counters
// anywhere would hold); the job spec's limit (common/jobspec/spec.h) is this one, and both
// executors refuse more (training_setup.h: ValidateTrainerOptions), as do epochs that add up to
// more (jobs::TrainerOptionsFromSpec).
inline constexpr int64_t kMaxSteps = (int64_t{1} << 31) - 1;

// Parameter-efficient fine-tuning: the base model frozen, low-rank adapters trained. LoRA as
// Hugging Face PEFT defines it (common/model/lora.h): per adapted module A [rank, in] and B [out,
// rank], the module's output gains (alpha / rank) * dropout(x) A^T B^T.
struct AdapterOptions {
  std::string type;        // "": none (full fine-tuning) | "lora"
  int64_t rank = 8;        // PEFT's default r
  double alpha = 8.0;      // PEFT's default lora_alpha
  double dropout = 0.0;    // on the adapter's input, [0, 1)
  // target_modules names (model/lora.h); empty: the family's PEFT default (q_proj, v_proj; c_attn)
  std::vector<std::string> target_modules;
  // A PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to start from;
  // empty: PEFT's initialisation (A Kaiming-uniform, B zero) from the run's seed.
  std::string init_dir;
  // "" or "nf4": the frozen base's linear weights in QLoRA's NF4 (jobspec::AdapterSpec).
  std::string base_quantization;
  bool enabled() const { return !type.empty(); }
  bool base_nf4() const { return enabled() && base_quantization == "nf4"; }
};

struct TrainerOptions {
  std::string model_dir;         // HF model directory (config.json + safetensors)
  std::string data_path;         // token file (token_file.h)
  int data_raw_bytes = 0;        // 2 or 4: headerless llm.c file of u16/u32 ids; 0: our format
  int64_t steps = 0;             // optimizer steps in total (a resumed run counts the done ones);
                                 // [1, kMaxSteps]
  int64_t batch = 0;             // B: sequences per optimizer step
  int64_t microbatch = 0;        // MB: sequences per forward/backward; B % MB == 0; 0: = B
  // microbatch, or batch where it is 0 (a negative one stays, for the checks to name): the one
  // place that rule is written for run configs.
  int64_t EffectiveMicrobatch() const { return microbatch == 0 ? batch : microbatch; }
  int64_t seq = 0;               // T: tokens per sequence
  double lr = 3e-4;              // peak learning rate
  double min_lr = 0.0;           // cosine floor
  int64_t warmup = 0;            // warmup steps
  std::string schedule = "cosine";  // "cosine" | "constant"
  double weight_decay = 0.0;     // decoupled; on matmul weights and embeddings only
  double grad_clip = 1.0;        // max global grad norm; 0: no clipping
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  uint64_t seed = 0;             // data shuffle
  int64_t eval_every = 0;        // eval loss every K steps (and at the last); 0: never
  double eval_fraction = 0.0;    // held-out share of the sequences, [0, 0.5]
  std::string checkpoint_dir;    // empty: no checkpoints
  int64_t checkpoint_every = 0;  // also at the end; 0: only at the end (when checkpoint_dir)
  bool resume = false;           // continue from LatestCheckpoint(checkpoint_dir)
  int checkpoint_keep_last = 0;  // keep this many newest checkpoints (and exports); 0: all
  // A group that may read the checkpoints (the spec's checkpoint.group, a name or gid): rank 0
  // gives the directory to it with the setgid bit, and the job's processes use umask 027;
  // empty: the user's alone.
  std::string checkpoint_group;
  bool checkpoint_export = false;  // also write the model-only export next to each checkpoint
  // The tokenizer's directory (or file): its tokenizer files are copied into every checkpoint and
  // export, so that they load with transformers' AutoTokenizer too. Empty: none copied.
  std::string tokenizer_dir;
  uint64_t device_memory_bytes = 0;  // device memory cap; 0: physical RAM (CPU) / the GPU's
  // Standalone trainer only (the pipeline takes RunConfig::backend): "cpu" (the oracle, default),
  // "cuda" (device 0 after CUDA_VISIBLE_DEVICES, through worker/backend/backend_registry.h) or
  // "auto" (cuda where usable, else cpu).
  std::string backend = "cpu";
  int threads = 0;               // op, BLAS and optimizer threads; 0: hardware concurrency
  // Standalone trainer only: recompute each block's activations in the backward even when the
  // device memory holds them all. false: keep them when they fit, recompute otherwise. Gradients
  // are bitwise the same either way; the pipeline runtime always recomputes.
  bool recompute = false;
  // 0: synchronous (step k computes with the weights after update k-1). 1: asynchronous optimizer
  // with staleness 1: step k computes with the weights after update k-2 (step 1 with the
  // initial ones), so step k-1's update overlaps step k; after a sync step (IsSyncStep) the next
  // step computes with the newest weights. Both executors (the standalone trainer as the
  // reference, the pipeline) apply exactly this rule.
  int optimizer_staleness = 0;
  // Token chunks of the LM head and the MLP (common/model/unit_workspace.h): 0 = sized from memory
  // (the default: one chunk up to kMinChunkRows tokens per microbatch, so short sequences run the
  // unchunked ops); > 0 = at most this many tokens per chunk; < 0 = unchunked. Both executors use
  // the same rule, so their losses stay bitwise equal.
  int64_t chunk_tokens = 0;
  // The 16-bit format of the weights and activations (job spec training.precision): "bf16"
  // (default) or "fp16". fp32 master weights, gradients, Adam state and boundary gradients either
  // way. fp16 scales the loss dynamically, as torch.amp.GradScaler does: the loss's gradient is
  // multiplied by the scale (loss_scale_init to start), the gradients are divided by it before the
  // norm is clipped; a step whose gradients are not finite is skipped (weights and moments
  // unchanged; it still counts as a step for the learning rate and Adam's bias correction) and
  // halves the scale; loss_scale_window good steps in a row double it. Step k uses the scale
  // after steps k - 1 - optimizer_staleness (k - 1 after a sync step); LossScaler
  // (worker/optim/loss_scaler.h) holds the rule for both executors.
  std::string precision = "bf16";
  double loss_scale_init = 65536.0;  // 2^16, GradScaler's init_scale; a power of two > 0
  int64_t loss_scale_window = 2000;  // GradScaler's growth_interval; >= 1
  AdapterOptions adapter;  // type "lora": the base frozen, only the adapters trained
};

// With optimizer_staleness 1, whether the step after `global_step` computes with the newest
// weights (W_step) instead of one update older: after checkpoint steps (a checkpoint, hence a
// resume, holds no older weights), eval steps (the eval reads the newest weights, which the next
// step then starts from) and the last step. Always true without staleness.
inline bool IsSyncStep(const TrainerOptions& o, int64_t global_step) {
  if (o.optimizer_staleness == 0 || global_step >= o.steps) return true;
  if (!o.checkpoint_dir.empty() && o.checkpoint_every > 0 &&
      global_step % o.checkpoint_every == 0) {
    return true;
  }
  return o.eval_every > 0 && global_step % o.eval_every == 0;
}

}  // namespace mobius::train

#endif  // MOBIUS_COMMON_RUN_TRAINER_OPTIONS_H_
