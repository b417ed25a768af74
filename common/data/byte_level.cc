#include "common/data/byte_level.h"

#include <array>
#include <cstdint>
#include <unordered_map>

namespace mobius::data {
namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

struct Tables {
  std::array<std::string, 256> byte_to_char;
  std::unordered_map<uint32_t, uint8_t> char_to_byte;
  Tables() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      uint32_t cp = printable ? b : next++;
      AppendUtf8(cp, &byte_to_char[b]);
      char_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables* tables = new Tables();
  return *tables;
}

}  // namespace

std::string BytesToByteLevel(absl::string_view bytes) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += t.byte_to_char[c];
  return out;
}

bool ByteLevelToBytes(absl::string_view text, std::string* bytes) {
  const Tables& t = GetTables();
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      len = 2;
    } else {
      return false;  // the alphabet ends at U+0143: never more than two UTF-8 bytes
    }
    auto it = t.char_to_byte.find(cp);
    if (it == t.char_to_byte.end()) return false;
    bytes->push_back(static_cast<char>(it->second));
    i += len;
  }
  return true;
}

}  // namespace mobius::data
