// Reading a fine-tuning dataset into documents and tokenizing them for the token file.
//
// Formats:
//   kJsonlText              one JSON object per line, text in `text_field` ("text")
//   kJsonlPromptCompletion  `prompt_field` + `completion_field`; the loss is masked on the prompt
//   kJsonlChat              `messages_field`: [{"role": "system"|"user"|"assistant", "content": ...}]
//                           rendered with a simple template (chat_template "chatml":
//                           "<|im_start|>{role}\n{content}<|im_end|>\n", or "plain":
//                           "{role}: {content}\n"); the loss covers only the assistant turns
//                           (their content and closing marker)
//   kPlainText              the whole file is one document
// Bad lines (invalid JSON, not an object, missing/non-string field, invalid UTF-8) are an
// INVALID_ARGUMENT naming file and line number, or are skipped and counted when skip_bad_lines.
// Blank lines are ignored. An empty dataset is INVALID_ARGUMENT.
#ifndef MOBIUS_COMMON_DATA_DOCUMENTS_H_
#define MOBIUS_COMMON_DATA_DOCUMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/token_file.h"
#include "common/data/tokenizer.h"

namespace mobius::data {

enum class DatasetFormat { kJsonlText, kJsonlPromptCompletion, kJsonlChat, kPlainText };

struct DatasetSpec {
  std::string path;
  DatasetFormat format = DatasetFormat::kJsonlText;
  std::string text_field = "text";
  std::string prompt_field = "prompt";
  std::string completion_field = "completion";
  bool skip_bad_lines = false;
  std::string messages_field = "messages";
  std::string chat_template = "chatml";  // chatml | plain
};

// A document is a sequence of text segments, each either trained on (target) or context only.
struct Segment {
  std::string text;
  bool target = true;
};

struct RawDocument {
  std::vector<Segment> segments;
};

struct ReadResult {
  std::vector<RawDocument> documents;
  int64_t skipped_lines = 0;
};

absl::StatusOr<ReadResult> ReadDocuments(const DatasetSpec& spec);

// One JSONL line of a kJsonl* format; the error says what is wrong (without file and line).
absl::StatusOr<RawDocument> ParseDocumentLine(const std::string& line, const DatasetSpec& spec);

// "jsonl" / "prompt_completion" / "chat" / "text" -> format; INVALID_ARGUMENT otherwise.
absl::StatusOr<DatasetFormat> ParseDatasetFormat(const std::string& name);

// Tokenizes every document segment by segment (the tokenizer's special tokens, e.g. BOS, only
// before the first segment), appends `eos_id` (when >= 0, as a target) and marks the tokens of
// non-target segments. Documents whose segments are all targets get no mask.
absl::StatusOr<std::vector<TokenizedDoc>> TokenizeDocuments(const Tokenizer& tokenizer,
                                                            const std::vector<RawDocument>& docs,
                                                            int32_t eos_id, int threads);

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_DOCUMENTS_H_
