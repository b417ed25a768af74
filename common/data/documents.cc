#include "common/data/documents.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/data/chat_template.h"
#include "common/errors.h"
#include "common/status_macros.h"
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
  const bool chatml = spec.chat_template == "chatml";  // else "plain"
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

namespace {

bool BuiltinTemplate(const std::string& name) { return name == "chatml" || name == "plain"; }

// The model's template for a chat dataset: "" / "model" / "model:NAME", from the first of
// spec.template_dirs that has one.
absl::StatusOr<ChatTemplate> ModelTemplate(const DatasetSpec& spec) {
  std::string name;
  if (absl::StartsWith(spec.chat_template, "model:")) {
    name = spec.chat_template.substr(6);
  } else if (!spec.chat_template.empty() && spec.chat_template != "model") {
    return absl::InvalidArgumentError(absl::StrCat("unknown chat template \"", spec.chat_template,
                                                   "\" (model, model:NAME, chatml, plain)"));
  }
  absl::Status first = absl::NotFoundError(
      "dataset.chat_template: no model directory to take the chat template from; set "
      "dataset.chat_template to chatml or plain");
  for (size_t i = 0; i < spec.template_dirs.size(); ++i) {
    absl::StatusOr<ChatTemplate> t = LoadChatTemplate(spec.template_dirs[i], name);
    if (t.ok() || !absl::IsNotFound(t.status())) return t;
    if (i == 0) first = t.status();
  }
  return first;
}

// One conversation for the renderer: the messages (checked to be a non-empty list) and tools.
absl::StatusOr<std::string> ConversationJson(const std::string& line, const DatasetSpec& spec) {
  if (FirstInvalidUtf8(line) >= 0) return absl::InvalidArgumentError("invalid UTF-8");
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("invalid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  auto it = j.find(spec.messages_field);
  if (it == j.end() || !it->is_array() || it->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field \"", spec.messages_field, "\" must be a non-empty list"));
  }
  nlohmann::json c = {{"messages", *it}};
  if (auto tools = j.find("tools"); tools != j.end() && !tools->is_null()) c["tools"] = *tools;
  return c.dump();
}

// Reads a chat dataset with the model's template: the lines rendered by renderer children
// (RenderConversations), each conversation one whole document with its trained spans.
absl::Status ReadModelChat(std::istream& in, const DatasetSpec& spec, const ChatTemplate& tmpl,
                           ReadResult* result) {
  std::vector<std::string> conversations;
  std::vector<int64_t> line_of;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<std::string> c = ConversationJson(line, spec);
    if (!c.ok()) {
      if (spec.skip_bad_lines) {
        ++result->skipped_lines;
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", spec.path, " line ", line_no, ": ", c.status().message()));
    }
    conversations.push_back(*std::move(c));
    line_of.push_back(line_no);
  }
  if (conversations.empty()) return absl::OkStatus();
  ChatRenderOptions options;
  options.kwargs_json = spec.chat_template_kwargs;
  options.processes = spec.render_processes;
  absl::StatusOr<std::vector<RenderedConversation>> rendered =
      RenderConversations(tmpl, conversations, options);
  if (!rendered.ok()) {
    return absl::Status(rendered.status().code(),
                        absl::StrCat("dataset ", spec.path, ": ", rendered.status().message()));
  }
  for (size_t i = 0; i < rendered->size(); ++i) {
    RenderedConversation& r = (*rendered)[i];
    if (r.skip) {
      ++result->skipped_conversations;
      continue;
    }
    if (!r.error.empty()) {
      if (spec.skip_bad_lines) {
        ++result->skipped_lines;
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset ", spec.path, " line ", line_of[i], ": ",
          r.message >= 0 ? absl::StrCat(spec.messages_field, "[", r.message, "]: ") : "",
          r.error, " (chat template ", tmpl.origin, ")"));
    }
    RawDocument doc;
    doc.whole = true;
    int64_t at = 0;
    for (const auto& [begin, e] : r.spans) {  // ascending; an overlap is merged
      const int64_t b = std::max(begin, at);
      if (b > at) doc.segments.push_back({r.text.substr(at, b - at), false});
      if (e > b) doc.segments.push_back({r.text.substr(b, e - b), true});
      at = std::max(at, e);
    }
    if (at < static_cast<int64_t>(r.text.size())) {
      doc.segments.push_back({r.text.substr(at), false});
    }
    result->documents.push_back(std::move(doc));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReadResult> ReadDocuments(const DatasetSpec& spec) {
  std::optional<ChatTemplate> model_template;
  if (spec.format == DatasetFormat::kJsonlChat && !BuiltinTemplate(spec.chat_template)) {
    MOBIUS_ASSIGN_OR_RETURN(model_template, ModelTemplate(spec));
  }
  std::ifstream in(spec.path, std::ios::binary);
  if (!in.good()) return MOBIUS_ERRNO_ERROR(absl::StrCat("dataset ", spec.path));
  ReadResult result;
  if (model_template) {
    MOBIUS_RETURN_IF_ERROR(ReadModelChat(in, spec, *model_template, &result));
  } else if (spec.format == DatasetFormat::kPlainText) {
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
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset ", spec.path, " has no documents",
        result.skipped_lines > 0 ? absl::StrCat(" (", result.skipped_lines, " bad lines skipped)")
                                 : "",
        result.skipped_conversations > 0
            ? absl::StrCat(" (", result.skipped_conversations,
                           " conversations without an assistant turn skipped)")
            : ""));
  }
  return result;
}

namespace {

// A whole document's tokens and mask: each token's bytes from decoding it alone (their
// concatenation must be the text), a target when its first byte is in a target segment.
absl::Status MaskWhole(const Tokenizer& tokenizer, const RawDocument& doc, const std::string& text,
                       std::vector<int32_t> ids, size_t index, TokenizedDoc* out) {
  if (!tokenizer.MatchesSpecialTokensInText()) {
    return absl::FailedPreconditionError(
        "a model's chat template needs the model's tokenizer.json (its special tokens, e.g. "
        "<|im_end|>, matched in the rendered text); a SentencePiece tokenizer.model encodes them "
        "as plain text: add tokenizer.json, or set dataset.chat_template to chatml or plain");
  }
  std::vector<std::pair<size_t, size_t>> targets;
  size_t at = 0;
  for (const Segment& s : doc.segments) {
    if (s.target) targets.emplace_back(at, at + s.text.size());
    at += s.text.size();
  }
  out->target.assign(ids.size(), 0);
  size_t pos = 0, span = 0;
  bool masked = false;
  for (size_t k = 0; k < ids.size(); ++k) {
    absl::StatusOr<std::string> bytes = tokenizer.Decode({ids[k]}, /*skip_special_tokens=*/false);
    if (!bytes.ok()) return bytes.status();
    if (text.compare(pos, bytes->size(), *bytes) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "document ", index, ": token ", k, " (id ", ids[k], ") does not decode to the text at "
          "byte ", pos, "; the tokenizer changes the rendered chat text (a normalizer?), so its "
          "loss mask cannot be placed"));
    }
    while (span < targets.size() && targets[span].second <= pos) ++span;
    const bool target = span < targets.size() && targets[span].first <= pos;
    out->target[k] = target ? 1 : 0;
    masked |= !target;
    pos += bytes->size();
  }
  if (pos != text.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "document ", index, ": its tokens decode to ", pos, " of the text's ", text.size(),
        " bytes; the loss mask cannot be placed"));
  }
  out->ids = std::move(ids);
  if (!masked) out->target.clear();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TokenizedDoc>> TokenizeDocuments(const Tokenizer& tokenizer,
                                                            const std::vector<RawDocument>& docs,
                                                            int32_t eos_id, int threads) {
  // Whole documents: one text each, encoded in parallel.
  std::vector<std::string> wholes;
  for (const RawDocument& d : docs) {
    if (!d.whole) continue;
    std::string text;
    for (const Segment& s : d.segments) text += s.text;
    wholes.push_back(std::move(text));
  }
  auto whole_ids = tokenizer.EncodeBatch(wholes, /*add_special_tokens=*/false, threads);
  if (!whole_ids.ok()) return whole_ids.status();
  // Flatten every other segment into one batch so all of them are encoded in parallel.
  std::vector<std::string> pieces;
  std::vector<size_t> first_piece(docs.size() + 1, 0);
  for (size_t d = 0; d < docs.size(); ++d) {
    first_piece[d] = pieces.size();
    if (docs[d].whole) continue;
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
  size_t fi = 0, ri = 0, wi = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    TokenizedDoc& t = out[d];
    if (docs[d].whole) {
      MOBIUS_RETURN_IF_ERROR(
          MaskWhole(tokenizer, docs[d], wholes[wi], std::move((*whole_ids)[wi]), d, &t));
      ++wi;
      continue;
    }
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
