// libFuzzer entry point for the tokenizer.json loader (and encode/decode with whatever parses).
// Built as a libFuzzer binary with -DMOBIUS_FUZZ=ON under clang; tokenizer_fuzz_smoke runs it
// over mutated fixtures in every ctest run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/data/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string json(reinterpret_cast<const char*>(data), size);
  auto tok = mobius::data::ParseHfTokenizer(json, "fuzz input");
  if (tok.ok()) {
    auto ids = (*tok)->Encode("Hello wörld 123 <|endoftext|> 👋", true);
    if (ids.ok()) (void)(*tok)->Decode(*ids, false);
  }
  return 0;
}
