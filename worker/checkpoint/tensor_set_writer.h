// Writing a tensor set (tensor_files.h's layout: DIR/BASE.safetensors, or shards plus
// BASE.safetensors.index.json) one tensor at a time, in pieces if the caller likes, each tensor in
// its own dtype: the files are created at their final size with their headers, and tensor bytes go
// straight to their place (pwrite). So a tool that produces a model tensor by tensor (the adapter
// merge, merge_adapter.h) never holds anything the size of the model, and the layout is the one
// every writer of model files here uses: PlanTensorSet's shards (transformers' 5 GB rule by
// default), io::PlanSafetensors' headers, metadata {"format": "pt"}. With one dtype the files are
// byte for byte WriteTensorSet's.
//
// Not atomic by itself: write into a temporary directory and rename it into place.
// Thread-compatible: one thread at a time.
#ifndef MOBIUS_WORKER_CHECKPOINT_TENSOR_SET_WRITER_H_
#define MOBIUS_WORKER_CHECKPOINT_TENSOR_SET_WRITER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/io/safetensors.h"

namespace mobius::checkpoint {

class TensorSetWriter {
 public:
  struct Tensor {
    std::string name;
    io::DType dtype = io::DType::kF32;
    std::vector<int64_t> shape;
  };

  // Creates the set's files in `dir` (an existing directory), in the order given (the shard cut
  // follows it). INVALID_ARGUMENT for duplicate or reserved names, negative dimensions; I/O
  // errors with errno's code and the path.
  static absl::StatusOr<std::unique_ptr<TensorSetWriter>> Create(const std::string& dir,
                                                                 const std::string& base,
                                                                 const std::vector<Tensor>& tensors,
                                                                 int64_t max_shard_bytes);
  ~TensorSetWriter();  // closes the files

  // Writes `bytes` bytes of tensor `name`'s data (little-endian, in its dtype) at byte `offset`
  // of that tensor. INVALID_ARGUMENT for an unknown name or a range past the tensor's end.
  absl::Status Write(const std::string& name, uint64_t offset, const void* data, uint64_t bytes);

  // Once everything is written: FAILED_PRECONDITION naming a tensor that did not get all its
  // bytes; then every file fsynced and closed, the index written (atomically). Returns the set's
  // files (shards, then the index), relative to the directory.
  absl::StatusOr<std::vector<std::string>> Finish();

 private:
  struct Place {
    int file = -1;
    uint64_t offset = 0;  // of the tensor's first byte in its file
    uint64_t bytes = 0;
    uint64_t written = 0;
  };
  TensorSetWriter() = default;
  std::string dir_;
  std::vector<std::string> files_;  // relative to dir_
  std::vector<int> fds_;            // per file; -1 once closed
  std::map<std::string, Place> places_;
  std::string index_file_, index_json_;
};

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_TENSOR_SET_WRITER_H_
