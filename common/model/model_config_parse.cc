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
#include "common/model/config_fields.h"
#include "common/model/family.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using json = nlohmann::json;

absl::StatusOr<const FamilyDescriptor*> ParseFamily(const ConfigFields& f,
                                                    std::string& model_type) {
  MOBIUS_ASSIGN_OR_RETURN(std::optional<std::string> type, f.String("model_type"));
  if (!type) return f.Error("model_type", "missing");
  model_type = *type;
  if (const FamilyDescriptor* family = FindFamily(model_type)) return family;
  return f.Error("model_type", absl::StrCat("unknown model_type ", ShowJson(json(model_type)),
                                            " (supported: ", SupportedModelTypes(), ")"));
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
    // "...; last read: 'root:x:0:0'" quotes the file: the position and the reason are enough.
    size_t quoted = message.find("; last read:");
    if (quoted != std::string::npos) message.resize(quoted);
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
        absl::StrCat(origin, ": must be a JSON object (got ", ShowJson(root), ")"));
  }
  ConfigFields f(root, origin, "");
  ModelConfig c;
  MOBIUS_ASSIGN_OR_RETURN(const FamilyDescriptor* family, ParseFamily(f, c.model_type));
  c.family = family->family;
  MOBIUS_ASSIGN_OR_RETURN(c.vocab_size, f.Positive("vocab_size", kMaxVocabSize));
  MOBIUS_RETURN_IF_ERROR(family->parse(f, c));
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
