// Named fp32 tensors (reference::Parameters) <-> safetensors files in a directory, in Hugging Face's
// layout, shared by the model generator and the training checkpoint.
//
// A "tensor set" called BASE in DIR is either one file, DIR/BASE.safetensors, or, when its data is
// larger than `max_shard_bytes`, shards DIR/BASE-00001-of-0000N.safetensors with an index
// DIR/BASE.safetensors.index.json = {"metadata": {"total_size": BYTES}, "weight_map": {NAME: FILE}}
// (what transformers' save_pretrained writes for BASE = "model"). Shards are cut in the order the
// caller gives (declaration order), never by device: the layout does not depend on the GPU count.
// Every file carries the metadata {"format": "pt"} that transformers' loader insists on.
//
// Thread-safety: pure functions of their arguments and the file system.
#ifndef MOBIUS_WORKER_CHECKPOINT_TENSOR_FILES_H_
#define MOBIUS_WORKER_CHECKPOINT_TENSOR_FILES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/numeric/nf4.h"
#include "worker/checkpoint/bnb4bit.h"
#include "worker/checkpoint/mxfp4.h"
#include "worker/io/safetensors.h"
#include "worker/reference/parameters.h"

namespace mobius::checkpoint {

inline constexpr int64_t kDefaultMaxShardBytes = 5'000'000'000;  // transformers' "5GB"

// Name and shape of every tensor, in declaration order (reference::ParameterShapes).
using TensorShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// How a tensor set is cut into files: one file BASE.safetensors when its data fits
// `max_shard_bytes`, else shards in `order` (a shard is closed before the tensor that would push it
// past the limit; a larger tensor gets a shard of its own) plus the index. WriteTensorSet writes
// exactly this; a parallel writer (checkpoint_writer.h) lays its files out by it.
struct TensorSetShard {
  std::string file;      // relative to the directory
  TensorShapes tensors;  // in `order`
};
struct TensorSetPlan {
  std::vector<TensorSetShard> shards;
  std::string index_file;  // empty for a single file
  std::string index_json;  // the index's text
};
TensorSetPlan PlanTensorSet(const std::string& base, const TensorShapes& order, io::DType dtype,
                            int64_t max_shard_bytes);
// The same with each tensor's own dtype (`dtypes[i]` for `order[i]`; sizes follow from them), for
// a set that keeps a model's dtypes as stored (tensor_set_writer.h).
// REQUIRES: dtypes.size() == order.size().
TensorSetPlan PlanTensorSet(const std::string& base, const TensorShapes& order,
                            const std::vector<io::DType>& dtypes, int64_t max_shard_bytes);

// Writes the tensors named in `order` (each must be in `tensors`) as the set `base` in `dir`,
// converted to `dtype` (kF32 or kBF16, round to nearest even). Files are written atomically one by
// one (io::WriteSafetensors). Returns the file names written (relative to `dir`).
absl::StatusOr<std::vector<std::string>> WriteTensorSet(const std::string& dir,
                                                        const std::string& base,
                                                        const reference::Parameters& tensors,
                                                        const TensorShapes& order,
                                                        io::DType dtype,
                                                        int64_t max_shard_bytes);

// Reads the set `base` from `dir` (the single file wins over an index, as in transformers) and
// checks it holds exactly the tensors of `expected` with those shapes, and, when given, with
// dtype `required_dtype`. Values are widened to fp32. Errors name the file and the tensor:
// NOT_FOUND (no file), INVALID_ARGUMENT (corrupt file or index, missing / unexpected / misshapen
// tensor, wrong dtype). `only` (nullptr: all): the tensors to read; the others are checked, not
// read.
absl::StatusOr<reference::Parameters> ReadTensorSet(const std::string& dir, const std::string& base,
                                                    const TensorShapes& expected,
                                                    std::optional<io::DType> required_dtype,
                                                    const std::set<std::string>* only = nullptr);

// A tensor set opened for reading without copying anything: every file memory-mapped, the names,
// shapes and dtypes checked exactly as ReadTensorSet checks them. A tensor stored as a
// bitsandbytes 4-bit weight (bnb4bit.h: a QLoRA checkpoint) is read dequantised to fp32, and its
// companion tensors are part of the set; any other U8 tensor is refused (INVALID_ARGUMENT). Lets a loader convert each tensor
// straight into its final place (e.g. a pipeline worker's share of the host store), one tensor at a
// time, so nothing the size of the model is ever held. Thread-safe after Open (ReadF32 of distinct
// destinations may run concurrently).
class TensorSetReader {
 public:
  // Errors as ReadTensorSet's. `fused` (model::FusedExpertTensors: gpt-oss): the files hold each
  // such tensor whole, the expected names are its parts, read as slices of it (no copy); or as
  // MXFP4 blocks and scales (mxfp4.h: OpenAI's gpt-oss checkpoints), dequantised when read (a
  // part's view() then has the part's shape, dtype BF16, which holds every MXFP4 value exactly,
  // no data, and its share of the packed bytes as nbytes).
  static absl::StatusOr<std::unique_ptr<TensorSetReader>> Open(
      const std::string& dir, const std::string& base, const TensorShapes& expected,
      std::optional<io::DType> required_dtype,
      const std::vector<model::FusedTensor>& fused = {});

  // REQUIRES: `name` is one of the expected tensors (a programmer error otherwise: aborts).
  // A bitsandbytes 4-bit weight's view is its packed codes (quantized() has its shape).
  const io::TensorView& view(const std::string& name) const;
  // Widens `name` to fp32 into `out` [numel], in chunks (input pages read ahead, then dropped from
  // this process's page tables: io::WillNeed / io::Release).
  void ReadF32(const std::string& name, float* out) const;
  // Elements [begin, begin + n) of `name`, widened into `out` [n].
  void ReadF32(const std::string& name, int64_t begin, int64_t n, float* out) const;
  // The files of the set (shards and index), relative to the directory.
  std::vector<std::string> files() const;
  // `name`'s bitsandbytes 4-bit form, nullptr for a plain tensor.
  const Bnb4bitWeight* quantized(const std::string& name) const;
  // How many of the set's tensors are bitsandbytes 4-bit weights.
  int64_t num_quantized() const { return static_cast<int64_t>(bnb_.size()); }
  // `name` as the NF4 tensor it is stored as, when that is QLoRA's exact configuration
  // (Bnb4bitWeight::AsNf4); nullopt for any other tensor.
  std::optional<numeric::Nf4Tensor> ReadNf4(const std::string& name) const;

 private:
  TensorSetReader() = default;
  std::map<std::string, Bnb4bitWeight> bnb_;  // by weight name
  std::map<std::string, std::unique_ptr<io::SafetensorsFile>> files_;  // by file name
  std::map<std::string, const io::TensorView*> views_;                 // by tensor name
  std::deque<io::TensorView> slices_;  // the parts of fused tensors (views_ points at them)
  std::deque<Mxfp4Tensor> mxfp4_;
  std::map<std::string, std::pair<const Mxfp4Tensor*, int64_t>> mxfp4_parts_;  // part -> expert
  std::string index_file_;  // empty for a single file
};

// 64-bit FNV-1a over the file's bytes, taken 8 at a time (little-endian words, then the tail
// bytes): a corruption check, not a cryptographic hash. Also returns the size in bytes.
struct FileDigest {
  uint64_t bytes = 0;
  uint64_t fnv1a64 = 0;
};
absl::StatusOr<FileDigest> DigestFile(const std::string& path);

// Writes `text` to `path` atomically (temp file, fsync, rename, fsync of the directory).
absl::Status WriteFileAtomically(const std::string& path, const std::string& text);
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes);
// fsync of a directory, so that renames inside it survive a crash.
absl::Status SyncDirectory(const std::string& dir);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_TENSOR_FILES_H_
