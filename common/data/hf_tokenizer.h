// Hugging Face `tokenizer.json` byte-level BPE: the tokenizers of GPT-2, Llama 3 and Qwen2/Qwen3.
//
// Supported pieces of the format (anything else is INVALID_ARGUMENT naming the JSON path, never a
// silent mis-tokenisation):
//   normalizer      null | NFC | NFKC | NFD | NFKD | Sequence of those
//   pre_tokenizer   ByteLevel (add_prefix_space, use_regex with GPT-2's pattern) | Split (Regex
//                   pattern, behavior Isolated or Removed, invert false) | Sequence of those;
//                   regexes run in PCRE2 with Unicode properties (same syntax as Oniguruma for
//                   these patterns)
//   model           BPE with vocab, merges (["a b"] or [["a","b"]]), ignore_merges, unk_token
//   added_tokens    matched literally in the raw text, longest first (lstrip/rstrip/single_word
//                   are not applied)
//   post_processor  null | ByteLevel | TemplateProcessing (single) | Sequence of those
//   decoder         ByteLevel
// SentencePiece-style tokenizers (Llama 2, Mistral: Metaspace / byte_fallback) are not handled here.
#ifndef MOBIUS_COMMON_DATA_HF_TOKENIZER_H_
#define MOBIUS_COMMON_DATA_HF_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/tokenizer.h"

namespace mobius::data {

// `json_text` is the content of a tokenizer.json; `origin` names it in errors.
absl::StatusOr<std::unique_ptr<Tokenizer>> ParseHfTokenizer(absl::string_view json_text,
                                                            absl::string_view origin);

// Loads `<path>` or `<path>/tokenizer.json` when `path` is a model directory.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& path);

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_HF_TOKENIZER_H_
