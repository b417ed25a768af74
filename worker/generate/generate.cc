#include "worker/generate/generate.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace mobius::generate {

absl::StatusOr<GenerateResult> Generate(Decoder& decoder, const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options, bool keep_logits) {
  MOBIUS_RETURN_IF_ERROR(ValidateSampling(options.sampling));
  if (options.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_new_tokens must be >= 1, got ", options.max_new_tokens));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  const int64_t v = decoder.config().vocab_size;
  decoder.Reset();
  Sampler sampler(options.sampling);
  GenerateResult result;
  MOBIUS_ASSIGN_OR_RETURN(std::vector<float> logits,
                          decoder.Append(prompt.data(), static_cast<int64_t>(prompt.size())));
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int32_t next = sampler.Next(logits.data(), v);
    result.tokens.push_back(next);
    if (keep_logits) result.logits.push_back(logits);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) !=
        options.stop_ids.end()) {
      result.stopped = true;
      break;
    }
    if (i + 1 == options.max_new_tokens) break;  // the last token needs no forward
    MOBIUS_ASSIGN_OR_RETURN(logits, decoder.Append(&next, 1));
  }
  return result;
}

namespace {

// eos_token_id of one JSON file: nullopt when the file or the key is absent (or null).
absl::StatusOr<std::optional<std::vector<int32_t>>> EosOf(const std::string& path,
                                                          int64_t vocab_size) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return std::nullopt;
  const nlohmann::json& e = j["eos_token_id"];
  std::vector<int32_t> ids;
  for (const nlohmann::json& id : e.is_array() ? e : nlohmann::json::array({e})) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": eos_token_id must be token ids in [0, ", vocab_size, ") (got ", e.dump(), ")"));
    }
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> StopTokenIds(const std::string& model_dir,
                                                  int64_t vocab_size) {
  for (const char* file : {"/generation_config.json", "/config.json"}) {
    MOBIUS_ASSIGN_OR_RETURN(std::optional<std::vector<int32_t>> ids,
                            EosOf(model_dir + file, vocab_size));
    if (ids) return *ids;
  }
  return std::vector<int32_t>{};
}

}  // namespace mobius::generate
