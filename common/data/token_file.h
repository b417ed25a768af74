// The flat token file: a corpus tokenized once and reused, memory-mapped so corpora larger than
// RAM work.
//
// Layout (little-endian):
//   [0, 64)    header: magic "MOBTOKv1", u32 header_bytes (64), u32 token_bytes (2 or 4),
//              u64 vocab_size, u64 num_tokens, u64 num_docs, u64 flags (bit 0: loss mask present),
//              u64 reserved x2
//   tokens     num_tokens x u16/u32 (documents back to back, each ending with its EOS if any)
//   doc_starts (num_docs + 1) x u64: token index where each document starts; last = num_tokens
//   mask       num_tokens x u8 when flag bit 0: 1 = this token is a training target, 0 = not
//              (prompt tokens of prompt/completion data)
// Headerless llm.c-style files (raw u16/u32 ids) open with OpenRaw.
//
// Thread-safe after Open (read-only).
#ifndef MOBIUS_COMMON_DATA_TOKEN_FILE_H_
#define MOBIUS_COMMON_DATA_TOKEN_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::data {

class TokenFile {
 public:
  // NOT_FOUND / PERMISSION_DENIED for the file; INVALID_ARGUMENT naming the file for a bad magic,
  // sizes that do not match the file length, or document starts that are not increasing.
  static absl::StatusOr<std::unique_ptr<TokenFile>> Open(const std::string& path);
  // A headerless file of token ids; one document; no mask.
  static absl::StatusOr<std::unique_ptr<TokenFile>> OpenRaw(const std::string& path,
                                                            int token_bytes, int64_t vocab_size);
  ~TokenFile();

  int64_t num_tokens() const { return num_tokens_; }
  int64_t num_docs() const { return num_docs_; }
  int64_t vocab_size() const { return vocab_size_; }
  int token_bytes() const { return token_bytes_; }
  bool has_mask() const { return mask_ != nullptr; }
  uint32_t token(int64_t i) const;          // REQUIRES: 0 <= i < num_tokens()
  bool is_target(int64_t i) const;          // true without a mask
  int64_t doc_start(int64_t d) const;       // REQUIRES: 0 <= d <= num_docs()

 private:
  TokenFile() = default;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint8_t* tokens_ = nullptr;
  const uint64_t* doc_starts_ = nullptr;
  const uint8_t* mask_ = nullptr;
  int64_t num_tokens_ = 0, num_docs_ = 0, vocab_size_ = 0;
  int token_bytes_ = 2;
};

struct TokenizedDoc {
  std::vector<int32_t> ids;
  std::vector<uint8_t> target;  // empty: every token is a target
};

// Writes a token file atomically (temp file + fsync + rename). u16 when vocab_size <= 65536.
// INVALID_ARGUMENT naming document and position for an id outside [0, vocab_size).
absl::Status WriteTokenFile(const std::string& path, const std::vector<TokenizedDoc>& docs,
                            int64_t vocab_size);

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_TOKEN_FILE_H_
