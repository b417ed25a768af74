// libFuzzer entry point for the safetensors parsers (worker/io/safetensors_internal.h). The input
// is parsed in place, exactly sized, so any read past the end shows under ASan. Every accepted
// tensor is read completely (bytes and fp32 conversion) to prove the validated ranges are real.
// The same input is also tried as a model.safetensors.index.json document.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "worker/io/safetensors.h"
#include "worker/io/safetensors_internal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mobius::io;
  auto parsed = internal::ParseSafetensors(data, size, "fuzz");
  if (parsed.ok()) {
    volatile uint8_t sink = 0;
    std::vector<float> f32;
    for (const TensorView& t : parsed->tensors) {
      const auto* bytes = static_cast<const uint8_t*>(t.data);
      uint8_t x = 0;
      for (size_t i = 0; i < t.nbytes; ++i) x ^= bytes[i];
      sink = sink ^ x;
      if (static_cast<uint64_t>(t.num_elements()) * DTypeSize(t.dtype) != t.nbytes)
        __builtin_trap();
      f32.resize(static_cast<size_t>(t.num_elements()));
      CopyToF32(t, f32.data());
    }
  }
  auto index = internal::ParseShardIndex(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz index");
  (void)index;
  return 0;
}
