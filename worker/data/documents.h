// Reading a fine-tuning dataset into documents and tokenizing them for the token file.
//
// Formats:
//   kJsonlText              one JSON object per line, text in `text_field` ("text")
//   kJsonlPromptCompletion  `prompt_field` + `completion_field`; the loss is masked on the prompt
//   kPlainText              the whole file is one document
// Bad lines (invalid JSON, not an object, missing/non-string field, invalid UTF-8) are an
// INVALID_ARGUMENT naming file and line number, or are skipped and counted when skip_bad_lines.
// Blank lines are ignored. An empty dataset is INVALID_ARGUMENT.
#ifndef MOBIUS_WORKER_DATA_DOCUMENTS_H_
#define MOBIUS_WORKER_DATA_DOCUMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/token_file.h"
#include "worker/data/tokenizer.h"

namespace mobius::data {

enum class DatasetFormat { kJsonlText, kJsonlPromptCompletion, kPlainText };

struct DatasetSpec {
  std::string path;
  DatasetFormat format = DatasetFormat::kJsonlText;
  std::string text_field = "text";
  std::string prompt_field = "prompt";
  std::string completion_field = "completion";
  bool skip_bad_lines = false;
};

struct RawDocument {
  std::string prompt;  // empty for plain documents
  std::string text;    // the document, or the completion
};

struct ReadResult {
  std::vector<RawDocument> documents;
  int64_t skipped_lines = 0;
};

absl::StatusOr<ReadResult> ReadDocuments(const DatasetSpec& spec);

// "jsonl" / "prompt_completion" / "text" -> format; INVALID_ARGUMENT otherwise.
absl::StatusOr<DatasetFormat> ParseDatasetFormat(const std::string& name);

// Tokenizes every document (add_special_tokens on the prompt, or on the text when there is no
// prompt), appends `eos_id` (when >= 0) and marks prompt tokens as non-targets.
absl::StatusOr<std::vector<TokenizedDoc>> TokenizeDocuments(const Tokenizer& tokenizer,
                                                            const std::vector<RawDocument>& docs,
                                                            int32_t eos_id, int threads);

}  // namespace mobius::data

#endif  // MOBIUS_WORKER_DATA_DOCUMENTS_H_
