// Internal to worker/io and its tests/fuzzers: the in-memory parsers behind SafetensorsFile and
// SafetensorsModel, so that they can be exercised on exact-size buffers (fuzzing) without files.
// Not part of the contract in safetensors.h. Thread-compatible, pure functions.
#ifndef MOBIUS_WORKER_IO_SAFETENSORS_INTERNAL_H_
#define MOBIUS_WORKER_IO_SAFETENSORS_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/io/safetensors.h"

namespace mobius::io::internal {

inline constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // 100 MiB
inline constexpr uint64_t kMaxIndexBytes = uint64_t{100} << 20;   // model.safetensors.index.json

struct ParsedSafetensors {
  std::vector<TensorView>
      tensors;  // sorted by data offset (file order); data points into the buffer
  std::map<std::string, std::string> metadata;
};

// Parses and fully validates a whole safetensors image data[0, size). Never reads outside it.
// Errors are INVALID_ARGUMENT "<source>: <what is wrong>", naming the tensor or field.
absl::StatusOr<ParsedSafetensors> ParseSafetensors(const uint8_t* data, size_t size,
                                                   absl::string_view source);

// The "weight_map" of a model.safetensors.index.json document: tensor name -> shard file name,
// each shard name checked to be a plain file name (no '/', NUL, "." or ".."). INVALID_ARGUMENT
// "<source>: ..." otherwise.
absl::StatusOr<std::map<std::string, std::string>> ParseShardIndex(absl::string_view json,
                                                                   absl::string_view source);

// dtype name as written in headers ("F32", "BF16", "F16") -> DType; nullopt for any other name.
std::optional<DType> DTypeFromName(absl::string_view name);

}  // namespace mobius::io::internal

#endif  // MOBIUS_WORKER_IO_SAFETENSORS_INTERNAL_H_
