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

enum class DType { kF32, kBF16, kF16 };

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);  // "F32", "BF16", "F16"

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;   // valid while the owning file object lives
  size_t nbytes = 0;
  int64_t num_elements() const;
};

// One .safetensors file, memory-mapped read-only. Thread-safe after Open.
class SafetensorsFile {
 public:
  // Errors: NOT_FOUND / PERMISSION_DENIED (file), INVALID_ARGUMENT naming the file and the
  // problem (bad header length, bad JSON, unknown dtype, overlapping or out-of-range offsets,
  // shape/size mismatch, truncated file).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  virtual ~SafetensorsFile() = default;
  virtual const std::vector<TensorView>& tensors() const = 0;   // in file order
  virtual const TensorView* Find(const std::string& name) const = 0;  // nullptr if absent
  virtual const std::map<std::string, std::string>& metadata() const = 0;
};

// All tensors of a model directory: model.safetensors, or the shards listed in
// model.safetensors.index.json ("weight_map"). Thread-safe after Open.
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

// Writes one file atomically. INVALID_ARGUMENT for duplicate names or nbytes != shape x size.
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Converts any supported dtype to fp32 (bf16/f16 widened exactly). `out` holds num_elements().
void CopyToF32(const TensorView& tensor, float* out);

}  // namespace mobius::io

#endif  // MOBIUS_WORKER_IO_SAFETENSORS_H_
