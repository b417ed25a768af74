// libFuzzer entry point for the rendezvous wire decoders (common/run/rendezvous_wire.h): the input
// is read as a stream of request frames and as a stream of response frames, as the server and the
// client read their sockets. Whatever decodes must re-encode to exactly the bytes it came from.
// rendezvous_wire_fuzz_smoke runs it in every ctest over mutations of test/data/rendezvous/
// (test/testing/fuzz_smoke_main.cc), built with AddressSanitizer where the compiler has it; with
// -DMOBIUS_FUZZ=ON (clang) it is also a libFuzzer binary.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "common/run/rendezvous_wire.h"

namespace {

using namespace mobius::runtime::rendezvous;

// Decodes frames from the start of data[0, n) until one is incomplete or malformed.
template <typename Decode, typename Encode>
void DecodeStream(const char* data, size_t n, Decode decode, Encode encode) {
  size_t offset = 0;
  while (offset < n) {
    size_t consumed = 0;
    auto message = decode(data + offset, n - offset, &consumed);
    if (!message.ok() || !message->has_value()) {
      if (consumed != 0) __builtin_trap();
      return;
    }
    if (consumed == 0 || consumed > n - offset) __builtin_trap();
    if (encode(**message) != std::string(data + offset, consumed)) __builtin_trap();
    offset += consumed;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy, so that a sanitizer sees any read past the end.
  std::unique_ptr<char[]> exact(new char[size]);
  if (size > 0) std::memcpy(exact.get(), data, size);
  DecodeStream(exact.get(), size, DecodeRequest, EncodeRequest);
  DecodeStream(exact.get(), size, DecodeResponse, EncodeResponse);
  return 0;
}
