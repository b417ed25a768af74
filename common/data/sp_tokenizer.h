// SentencePiece tokenizers (Llama 2, Mistral: `tokenizer.model`) through Debian's
// libsentencepiece. add_special_tokens prepends BOS (as those models' tokenizer configs do) and
// never appends EOS; Decode drops control pieces (<s>, </s>) as SentencePiece does, so
// skip_special_tokens makes no difference.
#ifndef MOBIUS_COMMON_DATA_SP_TOKENIZER_H_
#define MOBIUS_COMMON_DATA_SP_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/data/tokenizer.h"

namespace mobius::data {

// INVALID_ARGUMENT naming the file when it is not a SentencePiece model.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(const std::string& path);

// A model directory's tokenizer: tokenizer.json when it is a byte-level BPE we support, else
// tokenizer.model (SentencePiece); `path` may also name either file directly.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_SP_TOKENIZER_H_
