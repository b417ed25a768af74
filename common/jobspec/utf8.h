// Internal to common/jobspec: UTF-8 checks shared by the YAML reader and the validator.
//
// Protobuf string fields carry only UTF-8, and yaml-cpp 0.7 misbehaves on malformed UTF-8 (a
// stray lead byte in a comment can make it allocate without bound), so text is checked before it
// reaches either.
#ifndef MOBIUS_COMMON_JOBSPEC_UTF8_H_
#define MOBIUS_COMMON_JOBSPEC_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mobius::jobspec::internal {

// Decodes the code point at s[i]; returns its length in bytes, or 0 when the bytes there are not
// well-formed UTF-8 (truncated, overlong, surrogate, beyond U+10FFFF).
inline int DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  int len;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2, *cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, *cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, *cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (int k = 1; k < len; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (cc & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (*cp < kMin[len] || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

inline bool IsUtf8(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    const int len = DecodeUtf8(s, i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace mobius::jobspec::internal

#endif  // MOBIUS_COMMON_JOBSPEC_UTF8_H_
