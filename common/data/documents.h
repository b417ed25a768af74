// Reading a fine-tuning dataset into documents and tokenizing them for the token file.
//
// Formats:
//   kJsonlText              one JSON object per line, text in `text_field` ("text")
//   kJsonlPromptCompletion  `prompt_field` + `completion_field`; the loss is masked on the prompt
//   kJsonlChat              `messages_field`: [{"role": ..., "content": ...}, ...] (and "tools"
//                           when the line has them), rendered with the model's own template
//                           (chat_template "" or "model", or "model:NAME" for a named one:
//                           chat_template.h, Hugging Face's semantics; the loss covers each
//                           assistant turn's text and its end-of-turn token(s), as
//                           chat_render.py finds them; a conversation without an assistant turn
//                           is skipped and counted) or a built-in one ("chatml":
//                           "<|im_start|>{role}\n{content}<|im_end|>\n", "plain":
//                           "{role}: {content}\n"; roles system, user, assistant; the loss on the
//                           assistant contents and their closing marker). "" means the model's
//                           template, and is an error naming the fix when the model has none.
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
  std::string chat_template;  // "" | model | model:NAME | chatml | plain (see kJsonlChat)
  // Where the model's template is looked for, in order (model directories); the first with one
  // wins.
  std::vector<std::string> template_dirs;
  std::string chat_template_kwargs = "{}";  // JSON object: extra template variables
  int render_processes = 0;                 // template renderer children at once; 0: per core
};

// A document is a sequence of text segments, each either trained on (target) or context only.
struct Segment {
  std::string text;
  bool target = true;
};

struct RawDocument {
  std::vector<Segment> segments;
  // Tokenized as one text (the segments joined, no special tokens added, no end-of-document id
  // appended: a model template renders its own), a token being a target when its first byte is
  // in a target segment; false: segment by segment (TokenizeDocuments).
  bool whole = false;
};

struct ReadResult {
  std::vector<RawDocument> documents;
  int64_t skipped_lines = 0;
  int64_t skipped_conversations = 0;  // chat with a model template: no assistant turn
};

absl::StatusOr<ReadResult> ReadDocuments(const DatasetSpec& spec);

// One JSONL line of a kJsonl* format; the error says what is wrong (without file and line).
absl::StatusOr<RawDocument> ParseDocumentLine(const std::string& line, const DatasetSpec& spec);

// "jsonl" / "prompt_completion" / "chat" / "text" -> format; INVALID_ARGUMENT otherwise.
absl::StatusOr<DatasetFormat> ParseDatasetFormat(const std::string& name);

// Tokenizes every document segment by segment (the tokenizer's special tokens, e.g. BOS, only
// before the first segment), appends `eos_id` (when >= 0, as a target) and marks the tokens of
// non-target segments; a `whole` document as RawDocument::whole says (INVALID_ARGUMENT when the
// tokenizer's tokens do not decode back to the text, e.g. a normalizer changed it). Documents
// whose tokens are all targets get no mask.
absl::StatusOr<std::vector<TokenizedDoc>> TokenizeDocuments(const Tokenizer& tokenizer,
                                                            const std::vector<RawDocument>& docs,
                                                            int32_t eos_id, int threads);

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_DOCUMENTS_H_
