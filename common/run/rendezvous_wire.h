// The rendezvous store's wire format (rendezvous.h): length-prefixed binary frames over TCP, one
// request and then one response at a time per connection. Pure functions, no I/O, so that the
// decoders can be fuzzed (test/common/run/rendezvous_wire_fuzzer.cc).
//
// Integers are little endian. A request frame is a fixed 17-byte header and then the bytes it
// announces:
//   u8 op | u32 key_bytes | u32 value_bytes | i64 number | key | value
// `number` is the timeout in milliseconds for kGet/kWait, the delta for kAdd, and 0 otherwise;
// only kSet carries a value. A response frame is a 13-byte header and its value:
//   u8 code | u32 value_bytes | i64 number | value
// The header alone bounds the frame: a decoder rejects an oversized or inconsistent header before
// any of its body has arrived, so a reader never buffers more than kMaxRequestFrameBytes /
// kMaxResponseFrameBytes for a frame.
//
// Thread-safety: pure functions.
#ifndef MOBIUS_COMMON_RUN_RENDEZVOUS_WIRE_H_
#define MOBIUS_COMMON_RUN_RENDEZVOUS_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace mobius::runtime::rendezvous {

inline constexpr size_t kMaxKeyBytes = 1024;                // keys are 1..1024 bytes
inline constexpr size_t kMaxValueBytes = 16 * 1024 * 1024;  // values are 0..16 MiB
inline constexpr size_t kRequestHeaderBytes = 17;
inline constexpr size_t kResponseHeaderBytes = 13;
inline constexpr size_t kMaxRequestFrameBytes = kRequestHeaderBytes + kMaxKeyBytes + kMaxValueBytes;
inline constexpr size_t kMaxResponseFrameBytes = kResponseHeaderBytes + kMaxValueBytes;

enum class Op : uint8_t {
  kSet = 1,     // key = value (overwrites); answered kOk
  kGet = 2,     // the value, held until the key exists or `number` ms pass (kTimedOut)
  kTryGet = 3,  // the value now, or kNotFound
  kWait = 4,    // kOk once the key exists (no value sent), or kTimedOut after `number` ms
  kAdd = 5,     // counter += `number` (a missing key counts as 0); answered kOk with the new value
};

struct Request {
  Op op = Op::kSet;
  std::string key;
  std::string value;   // kSet only
  int64_t number = 0;  // kGet/kWait: timeout_ms >= 0; kAdd: delta; else 0
};

enum class Code : uint8_t {
  kOk = 0,        // kSet/kWait: done; kGet/kTryGet: `value`; kAdd: `number` = the new count
  kNotFound = 1,  // kTryGet: no such key
  kTimedOut = 2,  // kGet/kWait: the key did not appear within the request's timeout
  kError = 3,     // the request could not be served; `value` says why (e.g. a non-integer counter)
};

struct Response {
  Code code = Code::kOk;
  std::string value;
  int64_t number = 0;
};

// The frame of `request` / `response`. REQUIRES: the request is valid (DecodeRequest would
// accept its frame) and the response value is at most kMaxValueBytes; callers check limits first.
std::string EncodeRequest(const Request& request);
std::string EncodeResponse(const Response& response);

// Decodes the frame at the start of data[0, n):
//   - a complete valid frame: the message, with *consumed = its length in bytes;
//   - an incomplete but so far valid frame: std::nullopt (*consumed = 0): read more bytes;
//   - an invalid header or body (unknown op/code, key or value over the limits, an empty key, a
//     value or number where the op takes none, a negative timeout): INVALID_ARGUMENT saying what
//     is wrong. The connection cannot be resynchronised after that; close it.
// Never reads outside data[0, n) and never allocates more than the frame's (bounded) size.
absl::StatusOr<std::optional<Request>> DecodeRequest(const char* data, size_t n, size_t* consumed);
absl::StatusOr<std::optional<Response>> DecodeResponse(const char* data, size_t n,
                                                       size_t* consumed);

}  // namespace mobius::runtime::rendezvous

#endif  // MOBIUS_COMMON_RUN_RENDEZVOUS_WIRE_H_
