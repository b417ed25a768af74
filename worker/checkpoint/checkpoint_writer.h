// Writing a training checkpoint in place, tensor by tensor, from wherever the tensors live (a
// pipeline's shared host store, a trainer's own buffers), by one or several processes at once:
// nothing the size of the model is copied or allocated. The files are byte for byte what
// SaveCheckpoint writes (checkpoint.h has the format; SaveCheckpoint is built on this).
//
// The protocol (each step by whoever the caller decides; the parties synchronise themselves):
//   1. Every party computes the same CheckpointPlan (deterministic from config and options).
//   2. One party, the coordinator, calls CreateCheckpointFiles: the temporary directory
//      ROOT/checkpoint-<step>.tmp-<tag> with every tensor file at its final size, headers written.
//   3. Any party opens it (CheckpointTensorWriter::Open) and writes the tensors it holds
//      (WriteTensor), every tensor exactly once over all parties, concurrently with the others.
//   4. Once every tensor is written, the coordinator calls FinishCheckpoint: fsync of every file,
//      config.json, index files, trainer_state.json, copied files (the tokenizer), DONE, the rename
//      into place, `keep_last` pruning, the model-only export.
// A crash anywhere before the rename leaves only the temporary directory, which LatestCheckpoint
// ignores and the next FinishCheckpoint of the root removes.
//
// The model-only export (SaveOptions::export_model): ROOT/export-<step>/ holds config.json, the bf16
// model files and the copied files as hard links to the checkpoint's (copies across file systems),
// so `from_pretrained(ROOT/export-<step>)` gives the model and its tokenizer without the 12 bytes per
// parameter of resume state. Made after the checkpoint is in place, atomically (temporary name,
// rename); pruned with its checkpoint.
//
// Thread-safety: CheckpointTensorWriter::WriteTensor may be called from several threads for
// distinct tensors; everything else from one thread at a time.
#ifndef MOBIUS_WORKER_CHECKPOINT_CHECKPOINT_WRITER_H_
#define MOBIUS_WORKER_CHECKPOINT_CHECKPOINT_WRITER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/checkpoint/checkpoint.h"

namespace mobius::checkpoint {

// Where every byte of a checkpoint goes.
struct CheckpointPlan {
  struct File {
    std::string name;    // relative to the checkpoint directory
    std::string header;  // safetensors header (with its 8-byte length), written at offset 0
    uint64_t bytes = 0;  // final size
  };
  struct Place {
    int file = -1;  // index into `files`; -1: not written (e.g. no master file when F32)
    uint64_t offset = 0;
  };
  struct Tensor {
    int64_t num_elements = 0;
    Place model;      // in model_dtype (bf16: the master rounded to nearest even)
    Place master;     // fp32; model_dtype F32: the same place as `model`
    Place m, v;       // fp32; only with optimizer state
  };
  io::DType model_dtype = io::DType::kBF16;
  bool has_optimizer_state = false;
  std::vector<File> files;                         // every tensor file
  std::map<std::string, std::string> index_files;  // name -> text (sharded sets only)
  std::map<std::string, Tensor> tensors;           // by HF name
  std::vector<std::string> model_files;            // the model set's files (shards, index)

  uint64_t total_bytes() const;  // of the tensor files
};

// INVALID_ARGUMENT for a config the reference model does not support or a dtype other than
// BF16 / F32.
absl::StatusOr<CheckpointPlan> PlanCheckpoint(const model::ModelConfig& config,
                                              const SaveOptions& options,
                                              bool has_optimizer_state);

// ROOT/checkpoint-<step>.tmp-<tag>.
std::string PartialCheckpointDir(const std::string& root, int64_t step, const std::string& tag);

// The coordinator, before anyone writes: creates `root` if missing and the temporary directory
// (replacing a leftover of the same name) with every tensor file of the plan at its final size
// (sparse) and its header. I/O errors carry errno's code and the path.
absl::Status CreateCheckpointFiles(const std::string& root, const CheckpointPlan& plan,
                                   int64_t step, const std::string& tag);

class CheckpointTensorWriter {
 public:
  // Opens the files made by CreateCheckpointFiles in `dir` (PartialCheckpointDir) for writing.
  static absl::StatusOr<std::unique_ptr<CheckpointTensorWriter>> Open(const std::string& dir,
                                                                      const CheckpointPlan& plan);
  ~CheckpointTensorWriter();  // closes; FinishCheckpoint makes the data durable

  // Writes tensor `name` [num_elements]: the fp32 master (and, for a bf16 model file, its
  // rounding), and m and v when the plan has optimizer state (ignored and may be null otherwise).
  // INVALID_ARGUMENT for a name not in the plan; I/O errors with errno's code and the file.
  absl::Status WriteTensor(const std::string& name, const float* master, const float* m,
                           const float* v);
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  CheckpointTensorWriter(std::string dir, const CheckpointPlan* plan, std::vector<int> fds)
      : dir_(std::move(dir)), plan_(plan), fds_(std::move(fds)) {}
  absl::Status Write(const CheckpointPlan::Place& place, const void* data, uint64_t bytes);
  std::string dir_;
  const CheckpointPlan* plan_;
  std::vector<int> fds_;  // per plan file
  std::atomic<uint64_t> bytes_written_{0};
};

// The coordinator, once every tensor is written: see the header comment. `options` supplies
// config_json, copy_files, keep_last and export_model. Returns the final directory.
absl::StatusOr<std::string> FinishCheckpoint(const std::string& root,
                                             const model::ModelConfig& config,
                                             const CheckpointPlan& plan,
                                             const TrainingState& state,
                                             const SaveOptions& options, const std::string& tag);

// Completes a checkpoint whose own files the caller wrote into PartialCheckpointDir(root,
// state.step, tag) (every one fsynced): copies `copy_files`, writes trainer_state.json (plus the
// `extra` string fields), DONE over every file, publishes it as ROOT/checkpoint-<step> and prunes
// to `keep_last`, as FinishCheckpoint does for a model's checkpoint (adapter checkpoints:
// adapter_checkpoint.h). Returns the final directory; on failure the partial one is removed.
absl::StatusOr<std::string> SealCheckpoint(const std::string& root, const std::string& tag,
                                           const TrainingState& state, io::DType model_dtype,
                                           bool has_optimizer_state,
                                           const std::vector<std::string>& copy_files,
                                           int keep_last,
                                           const std::map<std::string, std::string>& extra);

// The export directory of a step: ROOT/export-<step, 8 digits>.
std::string ExportDirName(int64_t step);

// The tokenizer files (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
// tokenizer.model, vocab.json, merges.txt, added_tokens.json, chat_template.jinja) present in
// `dir_or_file`'s directory (a file: its directory), as absolute paths: what a checkpoint copies so
// that transformers' AutoTokenizer loads from it.
std::vector<std::string> TokenizerFiles(const std::string& dir_or_file);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_CHECKPOINT_WRITER_H_
