#include "worker/checkpoint/bnb4bit.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace mobius::checkpoint {
namespace {

using Json = nlohmann::json;

constexpr const char* kCompanions[] = {".absmax", ".quant_map", ".nested_absmax",
                                       ".nested_quant_map", ".quant_state.bitsandbytes__nf4",
                                       ".quant_state.bitsandbytes__fp4"};

float LoadF32(const void* base, int64_t i) {
  float f;
  std::memcpy(&f, static_cast<const uint8_t*>(base) + 4 * i, sizeof f);
  return f;
}

uint8_t LoadU8(const void* base, int64_t i) { return static_cast<const uint8_t*>(base)[i]; }

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

class Checker {
 public:
  Checker(const FindTensor& find, const std::string& name, const std::string& source)
      : find_(find), name_(name), source_(source) {}

  absl::Status Bad(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": tensor ", name_, " (a bitsandbytes 4-bit weight): ", what));
  }

  // The companion `suffix` with `dtype` and `numel` elements (numel < 0: any).
  absl::StatusOr<const io::TensorView*> Companion(const std::string& suffix, io::DType dtype,
                                                  int64_t numel) const {
    MOBIUS_ASSIGN_OR_RETURN(const io::TensorView* t, find_(name_ + suffix));
    if (t == nullptr) return Bad(absl::StrCat("missing ", name_, suffix));
    if (t->dtype != dtype) {
      return Bad(absl::StrCat(name_, suffix, " is ", io::DTypeName(t->dtype), ", expected ",
                              io::DTypeName(dtype)));
    }
    if (numel >= 0 && t->num_elements() != numel) {
      return Bad(absl::StrCat(name_, suffix, " has ", t->num_elements(), " elements, expected ",
                              numel));
    }
    return t;
  }

  template <size_t N>
  absl::Status Table(const std::string& suffix, std::array<float, N>& out) const {
    MOBIUS_ASSIGN_OR_RETURN(const io::TensorView* t,
                            Companion(suffix, io::DType::kF32, static_cast<int64_t>(N)));
    for (size_t i = 0; i < N; ++i) out[i] = LoadF32(t->data, static_cast<int64_t>(i));
    return absl::OkStatus();
  }

 private:
  const FindTensor& find_;
  const std::string& name_;
  const std::string& source_;
};

bool PowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

bool IsBnb4bitCompanion(absl::string_view name) {
  for (const char* suffix : kCompanions) {
    if (absl::EndsWith(name, suffix)) return true;
  }
  return false;
}

float Bnb4bitWeight::BlockScale(int64_t block) const {
  if (!nested) return LoadF32(absmax->data, block);
  const float scaled = nested_quant_map[LoadU8(absmax->data, block)] *
                       LoadF32(nested_absmax->data, block / nested_blocksize);
  return scaled + nested_offset;
}

void Bnb4bitWeight::Dequantize(int64_t begin, int64_t n, float* out) const {
  int64_t block = -1;
  float scale = 0;
  for (int64_t i = begin; i < begin + n; ++i) {
    if (i / blocksize != block) {
      block = i / blocksize;
      scale = BlockScale(block);
    }
    const uint8_t byte = LoadU8(packed->data, i / 2);
    const int code = (i % 2 == 0) ? byte >> 4 : byte & 0xF;
    out[i - begin] = quant_map[code] * scale;
  }
}

std::optional<numeric::Nf4Tensor> Bnb4bitWeight::AsNf4() const {
  if (quant_type != "nf4" || blocksize != numeric::kNf4BlockSize || !nested ||
      nested_blocksize != numeric::kNf4ScaleBlockSize ||
      std::memcmp(quant_map.data(), numeric::Nf4Code().data(), sizeof quant_map) != 0 ||
      std::memcmp(nested_quant_map.data(), numeric::DynamicCode().data(),
                  sizeof nested_quant_map) != 0) {
    return std::nullopt;
  }
  numeric::Nf4Tensor t;
  t.numel = numel;
  const auto* p = static_cast<const uint8_t*>(packed->data);
  t.packed.assign(p, p + packed->nbytes);
  const auto* c = static_cast<const uint8_t*>(absmax->data);
  t.scale_codes.assign(c, c + absmax->nbytes);
  t.scale_scales.resize(static_cast<size_t>(nested_absmax->num_elements()));
  for (size_t g = 0; g < t.scale_scales.size(); ++g) {
    t.scale_scales[g] = LoadF32(nested_absmax->data, static_cast<int64_t>(g));
  }
  t.scale_offset = nested_offset;
  return t;
}

absl::StatusOr<std::optional<Bnb4bitWeight>> FindBnb4bit(const FindTensor& find,
                                                         const std::string& name,
                                                         const std::vector<int64_t>& expected_shape,
                                                         const std::string& source) {
  const Checker check(find, name, source);
  const io::TensorView* state = nullptr;
  std::string quant_type;
  for (const char* type : {"nf4", "fp4"}) {
    MOBIUS_ASSIGN_OR_RETURN(const io::TensorView* t,
                            find(absl::StrCat(name, ".quant_state.bitsandbytes__", type)));
    if (t == nullptr) continue;
    if (state != nullptr) return check.Bad("both an nf4 and an fp4 quant state");
    state = t, quant_type = type;
  }
  if (state == nullptr) return std::nullopt;
  if (state->dtype != io::DType::kU8) {
    return check.Bad(absl::StrCat("its quant state is ", io::DTypeName(state->dtype),
                                  ", expected U8 (JSON bytes)"));
  }
  const auto* bytes = static_cast<const char*>(state->data);
  const Json j = Json::parse(bytes, bytes + state->nbytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return check.Bad("its quant state is not a JSON object");
  auto integer = [&](const char* key) -> absl::StatusOr<int64_t> {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      return check.Bad(absl::StrCat("quant state \"", key, "\" is missing or not an integer"));
    }
    return j[key].get<int64_t>();
  };
  Bnb4bitWeight w;
  w.name = name;
  w.quant_type = quant_type;
  if (!j.contains("quant_type") || j["quant_type"] != quant_type) {
    return check.Bad(absl::StrCat("quant state \"quant_type\" is not \"", quant_type, "\""));
  }
  if (j.contains("dtype") && j["dtype"].is_string()) w.dtype = j["dtype"].get<std::string>();
  if (!j.contains("shape") || !j["shape"].is_array()) {
    return check.Bad("quant state \"shape\" is missing or not a list");
  }
  for (const Json& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return check.Bad("quant state \"shape\" holds a value that is not a size");
    }
    w.shape.push_back(d.get<int64_t>());
  }
  if (w.shape != expected_shape) {
    return check.Bad(absl::StrCat("its shape is ", ShapeText(w.shape), ", expected ",
                                  ShapeText(expected_shape)));
  }
  w.numel = 1;
  for (int64_t d : w.shape) w.numel *= d;
  MOBIUS_ASSIGN_OR_RETURN(w.blocksize, integer("blocksize"));
  if (!PowerOfTwo(w.blocksize)) {
    return check.Bad(absl::StrCat("blocksize ", w.blocksize, " is not a positive power of two"));
  }
  w.blocks = (w.numel + w.blocksize - 1) / w.blocksize;
  MOBIUS_ASSIGN_OR_RETURN(const io::TensorView* packed, find(name));
  if (packed == nullptr) return check.Bad("the packed codes are missing");
  if (packed->dtype != io::DType::kU8) {
    return check.Bad(absl::StrCat("the packed codes are ", io::DTypeName(packed->dtype),
                                  " (bnb_4bit_quant_storage other than uint8 is not read)"));
  }
  if (packed->num_elements() != (w.numel + 1) / 2) {
    return check.Bad(absl::StrCat("the packed codes are ", packed->num_elements(),
                                  " bytes, expected ", (w.numel + 1) / 2));
  }
  w.packed = packed;
  MOBIUS_RETURN_IF_ERROR(check.Table(".quant_map", w.quant_map));
  w.nested = j.contains("nested_blocksize");
  MOBIUS_ASSIGN_OR_RETURN(
      w.absmax, check.Companion(".absmax", w.nested ? io::DType::kU8 : io::DType::kF32, w.blocks));
  if (w.nested) {
    MOBIUS_ASSIGN_OR_RETURN(w.nested_blocksize, integer("nested_blocksize"));
    if (!PowerOfTwo(w.nested_blocksize)) {
      return check.Bad(absl::StrCat("nested_blocksize ", w.nested_blocksize,
                                    " is not a positive power of two"));
    }
    if (!j.contains("nested_offset") || !j["nested_offset"].is_number()) {
      return check.Bad("quant state \"nested_offset\" is missing or not a number");
    }
    // as_dict wrote the fp32 offset's .item(): a double that holds it exactly.
    w.nested_offset = static_cast<float>(j["nested_offset"].get<double>());
    MOBIUS_ASSIGN_OR_RETURN(
        w.nested_absmax,
        check.Companion(".nested_absmax", io::DType::kF32,
                        (w.blocks + w.nested_blocksize - 1) / w.nested_blocksize));
    MOBIUS_RETURN_IF_ERROR(check.Table(".nested_quant_map", w.nested_quant_map));
  }
  return w;
}

}  // namespace mobius::checkpoint
