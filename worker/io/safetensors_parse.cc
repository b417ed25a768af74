// Validation of safetensors headers and index files from memory. Everything is checked before a
// view is handed out; byte ranges are compared in uint64 with overflow checks, so no later code
// needs to re-check bounds.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/io/safetensors_internal.h"

namespace mobius::io::internal {
namespace {

using Json = nlohmann::json;

// A valid header nests 3 deep ({tensor: {shape: [..]}}); the cap leaves room for unknown fields
// and keeps pathological inputs away from anything recursive.
constexpr int kMaxJsonDepth = 16;

absl::Status Invalid(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

std::string Quoted(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

std::string TensorLabel(absl::string_view name) { return absl::StrCat("tensor ", Quoted(name)); }

uint64_t LoadLittleEndian64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Whether brackets outside strings nest at most `limit` deep. Invalid JSON may pass; the parser
// rejects it afterwards.
bool NestingWithin(const char* text, size_t size, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < size; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

// A JSON number that is a non-negative integer fitting in int64 (floats like 2.0 are rejected).
bool AsCount(const Json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  const uint64_t u = v.get<uint64_t>();
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
  *out = u;
  return true;
}

struct Entry {
  TensorView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

absl::Status ParseDType(const Json& entry, absl::string_view source, const std::string& label,
                        DType* dtype) {
  auto it = entry.find("dtype");
  if (it == entry.end()) return Invalid(source, absl::StrCat(label, ": missing \"dtype\""));
  if (!it->is_string()) return Invalid(source, absl::StrCat(label, ": \"dtype\" is not a string"));
  const std::string& name = it->get_ref<const std::string&>();
  std::optional<DType> parsed = DTypeFromName(name);
  if (!parsed) {
    return Invalid(source, absl::StrCat(label, ": unsupported dtype ", Quoted(name),
                                        " (supported: F32, BF16, F16, U8)"));
  }
  *dtype = *parsed;
  return absl::OkStatus();
}

absl::Status ParseShape(const Json& entry, absl::string_view source, const std::string& label,
                        std::vector<int64_t>* shape) {
  auto it = entry.find("shape");
  if (it == entry.end()) return Invalid(source, absl::StrCat(label, ": missing \"shape\""));
  if (!it->is_array()) return Invalid(source, absl::StrCat(label, ": \"shape\" is not an array"));
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& dim = (*it)[i];
    uint64_t d;
    if (dim.is_number_integer() && !dim.is_number_unsigned() && dim.get<int64_t>() < 0) {
      return Invalid(
          source, absl::StrFormat("%s: shape[%d] = %d is negative", label, i, dim.get<int64_t>()));
    }
    if (!AsCount(dim, &d)) {
      return Invalid(
          source, absl::StrFormat("%s: shape[%d] is not a non-negative 64-bit integer", label, i));
    }
    shape->push_back(static_cast<int64_t>(d));
  }
  return absl::OkStatus();
}

absl::Status ParseOffsets(const Json& entry, absl::string_view source, const std::string& label,
                          uint64_t data_size, uint64_t* begin, uint64_t* end) {
  auto it = entry.find("data_offsets");
  if (it == entry.end()) return Invalid(source, absl::StrCat(label, ": missing \"data_offsets\""));
  if (!it->is_array() || it->size() != 2 || !AsCount((*it)[0], begin) || !AsCount((*it)[1], end)) {
    return Invalid(source, absl::StrCat(label,
                                        ": \"data_offsets\" is not [begin, end] of non-negative "
                                        "64-bit integers"));
  }
  if (*begin > *end) {
    return Invalid(
        source, absl::StrFormat("%s: data_offsets [%d, %d] has begin > end", label, *begin, *end));
  }
  if (*end > data_size) {
    return Invalid(source, absl::StrFormat("%s: data_offsets [%d, %d] out of range: the data "
                                           "section has %d bytes (truncated file?)",
                                           label, *begin, *end, data_size));
  }
  return absl::OkStatus();
}

absl::StatusOr<Entry> ParseEntry(const std::string& name, const Json& value,
                                 absl::string_view source, uint64_t data_size) {
  const std::string label = TensorLabel(name);
  if (!value.is_object()) return Invalid(source, absl::StrCat(label, ": entry is not an object"));
  Entry e;
  e.view.name = name;
  MOBIUS_RETURN_IF_ERROR(ParseDType(value, source, label, &e.view.dtype));
  MOBIUS_RETURN_IF_ERROR(ParseShape(value, source, label, &e.view.shape));
  MOBIUS_RETURN_IF_ERROR(ParseOffsets(value, source, label, data_size, &e.begin, &e.end));
  uint64_t nbytes = DTypeSize(e.view.dtype);
  bool overflow = false;
  for (int64_t d : e.view.shape) {
    overflow = overflow || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(d), &nbytes);
  }
  if (overflow || nbytes != e.end - e.begin) {
    return Invalid(
        source, absl::StrFormat("%s: shape/size mismatch: shape [%s] x %s needs %s bytes but "
                                "data_offsets [%d, %d] cover %d",
                                label, absl::StrJoin(e.view.shape, ", "), DTypeName(e.view.dtype),
                                overflow ? "more than 2^64" : absl::StrCat(nbytes), e.begin, e.end,
                                e.end - e.begin));
  }
  e.view.nbytes = static_cast<size_t>(nbytes);
  return e;
}

absl::Status ParseMetadata(const Json& value, absl::string_view source,
                           std::map<std::string, std::string>* metadata) {
  if (value.is_null()) return absl::OkStatus();
  if (!value.is_object()) return Invalid(source, "\"__metadata__\" is not an object");
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return Invalid(source,
                     absl::StrCat("\"__metadata__\" value for ", Quoted(key), " is not a string"));
    }
    (*metadata)[key] = v.get<std::string>();
  }
  return absl::OkStatus();
}

// Sorted by begin, each range must start at or after the previous one's end. Empty tensors
// (begin == end) may share an offset with anything.
absl::Status CheckNoOverlap(std::vector<Entry>& entries, absl::string_view source) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.view.name < b.view.name;
  });
  const Entry* widest = nullptr;  // the earlier range reaching furthest
  for (const Entry& e : entries) {
    if (widest != nullptr && e.begin < widest->end && e.begin != e.end) {
      return Invalid(source,
                     absl::StrFormat("overlapping data_offsets: %s [%d, %d] and %s [%d, %d]",
                                     TensorLabel(widest->view.name), widest->begin, widest->end,
                                     TensorLabel(e.view.name), e.begin, e.end));
    }
    if (widest == nullptr || e.end > widest->end) widest = &e;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedSafetensors> ParseSafetensors(const uint8_t* data, size_t size,
                                                   absl::string_view source) {
  if (size < 8) {
    return Invalid(source, absl::StrFormat("file is %d bytes, too short for the 8-byte header "
                                           "length",
                                           size));
  }
  const uint64_t header_size = LoadLittleEndian64(data);
  if (header_size > kMaxHeaderBytes) {
    return Invalid(source, absl::StrFormat("header length %d exceeds the limit of %d bytes",
                                           header_size, kMaxHeaderBytes));
  }
  if (header_size > size - 8) {
    return Invalid(source, absl::StrFormat("header length %d runs past the end of the file "
                                           "(%d bytes): truncated file?",
                                           header_size, size));
  }
  const char* text = reinterpret_cast<const char*>(data + 8);
  if (!NestingWithin(text, header_size, kMaxJsonDepth)) {
    return Invalid(source,
                   absl::StrCat("header JSON nests deeper than ", kMaxJsonDepth, " levels"));
  }
  const Json header = Json::parse(text, text + header_size, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return Invalid(source, "header is not valid JSON");
  if (!header.is_object()) return Invalid(source, "header is not a JSON object");

  const uint64_t data_size = size - 8 - header_size;
  const uint8_t* data_section = data + 8 + header_size;
  ParsedSafetensors parsed;
  std::vector<Entry> entries;
  entries.reserve(header.size());
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      MOBIUS_RETURN_IF_ERROR(ParseMetadata(value, source, &parsed.metadata));
      continue;
    }
    MOBIUS_ASSIGN_OR_RETURN(Entry e, ParseEntry(key, value, source, data_size));
    entries.push_back(std::move(e));
  }
  MOBIUS_RETURN_IF_ERROR(CheckNoOverlap(entries, source));
  parsed.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    e.view.data = data_section + e.begin;
    parsed.tensors.push_back(std::move(e.view));
  }
  return parsed;
}

absl::StatusOr<std::map<std::string, std::string>> ParseShardIndex(absl::string_view json,
                                                                   absl::string_view source) {
  if (!NestingWithin(json.data(), json.size(), kMaxJsonDepth)) {
    return Invalid(source, absl::StrCat("JSON nests deeper than ", kMaxJsonDepth, " levels"));
  }
  const Json index =
      Json::parse(json.data(), json.data() + json.size(), nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded()) return Invalid(source, "not valid JSON");
  if (!index.is_object()) return Invalid(source, "not a JSON object");
  auto it = index.find("weight_map");
  if (it == index.end()) return Invalid(source, "missing \"weight_map\"");
  if (!it->is_object()) return Invalid(source, "\"weight_map\" is not an object");
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, shard] : it->items()) {
    if (!shard.is_string()) {
      return Invalid(source,
                     absl::StrCat("weight_map: ", TensorLabel(name), ": shard is not a string"));
    }
    const std::string& file = shard.get_ref<const std::string&>();
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
        file.find('\0') != std::string::npos) {
      return Invalid(source,
                     absl::StrCat("weight_map: ", TensorLabel(name), ": shard ", Quoted(file),
                                  " is not a plain file name inside the model directory"));
    }
    weight_map[name] = file;
  }
  return weight_map;
}

}  // namespace mobius::io::internal
