// Text <-> token ids with a model's own tokenizer.
//
// Implementations: Hugging Face `tokenizer.json` byte-level BPE (GPT-2, Llama 3, Qwen2/3;
// hf_tokenizer.h). Encode/Decode are const and thread-safe; EncodeBatch spreads documents over
// threads and returns them in input order.
#ifndef MOBIUS_COMMON_DATA_TOKENIZER_H_
#define MOBIUS_COMMON_DATA_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mobius::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // INVALID_ARGUMENT for text that is not valid UTF-8 (the message gives the byte offset).
  // add_special_tokens applies the tokenizer's post-processor (e.g. Llama 3's BOS).
  virtual absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                                      bool add_special_tokens) const = 0;

  // Raw bytes of the decoded text (byte-level tokens may split a UTF-8 sequence; the
  // concatenation of a whole encoding is the original text). INVALID_ARGUMENT naming the position
  // of an id outside the vocabulary.
  virtual absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids,
                                             bool skip_special_tokens) const = 0;

  virtual int64_t vocab_size() const = 0;  // largest id + 1, added tokens included
  virtual int32_t TokenToId(absl::string_view token) const = 0;  // -1 if unknown

  // Whether Encode matches the added/special tokens written in the text (Hugging Face's
  // tokenizer.json does; SentencePiece's tokenizer.model encodes "<|im_end|>" as plain text) and
  // each token decodes alone to its exact bytes: what a rendered chat template needs
  // (documents.h, RawDocument::whole).
  virtual bool MatchesSpecialTokensInText() const { return false; }

  // Encodes documents on `threads` threads (<= 0: hardware concurrency); first error wins.
  absl::StatusOr<std::vector<std::vector<int32_t>>> EncodeBatch(
      const std::vector<std::string>& documents, bool add_special_tokens, int threads) const;
};

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_TOKENIZER_H_
