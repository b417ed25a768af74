#include "common/run/rendezvous_wire.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mobius::runtime::rendezvous {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutI64(std::string& out, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

int64_t GetI64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return static_cast<int64_t>(v);
}

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed rendezvous frame: ", what));
}

absl::Status CheckRequestHeader(Op op, uint32_t key_bytes, uint32_t value_bytes, int64_t number) {
  switch (op) {
    case Op::kSet:
    case Op::kGet:
    case Op::kTryGet:
    case Op::kWait:
    case Op::kAdd:
      break;
    default:
      return Malformed(absl::StrCat("unknown op ", static_cast<int>(op)));
  }
  if (key_bytes == 0) return Malformed("empty key");
  if (key_bytes > kMaxKeyBytes) {
    return Malformed(
        absl::StrCat("key of ", key_bytes, " bytes (the limit is ", kMaxKeyBytes, ")"));
  }
  if (value_bytes > kMaxValueBytes) {
    return Malformed(
        absl::StrCat("value of ", value_bytes, " bytes (the limit is ", kMaxValueBytes, ")"));
  }
  if (op != Op::kSet && value_bytes != 0) {
    return Malformed(absl::StrCat("op ", static_cast<int>(op), " carries a value"));
  }
  if ((op == Op::kGet || op == Op::kWait) && number < 0) {
    return Malformed(absl::StrCat("negative timeout ", number, " ms"));
  }
  if ((op == Op::kSet || op == Op::kTryGet) && number != 0) {
    return Malformed(absl::StrCat("op ", static_cast<int>(op), " carries a number"));
  }
  return absl::OkStatus();
}

absl::Status CheckResponseHeader(Code code, uint32_t value_bytes, int64_t number) {
  switch (code) {
    case Code::kOk:
    case Code::kError:
      break;
    case Code::kNotFound:
    case Code::kTimedOut:
      if (value_bytes != 0) return Malformed("a not-found or timed-out answer carries a value");
      break;
    default:
      return Malformed(absl::StrCat("unknown answer code ", static_cast<int>(code)));
  }
  if (value_bytes > kMaxValueBytes) {
    return Malformed(
        absl::StrCat("value of ", value_bytes, " bytes (the limit is ", kMaxValueBytes, ")"));
  }
  if (code != Code::kOk && number != 0) return Malformed("only an ok answer carries a number");
  return absl::OkStatus();
}

}  // namespace

std::string EncodeRequest(const Request& request) {
  std::string out;
  out.reserve(kRequestHeaderBytes + request.key.size() + request.value.size());
  out.push_back(static_cast<char>(request.op));
  PutU32(out, static_cast<uint32_t>(request.key.size()));
  PutU32(out, static_cast<uint32_t>(request.value.size()));
  PutI64(out, request.number);
  out += request.key;
  out += request.value;
  return out;
}

std::string EncodeResponse(const Response& response) {
  std::string out;
  out.reserve(kResponseHeaderBytes + response.value.size());
  out.push_back(static_cast<char>(response.code));
  PutU32(out, static_cast<uint32_t>(response.value.size()));
  PutI64(out, response.number);
  out += response.value;
  return out;
}

absl::StatusOr<std::optional<Request>> DecodeRequest(const char* data, size_t n, size_t* consumed) {
  *consumed = 0;
  if (n < kRequestHeaderBytes) return std::nullopt;
  const Op op = static_cast<Op>(static_cast<uint8_t>(data[0]));
  const uint32_t key_bytes = GetU32(data + 1);
  const uint32_t value_bytes = GetU32(data + 5);
  const int64_t number = GetI64(data + 9);
  if (absl::Status s = CheckRequestHeader(op, key_bytes, value_bytes, number); !s.ok()) return s;
  // Both lengths are bounded above, so the sum cannot overflow.
  const size_t total = kRequestHeaderBytes + size_t{key_bytes} + size_t{value_bytes};
  if (n < total) return std::nullopt;
  Request request;
  request.op = op;
  request.key.assign(data + kRequestHeaderBytes, key_bytes);
  request.value.assign(data + kRequestHeaderBytes + key_bytes, value_bytes);
  request.number = number;
  *consumed = total;
  return request;
}

absl::StatusOr<std::optional<Response>> DecodeResponse(const char* data, size_t n,
                                                       size_t* consumed) {
  *consumed = 0;
  if (n < kResponseHeaderBytes) return std::nullopt;
  const Code code = static_cast<Code>(static_cast<uint8_t>(data[0]));
  const uint32_t value_bytes = GetU32(data + 1);
  const int64_t number = GetI64(data + 5);
  if (absl::Status s = CheckResponseHeader(code, value_bytes, number); !s.ok()) return s;
  const size_t total = kResponseHeaderBytes + size_t{value_bytes};
  if (n < total) return std::nullopt;
  Response response;
  response.code = code;
  response.value.assign(data + kResponseHeaderBytes, value_bytes);
  response.number = number;
  *consumed = total;
  return response;
}

}  // namespace mobius::runtime::rendezvous
