// Typed, range-checked reading of one JSON object of an untrusted config.json: the accessors
// the parser (model_config_parse.h) and the family files (families/) share. Errors are
// INVALID_ARGUMENT naming the origin and the field path:
//   config.json: field "rope_scaling.factor": must be a positive number (got "8")
//
// Thread-compatible; a ConfigFields refers to (does not own) its object and origin.
#ifndef MOBIUS_COMMON_MODEL_CONFIG_FIELDS_H_
#define MOBIUS_COMMON_MODEL_CONFIG_FIELDS_H_

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mobius::model {

// A JSON value for an error message: compact, invalid UTF-8 replaced, at most 40 characters.
std::string ShowJson(const nlohmann::json& value);

// Integers written as 4096 or 4096.0; nullopt for anything else or beyond int64.
std::optional<int64_t> JsonAsInt64(const nlohmann::json& v);

// Typed, range-checked access to the members of one JSON object; errors name origin and path.
class ConfigFields {
 public:
  ConfigFields(const nlohmann::json& object, absl::string_view origin, std::string prefix)
      : object_(object), origin_(origin), prefix_(std::move(prefix)) {}

  absl::string_view origin() const { return origin_; }

  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(origin_, ": field \"", prefix_, key, "\": ", what));
  }

  // nullptr when the key is absent or null.
  const nlohmann::json* Find(absl::string_view key) const {
    auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // A required integer in [1, max].
  absl::StatusOr<int64_t> Positive(absl::string_view key, int64_t max) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return Error(key, "missing");
    return CheckPositive(key, *v, max);
  }
  absl::StatusOr<int64_t> Positive(absl::string_view key, int64_t max, int64_t fallback) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return fallback;
    return CheckPositive(key, *v, max);
  }

  // A finite number > 0.
  absl::StatusOr<double> PositiveNumber(absl::string_view key,
                                        std::optional<double> fallback) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Error(key, "missing");
    }
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0) {
      return Error(key, absl::StrCat("must be a positive number (got ", ShowJson(*v), ")"));
    }
    return v->get<double>();
  }

  // A finite number >= 0.
  absl::StatusOr<double> NonNegativeNumber(absl::string_view key, double fallback) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0) {
      return Error(key, absl::StrCat("must be a number >= 0 (got ", ShowJson(*v), ")"));
    }
    return v->get<double>();
  }

  // A list of integers in [0, max) (empty when absent).
  absl::StatusOr<std::vector<int64_t>> IndexList(absl::string_view key, int64_t max) const {
    const nlohmann::json* v = Find(key);
    std::vector<int64_t> out;
    if (v == nullptr) return out;
    if (!v->is_array()) return Error(key, absl::StrCat("must be a list (got ", ShowJson(*v), ")"));
    for (const nlohmann::json& e : *v) {
      std::optional<int64_t> n = JsonAsInt64(e);
      if (!n || *n < 0 || *n >= max) {
        return Error(key, absl::StrCat("must hold integers in [0, ", max, ") (got ", ShowJson(e),
                                       ")"));
      }
      out.push_back(*n);
    }
    return out;
  }

  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean())
      return Error(key, absl::StrCat("must be true or false (got ", ShowJson(*v), ")"));
    return v->get<bool>();
  }

  absl::StatusOr<std::optional<std::string>> String(absl::string_view key) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string())
      return Error(key, absl::StrCat("must be a string (got ", ShowJson(*v), ")"));
    return std::optional<std::string>(v->get<std::string>());
  }

  // An integer token id or a list of them (the first is taken); -1 when absent or an empty list.
  absl::StatusOr<int64_t> TokenId(absl::string_view key, int64_t vocab_size) const {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return -1;
    const nlohmann::json* id = v;
    if (v->is_array()) {
      if (v->empty()) return -1;
      id = &(*v)[0];
    }
    std::optional<int64_t> n = JsonAsInt64(*id);
    if (!n || *n < 0 || *n >= vocab_size) {
      return Error(key, absl::StrCat("must be a token id in [0, ", vocab_size, ") (got ",
                                     ShowJson(*v), ")"));
    }
    return *n;
  }

 private:
  absl::StatusOr<int64_t> CheckPositive(absl::string_view key, const nlohmann::json& v,
                                        int64_t max) const {
    std::optional<int64_t> n = JsonAsInt64(v);
    if (!n || *n <= 0) {
      return Error(key, absl::StrCat("must be a positive integer (got ", ShowJson(v), ")"));
    }
    if (*n > max) return Error(key, absl::StrCat(*n, " is more than the supported ", max));
    return *n;
  }

  const nlohmann::json& object_;
  absl::string_view origin_;
  std::string prefix_;
};

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_CONFIG_FIELDS_H_
