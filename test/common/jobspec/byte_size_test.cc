#include "common/jobspec/byte_size.h"

#include <cstdint>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::jobspec {
namespace {

using ::testing::HasSubstr;

int64_t Parse(const char* text) {
  absl::StatusOr<int64_t> v = ParseByteSize(text);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status();
  return v.ok() ? *v : -1;
}

TEST(ByteSizeTest, UnitsAndSpelling) {
  EXPECT_EQ(Parse("0"), 0);
  EXPECT_EQ(Parse("4096"), 4096);
  EXPECT_EQ(Parse("17B"), 17);
  EXPECT_EQ(Parse("1KB"), 1000);
  EXPECT_EQ(Parse("1KiB"), 1024);
  EXPECT_EQ(Parse("20GiB"), int64_t{20} << 30);
  EXPECT_EQ(Parse("20 GiB"), int64_t{20} << 30);
  EXPECT_EQ(Parse("  20gib "), int64_t{20} << 30);
  EXPECT_EQ(Parse("3MB"), 3000000);
  EXPECT_EQ(Parse("2TB"), 2000000000000);
  EXPECT_EQ(Parse("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(Parse("1PiB"), int64_t{1} << 50);
  EXPECT_EQ(Parse("7PB"), 7000000000000000);
}

TEST(ByteSizeTest, FractionsAreExactAndRoundToNearestByte) {
  EXPECT_EQ(Parse("1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(Parse("0.5KiB"), 512);
  EXPECT_EQ(Parse(".25MiB"), 262144);
  EXPECT_EQ(Parse("0.1TiB"), 109951162778);  // 109951162777.6 -> nearest
  EXPECT_EQ(Parse("1.0001KB"), 1000);         // 1000.1 -> 1000
  EXPECT_EQ(Parse("2.5B"), 3);                // half rounds up
}

TEST(ByteSizeTest, RejectsWithTheReason) {
  struct Case {
    const char* text;
    const char* why;
  };
  for (const Case& c : {Case{"", "a number"}, Case{"GiB", "a number"}, Case{"-1GiB", "a number"},
                        Case{"20G", "unknown unit \"G\""}, Case{"20 gigs", "unknown unit"},
                        Case{"1.GiB", "digits expected"}, Case{"1e9", "unknown unit"},
                        Case{"9223372036854775808", "too large"},
                        Case{"8EiB", "unknown unit"}, Case{"9000000PiB", "2^63-1"},
                        Case{"0x10", "unknown unit"}, Case{"12 34", "unknown unit"}}) {
    absl::StatusOr<int64_t> v = ParseByteSize(c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(v.status().message(), HasSubstr(c.why)) << c.text;
  }
}

TEST(ByteSizeTest, LargestValue) {
  EXPECT_EQ(Parse("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Parse("8191.999PiB"), 9223370910954868965);
}

TEST(ByteSizeTest, Format) {
  EXPECT_EQ(FormatByteSize(0), "0B");
  EXPECT_EQ(FormatByteSize(1000), "1000B");
  EXPECT_EQ(FormatByteSize(1024), "1KiB");
  EXPECT_EQ(FormatByteSize(1536), "1.5KiB");
  EXPECT_EQ(FormatByteSize(int64_t{20} << 30), "20GiB");
  EXPECT_EQ(FormatByteSize(int64_t{3} << 29), "1.5GiB");
  EXPECT_EQ(FormatByteSize(1025), "1025B");
}

TEST(ByteSizeTest, FormatParsesBack) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    int64_t n = static_cast<int64_t>(rng() >> (1 + rng() % 63));
    if (i % 3 == 0) n = (n >> 10) << 10;  // many multiples of KiB, MiB, ...
    absl::StatusOr<int64_t> back = ParseByteSize(FormatByteSize(n));
    ASSERT_TRUE(back.ok()) << n << " -> " << FormatByteSize(n) << ": " << back.status();
    ASSERT_EQ(*back, n) << FormatByteSize(n);
  }
}

}  // namespace
}  // namespace mobius::jobspec
