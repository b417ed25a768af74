#include "worker/data/documents.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "nlohmann/json.hpp"
#include "worker/data/regex.h"

namespace mobius::data {
namespace {

// Extracts a document from one JSONL line; the error says what is wrong (no location).
absl::Status ParseLine(const std::string& line, const DatasetSpec& spec, RawDocument* doc) {
  if (FirstInvalidUtf8(line) >= 0) return absl::InvalidArgumentError("invalid UTF-8");
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("invalid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  auto field = [&](const std::string& name, std::string* out) -> absl::Status {
    auto it = j.find(name);
    if (it == j.end()) return absl::InvalidArgumentError(absl::StrCat("missing field \"", name, "\""));
    if (!it->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("field \"", name, "\" is not a string"));
    }
    *out = it->get<std::string>();
    return absl::OkStatus();
  };
  if (spec.format == DatasetFormat::kJsonlPromptCompletion) {
    absl::Status s = field(spec.prompt_field, &doc->prompt);
    if (!s.ok()) return s;
    return field(spec.completion_field, &doc->text);
  }
  return field(spec.text_field, &doc->text);
}

}  // namespace

absl::StatusOr<DatasetFormat> ParseDatasetFormat(const std::string& name) {
  if (name == "jsonl") return DatasetFormat::kJsonlText;
  if (name == "prompt_completion") return DatasetFormat::kJsonlPromptCompletion;
  if (name == "text") return DatasetFormat::kPlainText;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dataset format \"", name, "\" (jsonl, prompt_completion, text)"));
}

absl::StatusOr<ReadResult> ReadDocuments(const DatasetSpec& spec) {
  std::ifstream in(spec.path, std::ios::binary);
  if (!in.good()) return MOBIUS_ERRNO_ERROR(absl::StrCat("dataset ", spec.path));
  ReadResult result;
  if (spec.format == DatasetFormat::kPlainText) {
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (long bad = FirstInvalidUtf8(text); bad >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", spec.path, ": invalid UTF-8 at byte offset ", bad));
    }
    if (!text.empty()) result.documents.push_back({"", std::move(text)});
  } else {
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      RawDocument doc;
      absl::Status s = ParseLine(line, spec, &doc);
      if (!s.ok()) {
        if (spec.skip_bad_lines) {
          ++result.skipped_lines;
          continue;
        }
        return absl::InvalidArgumentError(
            absl::StrCat("dataset ", spec.path, " line ", line_no, ": ", s.message()));
      }
      result.documents.push_back(std::move(doc));
    }
  }
  if (result.documents.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("dataset ", spec.path, " has no documents",
                                                   result.skipped_lines > 0
                                                       ? absl::StrCat(" (", result.skipped_lines,
                                                                      " bad lines skipped)")
                                                       : ""));
  }
  return result;
}

absl::StatusOr<std::vector<TokenizedDoc>> TokenizeDocuments(const Tokenizer& tokenizer,
                                                            const std::vector<RawDocument>& docs,
                                                            int32_t eos_id, int threads) {
  std::vector<std::string> prompts, texts;
  bool any_prompt = false;
  for (const RawDocument& d : docs) {
    prompts.push_back(d.prompt);
    texts.push_back(d.text);
    any_prompt |= !d.prompt.empty();
  }
  // With prompts the special tokens (BOS) belong to the prompt; the completion follows directly.
  auto text_ids = tokenizer.EncodeBatch(texts, /*add_special_tokens=*/!any_prompt, threads);
  if (!text_ids.ok()) return text_ids.status();
  std::vector<std::vector<int32_t>> prompt_ids(docs.size());
  if (any_prompt) {
    auto p = tokenizer.EncodeBatch(prompts, /*add_special_tokens=*/true, threads);
    if (!p.ok()) return p.status();
    prompt_ids = std::move(*p);
  }
  std::vector<TokenizedDoc> out(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    TokenizedDoc& d = out[i];
    d.ids = std::move(prompt_ids[i]);
    if (any_prompt) d.target.assign(d.ids.size(), 0);
    d.ids.insert(d.ids.end(), (*text_ids)[i].begin(), (*text_ids)[i].end());
    if (eos_id >= 0) d.ids.push_back(eos_id);
    if (any_prompt) d.target.resize(d.ids.size(), 1);
  }
  return out;
}

}  // namespace mobius::data
