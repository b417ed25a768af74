// GPT-2's byte-level alphabet: every byte maps to one printable Unicode character, so BPE can run
// on text without unknown symbols (printable ASCII and Latin-1 map to themselves, the remaining 68
// bytes to U+0100..U+0143). Pure, thread-safe.
#ifndef MOBIUS_COMMON_DATA_BYTE_LEVEL_H_
#define MOBIUS_COMMON_DATA_BYTE_LEVEL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace mobius::data {

// UTF-8 of the character that stands for each byte of `bytes`, concatenated.
std::string BytesToByteLevel(absl::string_view bytes);

// The inverse; false if `text` contains a character outside the byte-level alphabet.
bool ByteLevelToBytes(absl::string_view text, std::string* bytes);

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_BYTE_LEVEL_H_
