#include "common/data/documents.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "nlohmann/json.hpp"
#include "common/data/regex.h"

namespace mobius::data {
namespace {

// Renders chat messages with the spec's template; assistant turns are the targets.
absl::Status ParseChat(const nlohmann::json& j, const DatasetSpec& spec, RawDocument* doc) {
  auto it = j.find(spec.messages_field);
  if (it == j.end() || !it->is_array() || it->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field \"", spec.messages_field, "\" must be a non-empty list"));
  }
  const bool chatml = spec.chat_template == "chatml";
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& m = (*it)[i];
    std::string where = absl::StrCat(spec.messages_field, "[", i, "]");
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", where, "\" needs string fields \"role\" and \"content\""));
    }
    std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat("\"", where, ".role\": unknown role \"", role,
                                                     "\" (system, user, assistant)"));
    }
    const bool target = role == "assistant";
    std::string head = chatml ? absl::StrCat("<|im_start|>", role, "\n") : absl::StrCat(role, ": ");
    std::string tail = chatml ? "<|im_end|>\n" : "\n";
    doc->segments.push_back({std::move(head), false});
    doc->segments.push_back({absl::StrCat(m["content"].get<std::string>(), tail), target});
  }
  return absl::OkStatus();
}

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
    std::string prompt, completion;
    absl::Status s = field(spec.prompt_field, &prompt);
    if (s.ok()) s = field(spec.completion_field, &completion);
    if (!s.ok()) return s;
    doc->segments = {{std::move(prompt), false}, {std::move(completion), true}};
    return absl::OkStatus();
  }
  if (spec.format == DatasetFormat::kJsonlChat) return ParseChat(j, spec, doc);
  std::string text;
  absl::Status s = field(spec.text_field, &text);
  if (s.ok()) doc->segments = {{std::move(text), true}};
  return s;
}

}  // namespace

absl::StatusOr<RawDocument> ParseDocumentLine(const std::string& line, const DatasetSpec& spec) {
  RawDocument doc;
  absl::Status s = ParseLine(line, spec, &doc);
  if (!s.ok()) return s;
  return doc;
}

absl::StatusOr<DatasetFormat> ParseDatasetFormat(const std::string& name) {
  if (name == "jsonl") return DatasetFormat::kJsonlText;
  if (name == "prompt_completion") return DatasetFormat::kJsonlPromptCompletion;
  if (name == "chat") return DatasetFormat::kJsonlChat;
  if (name == "text") return DatasetFormat::kPlainText;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dataset format \"", name, "\" (jsonl, prompt_completion, chat, text)"));
}

absl::StatusOr<ReadResult> ReadDocuments(const DatasetSpec& spec) {
  if (spec.chat_template != "chatml" && spec.chat_template != "plain") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown chat template \"", spec.chat_template, "\" (chatml, plain)"));
  }
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
    if (!text.empty()) result.documents.push_back({{{std::move(text), true}}});
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
  // Flatten every segment into one batch so all of them are encoded in parallel.
  std::vector<std::string> pieces;
  std::vector<size_t> first_piece(docs.size() + 1, 0);
  for (size_t d = 0; d < docs.size(); ++d) {
    first_piece[d] = pieces.size();
    for (const Segment& s : docs[d].segments) pieces.push_back(s.text);
  }
  first_piece[docs.size()] = pieces.size();
  // Special tokens (BOS) go before the first segment only: encode first segments separately.
  std::vector<std::string> firsts, rests;
  std::vector<bool> is_first(pieces.size(), false);
  for (size_t d = 0; d < docs.size(); ++d) {
    if (first_piece[d] < first_piece[d + 1]) is_first[first_piece[d]] = true;
  }
  for (size_t i = 0; i < pieces.size(); ++i) (is_first[i] ? firsts : rests).push_back(pieces[i]);
  auto first_ids = tokenizer.EncodeBatch(firsts, /*add_special_tokens=*/true, threads);
  if (!first_ids.ok()) return first_ids.status();
  auto rest_ids = tokenizer.EncodeBatch(rests, /*add_special_tokens=*/false, threads);
  if (!rest_ids.ok()) return rest_ids.status();

  std::vector<TokenizedDoc> out(docs.size());
  size_t fi = 0, ri = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    TokenizedDoc& t = out[d];
    bool masked = false;
    for (size_t k = 0; k < docs[d].segments.size(); ++k) {
      size_t i = first_piece[d] + k;
      const std::vector<int32_t>& ids = is_first[i] ? (*first_ids)[fi++] : (*rest_ids)[ri++];
      const bool target = docs[d].segments[k].target;
      masked |= !target;
      t.ids.insert(t.ids.end(), ids.begin(), ids.end());
      t.target.insert(t.target.end(), ids.size(), target ? 1 : 0);
    }
    if (eos_id >= 0) {
      t.ids.push_back(eos_id);
      t.target.push_back(1);
    }
    if (!masked) t.target.clear();
  }
  return out;
}

}  // namespace mobius::data
