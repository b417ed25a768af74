// A compiled Unicode regex (PCRE2, UTF + Unicode properties, JIT when available) used by the
// tokenizers' pre-tokenizers. Compiled once, matched from many threads (each match creates its
// own match data).
#ifndef MOBIUS_COMMON_DATA_REGEX_H_
#define MOBIUS_COMMON_DATA_REGEX_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mobius::data {

class Regex {
 public:
  // INVALID_ARGUMENT with PCRE2's message and offset for a pattern that does not compile.
  static absl::StatusOr<std::shared_ptr<const Regex>> Compile(const std::string& pattern);
  ~Regex();

  // Non-overlapping matches of the pattern in `text` (valid UTF-8), as [begin, end) byte ranges,
  // left to right; empty matches are skipped.
  std::vector<std::pair<size_t, size_t>> FindAll(absl::string_view text) const;

 private:
  explicit Regex(void* code) : code_(code) {}
  void* code_;  // pcre2_code_8*
};

// Byte offset of the first invalid UTF-8 sequence in `text`, or -1 if it is valid (overlong
// forms, surrogates and code points above U+10FFFF are invalid).
long FirstInvalidUtf8(absl::string_view text);

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_REGEX_H_
