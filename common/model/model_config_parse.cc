#include "common/model/model_config_parse.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using json = nlohmann::json;

constexpr const char* kSupportedTypes = "gpt2, llama, mistral, qwen2, qwen3";

// A JSON value for an error message: compact, invalid UTF-8 replaced (dump() would throw), short.
std::string Show(const json& value) {
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Integers written as 4096 or 4096.0; nullopt for anything else or beyond int64.
std::optional<int64_t> AsInt64(const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 9007199254740992.0) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

// Typed, range-checked access to the members of one JSON object; errors name origin and path.
class Fields {
 public:
  Fields(const json& object, absl::string_view origin, std::string prefix)
      : object_(object), origin_(origin), prefix_(std::move(prefix)) {}

  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(origin_, ": field \"", prefix_, key, "\": ", what));
  }

  // nullptr when the key is absent or null.
  const json* Find(absl::string_view key) const {
    auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // A required integer in [1, max].
  absl::StatusOr<int64_t> Positive(absl::string_view key, int64_t max) const {
    const json* v = Find(key);
    if (v == nullptr) return Error(key, "missing");
    return CheckPositive(key, *v, max);
  }
  absl::StatusOr<int64_t> Positive(absl::string_view key, int64_t max, int64_t fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    return CheckPositive(key, *v, max);
  }

  // A finite number > 0.
  absl::StatusOr<double> PositiveNumber(absl::string_view key, std::optional<double> fallback) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Error(key, "missing");
    }
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0) {
      return Error(key, absl::StrCat("must be a positive number (got ", Show(*v), ")"));
    }
    return v->get<double>();
  }

  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error(key, absl::StrCat("must be true or false (got ", Show(*v), ")"));
    return v->get<bool>();
  }

  absl::StatusOr<std::optional<std::string>> String(absl::string_view key) const {
    const json* v = Find(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return Error(key, absl::StrCat("must be a string (got ", Show(*v), ")"));
    return std::optional<std::string>(v->get<std::string>());
  }

  // An integer token id or a list of them (the first is taken); -1 when absent or an empty list.
  absl::StatusOr<int64_t> TokenId(absl::string_view key, int64_t vocab_size) const {
    const json* v = Find(key);
    if (v == nullptr) return -1;
    const json* id = v;
    if (v->is_array()) {
      if (v->empty()) return -1;
      id = &(*v)[0];
    }
    std::optional<int64_t> n = AsInt64(*id);
    if (!n || *n < 0 || *n >= vocab_size) {
      return Error(key, absl::StrCat("must be a token id in [0, ", vocab_size, ") (got ", Show(*v),
                                     ")"));
    }
    return *n;
  }

 private:
  absl::StatusOr<int64_t> CheckPositive(absl::string_view key, const json& v, int64_t max) const {
    std::optional<int64_t> n = AsInt64(v);
    if (!n || *n <= 0) {
      return Error(key, absl::StrCat("must be a positive integer (got ", Show(v), ")"));
    }
    if (*n > max) return Error(key, absl::StrCat(*n, " is more than the supported ", max));
    return *n;
  }

  const json& object_;
  absl::string_view origin_;
  std::string prefix_;
};

absl::Status ParseRopeScaling(const Fields& f, ModelConfig& c, absl::string_view origin) {
  const json* v = f.Find("rope_scaling");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_object()) {
    return f.Error("rope_scaling", absl::StrCat("must be an object or null (got ", Show(*v), ")"));
  }
  Fields r(*v, origin, "rope_scaling.");
  MOBIUS_ASSIGN_OR_RETURN(std::optional<std::string> type, r.String("rope_type"));
  absl::string_view type_key = "rope_type";
  if (!type) {
    MOBIUS_ASSIGN_OR_RETURN(type, r.String("type"));
    type_key = "type";
  }
  if (!type) return r.Error("rope_type", "missing");
  RopeScaling& s = c.rope_scaling;
  if (*type == "default") return absl::OkStatus();
  if (*type == "linear") {
    s.type = RopeScaling::Type::kLinear;
    MOBIUS_ASSIGN_OR_RETURN(s.factor, r.PositiveNumber("factor", std::nullopt));
    return absl::OkStatus();
  }
  if (*type == "llama3") {
    s.type = RopeScaling::Type::kLlama3;
    MOBIUS_ASSIGN_OR_RETURN(s.factor, r.PositiveNumber("factor", std::nullopt));
    MOBIUS_ASSIGN_OR_RETURN(s.low_freq_factor, r.PositiveNumber("low_freq_factor", std::nullopt));
    MOBIUS_ASSIGN_OR_RETURN(s.high_freq_factor, r.PositiveNumber("high_freq_factor", std::nullopt));
    MOBIUS_ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                            r.Positive("original_max_position_embeddings", kMaxPositions));
    // The llama3 rule interpolates between the two wavelength bounds; it divides by their gap.
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      return r.Error("high_freq_factor", absl::StrCat("must be greater than low_freq_factor (",
                                                      s.high_freq_factor, " <= ",
                                                      s.low_freq_factor, ")"));
    }
    return absl::OkStatus();
  }
  return r.Error(type_key, absl::StrCat("unsupported rope scaling \"", *type,
                                        "\" (supported: default, linear, llama3)"));
}

absl::Status ParseGpt2(const Fields& f, ModelConfig& c) {
  MOBIUS_ASSIGN_OR_RETURN(c.hidden_size, f.Positive("n_embd", kMaxHiddenSize));
  MOBIUS_ASSIGN_OR_RETURN(c.num_layers, f.Positive("n_layer", kMaxLayers));
  MOBIUS_ASSIGN_OR_RETURN(c.num_heads, f.Positive("n_head", kMaxHeads));
  MOBIUS_ASSIGN_OR_RETURN(c.intermediate_size,
                          f.Positive("n_inner", kMaxIntermediateSize, 4 * c.hidden_size));
  MOBIUS_ASSIGN_OR_RETURN(c.max_position_embeddings, f.Positive("n_positions", kMaxPositions));
  MOBIUS_ASSIGN_OR_RETURN(c.norm_eps, f.PositiveNumber("layer_norm_epsilon", 1e-5));
  MOBIUS_ASSIGN_OR_RETURN(std::optional<std::string> act, f.String("activation_function"));
  // Both names are GELU with the tanh approximation; plain "gelu" (erf) is different math.
  if (act && *act != "gelu_new" && *act != "gelu_pytorch_tanh") {
    return f.Error("activation_function",
                   absl::StrCat("unsupported \"", *act, "\" (supported: gelu_new, gelu_pytorch_tanh)"));
  }
  MOBIUS_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", true));
  if (c.hidden_size % c.num_heads != 0) {
    return f.Error("n_head", absl::StrCat("n_embd ", c.hidden_size, " is not divisible by ",
                                          c.num_heads, " heads"));
  }
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  c.norm = NormKind::kLayerNorm;
  c.mlp = MlpKind::kGeluTanh;
  c.position = PositionKind::kLearned;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = true;
  return absl::OkStatus();
}

absl::Status ParseLlamaLike(const Fields& f, ModelConfig& c, absl::string_view origin) {
  MOBIUS_ASSIGN_OR_RETURN(c.hidden_size, f.Positive("hidden_size", kMaxHiddenSize));
  MOBIUS_ASSIGN_OR_RETURN(c.num_layers, f.Positive("num_hidden_layers", kMaxLayers));
  MOBIUS_ASSIGN_OR_RETURN(c.num_heads, f.Positive("num_attention_heads", kMaxHeads));
  const int64_t default_kv = c.family == Family::kMistral ? 8 : c.num_heads;
  MOBIUS_ASSIGN_OR_RETURN(c.num_kv_heads, f.Positive("num_key_value_heads", kMaxHeads, default_kv));
  MOBIUS_ASSIGN_OR_RETURN(c.intermediate_size, f.Positive("intermediate_size", kMaxIntermediateSize));
  MOBIUS_ASSIGN_OR_RETURN(c.max_position_embeddings,
                          f.Positive("max_position_embeddings", kMaxPositions));
  MOBIUS_ASSIGN_OR_RETURN(c.norm_eps, f.PositiveNumber("rms_norm_eps", 1e-6));
  MOBIUS_ASSIGN_OR_RETURN(c.rope_theta, f.PositiveNumber("rope_theta", 10000.0));
  MOBIUS_RETURN_IF_ERROR(ParseRopeScaling(f, c, origin));
  MOBIUS_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  MOBIUS_ASSIGN_OR_RETURN(std::optional<std::string> act, f.String("hidden_act"));
  if (act && *act != "silu") {
    return f.Error("hidden_act", absl::StrCat("unsupported \"", *act, "\" (supported: silu)"));
  }

  if (c.family == Family::kQwen3) {
    MOBIUS_ASSIGN_OR_RETURN(c.head_dim, f.Positive("head_dim", kMaxHeadDim));
  } else if (c.family != Family::kQwen2 && f.Find("head_dim") != nullptr) {
    MOBIUS_ASSIGN_OR_RETURN(c.head_dim, f.Positive("head_dim", kMaxHeadDim));
  } else if (c.hidden_size % c.num_heads != 0) {
    return f.Error("num_attention_heads",
                   absl::StrCat("hidden_size ", c.hidden_size, " is not divisible by ", c.num_heads,
                                " heads (and no head_dim is given)"));
  } else {
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.num_heads * c.head_dim > kMaxAttentionWidth) {
    return f.Error("head_dim", absl::StrCat(c.num_heads, " heads x ", c.head_dim,
                                            " is more than the supported ", kMaxAttentionWidth));
  }
  if (c.head_dim % 2 != 0) {
    return f.Error("head_dim", absl::StrCat("must be even for rotary embeddings (head_dim is ",
                                            c.head_dim, ")"));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return f.Error("num_key_value_heads",
                   absl::StrCat(c.num_heads, " attention heads are not divisible by ",
                                c.num_kv_heads, " key/value heads"));
  }

  c.norm = NormKind::kRmsNorm;
  c.mlp = MlpKind::kSwiGlu;
  c.position = PositionKind::kRope;
  switch (c.family) {
    case Family::kLlama: {
      MOBIUS_ASSIGN_OR_RETURN(c.attention_bias, f.Bool("attention_bias", false));
      c.attention_output_bias = c.attention_bias;
      MOBIUS_ASSIGN_OR_RETURN(c.mlp_bias, f.Bool("mlp_bias", false));
      break;
    }
    case Family::kMistral: {  // MistralAttention/MLP hard-code bias=False
      MOBIUS_ASSIGN_OR_RETURN(c.sliding_window,
                              f.Positive("sliding_window", kMaxPositions, int64_t{0}));
      break;
    }
    case Family::kQwen2:  // Qwen2Attention: q/k/v bias=True, o_proj bias=False
      c.attention_bias = true;
      break;
    case Family::kQwen3: {
      MOBIUS_ASSIGN_OR_RETURN(c.attention_bias, f.Bool("attention_bias", false));
      c.attention_output_bias = c.attention_bias;
      c.qk_norm = true;
      break;
    }
    case Family::kGpt2:
      break;
  }
  if (c.family == Family::kQwen2 || c.family == Family::kQwen3) {
    MOBIUS_ASSIGN_OR_RETURN(bool use_sliding_window, f.Bool("use_sliding_window", false));
    if (use_sliding_window) {
      return f.Error("use_sliding_window",
                     "true is not supported (per-layer sliding windows are not modelled)");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Family> ParseFamily(const Fields& f, std::string& model_type) {
  MOBIUS_ASSIGN_OR_RETURN(std::optional<std::string> type, f.String("model_type"));
  if (!type) return f.Error("model_type", "missing");
  model_type = *type;
  for (Family family :
       {Family::kGpt2, Family::kLlama, Family::kMistral, Family::kQwen2, Family::kQwen3}) {
    if (model_type == FamilyName(family)) return family;
  }
  std::string shown = Show(json(model_type));
  return f.Error("model_type",
                 absl::StrCat("unknown model_type ", shown, " (supported: ", kSupportedTypes, ")"));
}

// nlohmann's DOM parser, run without exceptions, only says "discarded"; a second pass with this
// SAX handler recovers the parse error's position and reason.
struct ParseErrorCollector : nlohmann::json_sax<json> {
  std::string message;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    message = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, ..." -> "parse error at line 1, ..."
    size_t bracket = message.find("] ");
    if (bracket != std::string::npos) message = message.substr(bracket + 2);
    return false;
  }
};

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text, absl::string_view origin) {
  if (static_cast<int64_t>(json_text.size()) > kMaxConfigJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", json_text.size(),
                                                   " bytes, more than the 1 MiB a config may have"));
  }
  json root = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    ParseErrorCollector collector;
    json::sax_parse(json_text.begin(), json_text.end(), &collector);
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": not valid JSON: ", collector.message.empty() ? "parse error" : collector.message));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": must be a JSON object (got ", Show(root), ")"));
  }
  Fields f(root, origin, "");
  ModelConfig c;
  MOBIUS_ASSIGN_OR_RETURN(c.family, ParseFamily(f, c.model_type));
  MOBIUS_ASSIGN_OR_RETURN(c.vocab_size, f.Positive("vocab_size", kMaxVocabSize));
  if (c.family == Family::kGpt2) {
    MOBIUS_RETURN_IF_ERROR(ParseGpt2(f, c));
  } else {
    MOBIUS_RETURN_IF_ERROR(ParseLlamaLike(f, c, origin));
  }
  MOBIUS_ASSIGN_OR_RETURN(c.bos_token_id, f.TokenId("bos_token_id", c.vocab_size));
  MOBIUS_ASSIGN_OR_RETURN(c.eos_token_id, f.TokenId("eos_token_id", c.vocab_size));
  // The parser's checks name JSON keys; this backstop names struct members and must never fire.
  absl::Status valid = ValidateModelConfig(c);
  if (!valid.ok()) return Annotate(valid, origin);
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path_or_dir) {
  std::string path = path_or_dir;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("model config ", path));
  if (S_ISDIR(st.st_mode)) {
    path = absl::StrCat(path, "/config.json");
    if (stat(path.c_str(), &st) != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("model config ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("model config ", path, ": not a regular file"));
  }
  if (st.st_size > kMaxConfigJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.st_size,
                                                   " bytes, more than the 1 MiB a config may have"));
  }
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return MOBIUS_ERRNO_ERROR(absl::StrCat("model config ", path));
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), file)) > 0 &&
         static_cast<int64_t>(text.size()) <= kMaxConfigJsonBytes) {
    text.append(buf, n);
  }
  const bool failed = std::ferror(file) != 0;
  const int saved_errno = errno;
  std::fclose(file);
  if (failed) return ErrnoError(saved_errno, absl::StrCat("model config ", path), __FILE__, __LINE__);
  return ParseModelConfig(text, path);
}

}  // namespace mobius::model
