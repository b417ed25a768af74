#include "common/jobspec/byte_size.h"

#include <cctype>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mobius::jobspec {
namespace {

struct Unit {
  const char* name;
  int64_t bytes;
};

constexpr int64_t kKi = int64_t{1} << 10;
constexpr Unit kUnits[] = {
    {"b", 1},
    {"kb", 1000},        {"mb", 1000 * 1000},  {"gb", 1000 * 1000 * 1000},
    {"tb", int64_t{1000} * 1000 * 1000 * 1000},
    {"pb", int64_t{1000} * 1000 * 1000 * 1000 * 1000},
    {"kib", kKi},        {"mib", kKi * kKi},   {"gib", kKi * kKi * kKi},
    {"tib", kKi * kKi * kKi * kKi},            {"pib", kKi * kKi * kKi * kKi * kKi},
};
constexpr const char* kUnitList = "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("not a byte size: \"", text, "\" (", why, ")"));
  };
  absl::string_view s = absl::StripAsciiWhitespace(text);
  size_t i = 0;
  // The number: digits [. digits], kept exact as an integer part and a fraction in decimal digits
  // (a double would turn "0.1TiB" into a byte count that does not round-trip).
  __int128 whole = 0;
  std::string fraction;
  const __int128 kLimit = static_cast<__int128>(std::numeric_limits<int64_t>::max());
  while (i < s.size() && IsDigit(s[i])) {
    whole = whole * 10 + (s[i] - '0');
    if (whole > kLimit) return bad("too large");
    ++i;
  }
  const bool had_whole = i > 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) {
      if (fraction.size() < 18) fraction.push_back(s[i]);  // finer than a byte of a PiB: ignored
      ++i;
    }
    if (fraction.empty()) return bad("digits expected after the decimal point");
  }
  if (!had_whole && fraction.empty()) return bad("a number with an optional unit expected");
  while (i < s.size() && s[i] == ' ') ++i;
  const std::string unit = absl::AsciiStrToLower(s.substr(i));
  int64_t unit_bytes = unit.empty() ? 1 : 0;
  for (const Unit& u : kUnits) {
    if (unit == u.name) unit_bytes = u.bytes;
  }
  if (unit_bytes == 0) {
    return bad(absl::StrCat("unknown unit \"", s.substr(i), "\"; use one of ", kUnitList));
  }
  __int128 bytes = whole * unit_bytes;
  if (bytes > kLimit) return bad("more than 2^63-1 bytes");
  if (!fraction.empty()) {
    __int128 scale = 1;
    __int128 digits = 0;
    for (char c : fraction) {
      digits = digits * 10 + (c - '0');
      scale *= 10;
    }
    bytes += (digits * unit_bytes + scale / 2) / scale;  // nearest byte
    if (bytes > kLimit) return bad("more than 2^63-1 bytes");
  }
  return static_cast<int64_t>(bytes);
}

std::string FormatByteSize(int64_t bytes) {
  static constexpr Unit kBinary[] = {{"PiB", kKi * kKi * kKi * kKi * kKi},
                                     {"TiB", kKi * kKi * kKi * kKi},
                                     {"GiB", kKi * kKi * kKi},
                                     {"MiB", kKi * kKi},
                                     {"KiB", kKi}};
  for (const Unit& u : kBinary) {
    // Up to three decimals, and only when they are exact, so that parsing gives `bytes` back.
    if (bytes < u.bytes || (static_cast<__int128>(bytes) * 1000) % u.bytes != 0) continue;
    const int64_t whole = bytes / u.bytes;
    int64_t milli = static_cast<int64_t>((static_cast<__int128>(bytes % u.bytes) * 1000) / u.bytes);
    std::string out = absl::StrCat(whole);
    if (milli != 0) {
      std::string frac = absl::StrCat(milli + 1000).substr(1);  // zero-padded to three digits
      while (frac.back() == '0') frac.pop_back();
      absl::StrAppend(&out, ".", frac);
    }
    return absl::StrCat(out, u.name);
  }
  return absl::StrCat(bytes, "B");
}

}  // namespace mobius::jobspec
