// Training checkpoints: everything needed to resume a run bit-exactly, in a directory that is also
// a Hugging Face model directory (transformers loads it unchanged).
//
// Layout of ROOT/checkpoint-<step>/ (step zero-padded to 8 digits, so names sort by step):
//   config.json                  HF config (the run's original text when given, else generated)
//   model.safetensors            the model in `model_dtype` (bf16 by default), HF tensor names
//                                (or model-0000i-of-0000N.safetensors + model.safetensors.index.json)
//   master.safetensors           fp32 master weights, same names (omitted when model_dtype is F32:
//                                model.safetensors is then the master copy)
//   optimizer_m.safetensors      Adam first moments, fp32, keyed by parameter name
//   optimizer_v.safetensors      Adam second moments, fp32 (both omitted before the first step)
//   trainer_state.json           {"format": "mobius-checkpoint", "version": 1, "step", "lr_step",
//                                 "rng_state", "data_position": {key: value}, "model_dtype",
//                                 "has_optimizer_state"}
//   DONE                         written last: JSON {"step", "files": {name: {"bytes", "fnv1a64"}}}
// Every tensor is whole and keyed by its HF name; shards (beyond max_shard_bytes) are cut by name
// order. Nothing depends on how many GPUs wrote it, so a run resumes on any GPU count.
//
// Atomicity: the directory is assembled as ROOT/checkpoint-<step>.tmp-<pid>, every file fsynced,
// DONE last, then renamed into place (an existing directory of the same step is moved aside first
// and removed only after the rename). Older checkpoints stay untouched until the new one is
// complete; `keep_last` then prunes. A crash leaves at worst a *.tmp-* directory, which
// LatestCheckpoint ignores (as it ignores any directory without DONE).
//
// Thread-safety: functions are independent; two processes must not save into the same root at
// once.
#ifndef MOBIUS_WORKER_CHECKPOINT_CHECKPOINT_H_
#define MOBIUS_WORKER_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/run/checkpoint_dirs.h"  // CheckpointDirName, CompleteCheckpoints, LatestCheckpoint
#include "worker/checkpoint/tensor_files.h"
#include "worker/io/safetensors.h"
#include "worker/reference/parameters.h"

namespace mobius::checkpoint {

// The run's position, besides tensors.
struct TrainingState {
  int64_t step = 0;     // optimizer steps completed (AdamW's t); also names the directory
  int64_t lr_step = 0;  // position in the learning-rate schedule (LrSchedule::At(lr_step + 1) next)
  std::string rng_state;                            // opaque (e.g. a std::mt19937_64 via <<)
  std::map<std::string, std::string> data_position;  // opaque, e.g. {"epoch": "1", "offset": ..}
  // fp16 runs: the dynamic loss scale and its count of good steps after `step` (train/
  // loss_scaler.h); 0: none (bf16). trainer_state.json holds them only when loss_scale > 0.
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0;
};

// What a save takes (not owned; must outlive the call) and a load returns (owned).
struct CheckpointTensors {
  const reference::Parameters* master = nullptr;  // fp32 master weights; required
  const reference::Parameters* adam_m = nullptr;  // nullptr or empty: no optimizer state yet
  const reference::Parameters* adam_v = nullptr;
};

struct LoadedCheckpoint {
  std::string directory;
  reference::Parameters master;
  reference::Parameters adam_m, adam_v;  // empty when saved without optimizer state
  TrainingState state;
};

struct SaveOptions {
  io::DType model_dtype = io::DType::kBF16;  // of model.safetensors (kBF16 or kF32)
  int64_t max_shard_bytes = kDefaultMaxShardBytes;
  std::string config_json;  // config.json text to keep verbatim; empty: generated
  int keep_last = 0;        // after a successful save, keep this many newest complete ones; 0: all
  // Files copied into the checkpoint by name (absolute paths; e.g. TokenizerFiles(), in
  // checkpoint_writer.h), so that the directory loads as a model *and* its tokenizer.
  std::vector<std::string> copy_files;
  // Also ROOT/export-<step>/: the model-only export (checkpoint_writer.h).
  bool export_model = false;
};

inline constexpr char kCheckpointFormat[] = "mobius-checkpoint";  // trainer_state.json "format"
inline constexpr int kCheckpointVersion = 1;

// Saves into `root` (created if missing) and returns the final directory. Tensors are checked
// against `config` first (INVALID_ARGUMENT naming the tensor); I/O errors carry errno's code.
absl::StatusOr<std::string> SaveCheckpoint(const std::string& root,
                                           const model::ModelConfig& config,
                                           const CheckpointTensors& tensors,
                                           const TrainingState& state, const SaveOptions& options);

struct LoadOptions {
  bool verify_checksums = true;  // re-hash every file against DONE (reads everything once more)
};

// Loads a checkpoint directory written by SaveCheckpoint. Validates against `config`: exactly its
// tensor names and shapes in master and moments (INVALID_ARGUMENT naming the file and tensor).
// FAILED_PRECONDITION without DONE; DATA_LOSS when a file's size or checksum differs from DONE;
// INVALID_ARGUMENT for unreadable JSON or safetensors (naming the file).
absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& directory,
                                                const model::ModelConfig& config,
                                                const LoadOptions& options = {});

// A checkpoint opened for streaming reads, e.g. a pipeline worker resuming its share of the model
// straight into the host store: trainer_state.json parsed, DONE's file list and sizes checked, the
// tensor sets mapped and checked against `config` as LoadCheckpoint checks them; no tensor data is
// read and checksums are not verified (VerifyCheckpointChecksums). Errors as LoadCheckpoint's.
struct OpenedCheckpoint {
  std::string directory;
  TrainingState state;
  std::unique_ptr<TensorSetReader> master;          // fp32
  std::unique_ptr<TensorSetReader> adam_m, adam_v;  // null when saved without optimizer state
};
absl::StatusOr<OpenedCheckpoint> OpenCheckpoint(const std::string& directory,
                                                const model::ModelConfig& config);

// Re-hashes the files DONE lists whose position in its name-sorted list is congruent to `part`
// modulo `parts` (0 of 1: all), so that several processes can split the work; DATA_LOSS names a
// file whose size or checksum differs.
absl::Status VerifyCheckpointChecksums(const std::string& directory, int part, int parts);

// trainer_state.json of a checkpoint directory, parsed and checked (INVALID_ARGUMENT naming the
// field); whether it was an adapter run's ("adapter": "lora") in `adapter`.
absl::StatusOr<TrainingState> ReadTrainingState(const std::string& directory,
                                                std::string* adapter = nullptr);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_CHECKPOINT_H_
