// CONTRACT (implemented by the safetensors work; other components code against it).
//
// Reading and writing Hugging Face safetensors files: an 8-byte little-endian header length, a JSON
// header {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}, then the raw little-endian tensor bytes.
//
// Reader: memory-maps the file, validates everything before handing out a view (header length
// within the file, JSON well-formed, dtypes known, shapes x element size == byte ranges, ranges
// inside the data section, sorted and non-overlapping); never reads out of bounds. Writer: atomic
// (temp file in the same directory, fsync, rename, fsync of the directory).
//
// Details of the contract as implemented (worker/io/safetensors*.cc):
// - Header length N <= 100 MiB and 8 + N <= file size; the header is a JSON object whose entries
//   are tensors plus an optional "__metadata__" object of string values. Unknown fields inside a
//   tensor entry are ignored; gaps between tensor byte ranges and trailing bytes are tolerated (the
//   reference writer produces neither), overlaps are not.
// - Tensor data is NOT necessarily aligned to its element size (offsets are packed back to back):
//   read it with memcpy or CopyToF32, never through a cast pointer.
// - The file is mapped MAP_PRIVATE; if another process truncates it while it is mapped, touching
//   the lost pages raises SIGBUS (as with any mmap reader). Model files are expected not to change.
#ifndef MOBIUS_WORKER_IO_SAFETENSORS_H_
#define MOBIUS_WORKER_IO_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::io {

// kU8: bytes, as quantised checkpoints store packed codes and scale codes (bitsandbytes' 4-bit
// weights, worker/checkpoint/bnb4bit.h); model loaders refuse it where they expect values.
enum class DType { kF32, kBF16, kF16, kU8 };

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);  // "F32", "BF16", "F16", "U8"

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;    // valid while the owning file object lives; may be unaligned
  size_t nbytes = 0;             // == num_elements() * DTypeSize(dtype)
  int64_t num_elements() const;  // product of shape; 1 for a scalar (shape [])
};

// One .safetensors file, memory-mapped read-only. Thread-safe after Open.
class SafetensorsFile {
 public:
  // Errors: NOT_FOUND / PERMISSION_DENIED (file), INVALID_ARGUMENT naming the file and the
  // problem (bad header length, bad JSON, unknown dtype, overlapping or out-of-range offsets,
  // shape/size mismatch, truncated file).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  virtual ~SafetensorsFile() = default;
  virtual const std::vector<TensorView>& tensors() const = 0;         // in file order
  virtual const TensorView* Find(const std::string& name) const = 0;  // nullptr if absent
  virtual const std::map<std::string, std::string>& metadata() const = 0;
};

// All tensors of a model directory: model.safetensors, or the shards listed in
// model.safetensors.index.json ("weight_map"). Thread-safe after Open.
// When both files exist model.safetensors wins (as in Hugging Face transformers). With an index,
// the tensors are exactly the weight_map's names: each shard name must be a plain file name in the
// directory (no '/', not "." or ".."), and every listed tensor must be in its shard
// (INVALID_ARGUMENT otherwise, also for a listed shard that does not exist). Tensors a shard holds
// but the index does not list are not visible. NOT_FOUND when neither file exists.
class SafetensorsModel {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsModel>> Open(const std::string& directory);
  virtual ~SafetensorsModel() = default;
  virtual const TensorView* Find(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;  // sorted
};

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Writes one file atomically. INVALID_ARGUMENT for duplicate names or nbytes != shape x size
// (also: negative dims, the reserved name "__metadata__", null data with nbytes > 0, names or
// metadata that are not valid UTF-8). Layout as the reference writer's: "__metadata__" first (only
// when non-empty), tensors in name order with contiguous data_offsets, the header padded with
// spaces to a multiple of 8 bytes. The data goes to "<path>.tmp.<pid>" (removed on any failure),
// which is then renamed over `path`. Not safe for two threads of one process writing the same path
// at once.
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// The file WriteSafetensors would write for `tensors` (their data pointers may be null: only
// names, dtypes and shapes are read), without writing it: the header bytes including the 8-byte
// length, and where each tensor's data starts. For writers that fill the data section themselves,
// e.g. several processes writing their own tensors into one preallocated file with pwrite: the
// result is byte-identical to WriteSafetensors given the same data. Same validation and errors as
// WriteSafetensors (except null data).
struct SafetensorsLayout {
  std::string header;                       // written at offset 0
  std::map<std::string, uint64_t> offsets;  // file offset of each tensor's first byte
  uint64_t file_bytes = 0;                  // header + every tensor's data
};
absl::StatusOr<SafetensorsLayout> PlanSafetensors(
    const std::vector<TensorToWrite>& tensors,
    const std::map<std::string, std::string>& metadata = {});

// Page advice for a streaming reader of a mapped file (SafetensorsFile's views): WillNeed starts
// readahead of the tensor's pages; Release drops them from this process's page tables (the page
// cache keeps them), so a loader that copies a large file tensor by tensor does not keep the
// whole file in its resident set. Neither changes what the view reads.
// REQUIRES: `tensor` is a view of a SafetensorsFile or SafetensorsModel (a private file mapping);
// on anonymous memory MADV_DONTNEED would zero the pages.
void WillNeed(const TensorView& tensor);
void Release(const TensorView& tensor);

// Converts any supported dtype to fp32 (bf16/f16 widened exactly, incl. subnormals, +-inf and NaN
// payloads; u8: each byte's integer value). `out` holds num_elements() floats. REQUIRES: tensor.nbytes == num_elements() x size.
void CopyToF32(const TensorView& tensor, float* out);

}  // namespace mobius::io

#endif  // MOBIUS_WORKER_IO_SAFETENSORS_H_
