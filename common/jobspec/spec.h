// JobSpec: what a user asks mobiusd to run, as plain data.
//
// One fine-tuning job: a Hugging Face model directory, a dataset, the optimizer's hyperparameters,
// how many GPUs, optional planner overrides, checkpointing and restart policy, and optionally a
// parameter-efficient adapter (LoRA) to train instead of the whole model. Humans write it as
// YAML (common/jobspec/yaml.h, reference: docs/job-spec.md); it travels as mobius.v1.JobSpec
// (common/rpc/jobspec_convert.h) and is stored as canonical JSON (common/jobspec/json.h). Every
// entry point checks it with ValidateJobSpec (common/jobspec/validate.h); this header only
// declares the data, its defaults and the allowed values.
//
// Field names below are the YAML/JSON keys, and the dotted path of a field ("training.microbatch")
// is what every error message names. Defaults mirror common/run/trainer_options.h
// TrainerOptions where the two overlap. "0 means ..." fields keep 0 in the struct; Normalize fills
// the derived defaults (microbatch, tokenizer) so that two specs that mean the same compare equal.
//
// Thread-safety: plain values; the constants are immutable.
#ifndef MOBIUS_COMMON_JOBSPEC_SPEC_H_
#define MOBIUS_COMMON_JOBSPEC_SPEC_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/run/trainer_options.h"  // train::kMaxSteps

namespace mobius::jobspec {

// Allowed values of the enumerated string fields (the first is the default, where there is one).
inline constexpr std::array<std::string_view, 5> kDatasetFormats = {
    "tokens", "jsonl", "prompt_completion", "chat", "text"};
// dataset.chat_template: "" (the default: the model's own template, an error when it has none),
// "model", "model:NAME" (a named template of the model) or a built-in one.
inline constexpr std::array<std::string_view, 4> kChatTemplates = {"", "model", "chatml", "plain"};
inline constexpr std::array<std::string_view, 2> kLrSchedules = {"cosine", "constant"};
// training.precision: the 16-bit format of the weights and activations (train::TrainerOptions).
inline constexpr std::array<std::string_view, 2> kPrecisions = {"bf16", "fp16"};
inline constexpr std::array<std::string_view, 3> kSchedules = {"mobius", "roundrobin", "resident"};
inline constexpr std::array<std::string_view, 3> kPartitioners = {"exact", "mip", "uniform"};
inline constexpr std::array<std::string_view, 2> kMappers = {"cross", "sequential"};
inline constexpr std::array<std::string_view, 2> kDispatches = {"static", "pool"};
inline constexpr std::array<std::string_view, 1> kAdapterTypes = {"lora"};
// adapter.base_quantization: "" keeps the frozen base 16-bit; "nf4" holds its linear weights in
// QLoRA's 4-bit NormalFloat (common/numeric/nf4.h, common/run/unit_params.h).
inline constexpr std::array<std::string_view, 1> kBaseQuantizations = {"nf4"};

// Limits checked by ValidateJobSpec (beyond them a spec is a mistake, or would overflow the
// arithmetic done on it: tokens per step = global_batch * seq_len must fit comfortably in int64).
inline constexpr int kMaxNameLength = 63;
inline constexpr int kMaxLabels = 64;
inline constexpr int kMaxLabelKeyLength = 63;
inline constexpr int kMaxLabelValueLength = 256;
inline constexpr int kMaxPathLength = 4096;
inline constexpr int kMinPriority = -100, kMaxPriority = 100;
inline constexpr int kMaxRestarts = 10;
inline constexpr int kMaxKeepLast = 1000;
inline constexpr int64_t kMaxSteps = train::kMaxSteps;  // 2^31 - 1: what the runtime runs
inline constexpr int64_t kMaxEpochs = 1 << 20;
inline constexpr int64_t kMaxGlobalBatch = 1 << 20;
inline constexpr int64_t kMaxSeqLen = 1 << 22;
inline constexpr int kMaxGpus = 1024;
inline constexpr int kMaxStages = 4096;
inline constexpr int kMaxDatasetFiles = 1024;
inline constexpr int kMaxFieldNameLength = 256;
inline constexpr int64_t kMaxLoraRank = 4096;
inline constexpr int kMaxLoraTargets = 64;
inline constexpr int kMaxLoraTargetLength = 128;

struct DatasetSpec {
  // The file(s): `path` for one, `paths` for several (their documents are read in order, as one
  // dataset); exactly one of the two is set (Normalize moves a one-element `paths` to `path`).
  // A token file ("tokens") is always a single `path`.
  std::string path;
  std::vector<std::string> paths;
  // kDatasetFormats: "tokens" = our token file (common/data/token_file.h); the others are text
  // the daemon tokenizes with `tokenizer` before the run (common/data/documents.h describes them):
  // "jsonl" (a text field per line), "prompt_completion" (loss on the completion only), "chat"
  // (messages rendered with chat_template, loss on the assistant turns), "text" (a file is one
  // document).
  std::string format = "tokens";
  std::string tokenizer;       // directory with tokenizer.json / tokenizer.model, or the file;
                               // text formats only; empty: model_dir
  std::string text_field = "text";              // jsonl
  std::string prompt_field = "prompt";          // prompt_completion
  std::string completion_field = "completion";  // prompt_completion
  std::string messages_field = "messages";      // chat
  std::string chat_template;                    // chat: kChatTemplates or "model:NAME"
  // chat with the model's template: extra template variables (e.g. enable_thinking: "false");
  // "true"/"false" become booleans, numbers numbers, the rest strings.
  std::map<std::string, std::string> chat_template_kwargs;
  bool skip_bad_lines = false;  // jsonl formats: skip (and count) malformed lines, else fail
  double eval_fraction = 0.0;  // held-out share of the sequences, [0, 0.5]

  friend bool operator==(const DatasetSpec&, const DatasetSpec&) = default;
};

struct TrainingSpec {
  int64_t steps = 0;           // optimizer steps; exactly one of steps and epochs is > 0
  int64_t epochs = 0;          // passes over the training split
  int64_t global_batch = 0;    // required: sequences per optimizer step
  int64_t microbatch = 0;      // sequences per forward/backward; divides global_batch;
                               // 0: = global_batch
  // microbatch, or global_batch where it is 0 (a negative one stays, for the checks to name):
  // the one place that rule is written for specs.
  int64_t EffectiveMicrobatch() const { return microbatch == 0 ? global_batch : microbatch; }
  int64_t seq_len = 0;         // required: tokens per sequence
  double lr = 3e-4;            // peak learning rate, > 0
  double min_lr = 0.0;         // cosine floor, [0, lr]
  int64_t warmup_steps = 0;    // linear warmup from 0 to lr
  std::string lr_schedule = "cosine";  // kLrSchedules
  double weight_decay = 0.0;   // decoupled (AdamW), >= 0
  double grad_clip = 1.0;      // max global grad norm, >= 0; 0: no clipping
  double beta1 = 0.9;          // [0, 1)
  double beta2 = 0.95;         // [0, 1)
  double eps = 1e-8;           // > 0
  uint64_t seed = 0;           // data shuffle
  int64_t eval_every = 0;      // eval loss every K steps (and at the last); 0: never
  // 0: synchronous optimizer; 1: step k computes with the weights of update k-2 (the CPU
  // optimizer overlaps the next step; train::TrainerOptions::optimizer_staleness)
  int64_t optimizer_staleness = 0;
  // kPrecisions: "bf16" (fp32 accumulation) or "fp16" (dynamic loss scaling; GEMMs with fp16
  // outputs sum in fp16 on GPUs that have the mode; train::TrainerOptions::precision)
  std::string precision = "bf16";

  friend bool operator==(const TrainingSpec&, const TrainingSpec&) = default;
};

struct ResourceSpec {
  int gpus = 0;                     // GPUs to use; 0: all free ones (YAML: "all")
  int64_t device_memory_bytes = 0;  // cap per GPU; 0: the device's memory (YAML: "20GiB")

  friend bool operator==(const ResourceSpec&, const ResourceSpec&) = default;
};

struct PlanSpec {
  std::string schedule = "mobius";   // kSchedules
  std::string partitioner = "exact"; // kPartitioners
  std::string mapper = "cross";      // kMappers
  int stages = 0;                    // pipeline stages; 0: the planner chooses
  std::string dispatch = "static";   // kDispatches; roundrobin: "pool" = next free GPU

  friend bool operator==(const PlanSpec&, const PlanSpec&) = default;
};

struct CheckpointSpec {
  std::string dir;          // empty: the daemon's state directory chooses one
  int64_t every_steps = 0;  // also at the end; 0: only at the end
  int keep_last = 3;        // newest complete checkpoints (and their exports) kept; 0: all
  // A group of the submitter's that may read the checkpoints (setgid directory, files 0640);
  // empty: the user's alone (0700 / 0600).
  std::string group;

  friend bool operator==(const CheckpointSpec&, const CheckpointSpec&) = default;
};

// The `adapter` section: train low-rank adapters (LoRA, as Hugging Face PEFT defines it:
// common/model/lora.h) on a frozen base model instead of the whole model. Mirrors
// train::AdapterOptions (common/run/trainer_options.h); the checks that need the model (target
// names of the family, rank <= the smallest adapted dimension) run where its config.json is read
// (jobs::PlanJob), not here.
struct AdapterSpec {
  std::string type;      // kAdapterTypes; required in the section (empty: a validation error)
  int64_t rank = 8;      // PEFT's default r; [1, kMaxLoraRank]
  double alpha = 8.0;    // PEFT's default lora_alpha; > 0 (the update is scaled by alpha / rank)
  double dropout = 0.0;  // on the adapter's input, [0, 1)
  // PEFT target_modules names of the model's family ("q_proj", "c_attn"); empty: the family's
  // PEFT default (model::DefaultLoraTargets), resolved where the model is known. Kept as written
  // (order included): the canonical JSON does not reorder them.
  std::vector<std::string> target_modules;
  // A PEFT adapter directory (adapter_config.json + adapter_model.safetensors) to start from;
  // empty: PEFT's initialisation from the run's seed. A path like model_dir (relative to the
  // spec file in YAML).
  std::string init_from;
  // "" (the default): the frozen base in the run's 16-bit format; "nf4": its linear weights
  // quantised to NF4 at load (QLoRA), about 0.52 bytes per value in host memory and on every
  // upload, dequantised on the device before each GEMM. Not for GPT-2 (Conv1D weights).
  std::string base_quantization;

  friend bool operator==(const AdapterSpec&, const AdapterSpec&) = default;
};

struct JobSpec {
  std::string name;                          // optional; [a-z0-9._-], at most 63 characters
  std::map<std::string, std::string> labels; // free-form key/value tags
  int priority = 0;                          // [-100, 100]; higher runs first
  std::string model_dir;                     // required; config.json + *.safetensors
  DatasetSpec dataset;
  TrainingSpec training;
  ResourceSpec resources;
  PlanSpec plan;
  CheckpointSpec checkpoint;
  int max_restarts = 1;                      // [0, 10]; restarts after a failure
  // Absent (the YAML has no `adapter` section): full fine-tuning. Present: train an adapter.
  std::optional<AdapterSpec> adapter;

  friend bool operator==(const JobSpec&, const JobSpec&) = default;
};

// True for the formats the daemon tokenizes (every format but "tokens").
bool IsTextFormat(const std::string& format);

// Where a text dataset's tokenizer is: dataset.tokenizer, else model_dir (what Normalize fills).
const std::string& TokenizerPath(const JobSpec& spec);

// Fills the derived defaults in place: microbatch 0 -> global_batch; for text datasets an
// empty tokenizer -> model_dir; a one-element dataset.paths -> dataset.path. An adapter's empty
// target_modules stays empty (its default depends on the model's family). Idempotent. The YAML
// and JSON readers return normalized specs.
void Normalize(JobSpec& spec);

}  // namespace mobius::jobspec

#endif  // MOBIUS_COMMON_JOBSPEC_SPEC_H_
