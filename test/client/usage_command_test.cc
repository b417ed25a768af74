// `mobius usage --since`: dates, RFC 3339 times and durations back from now; bad input names the
// flag. (The verb against a daemon: test/integration/fairshare_test.py.)
#include "client/usage_command.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::cli {
namespace {

using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

TEST(ParseSinceTest, EmptyIsEverything) { EXPECT_EQ(*ParseSince("", kNow), 0); }

TEST(ParseSinceTest, DurationsCountBackFromNow) {
  EXPECT_EQ(*ParseSince("30d", kNow), absl::ToUnixMillis(kNow - absl::Hours(24 * 30)));
  EXPECT_EQ(*ParseSince("1.5d", kNow), absl::ToUnixMillis(kNow - absl::Hours(36)));
  EXPECT_EQ(*ParseSince("12h", kNow), absl::ToUnixMillis(kNow - absl::Hours(12)));
  EXPECT_EQ(*ParseSince("90m", kNow), absl::ToUnixMillis(kNow - absl::Minutes(90)));
}

TEST(ParseSinceTest, DatesAndTimes) {
  setenv("TZ", "UTC", 1);
  EXPECT_EQ(*ParseSince("2026-12-01T08:00:00Z", kNow),
            absl::ToUnixMillis(absl::FromCivil(absl::CivilSecond(2026, 12, 1, 8, 0, 0),
                                               absl::UTCTimeZone())));
  // A date is the local midnight.
  EXPECT_EQ(*ParseSince("2026-12-01", kNow),
            absl::ToUnixMillis(absl::FromCivil(absl::CivilDay(2026, 12, 1),
                                               absl::LocalTimeZone())));
}

TEST(ParseSinceTest, BadInputNamesTheFlag) {
  for (const char* bad : {"yesterday", "-3d", "12x", "2026-13-45", "d"}) {
    absl::StatusOr<int64_t> r = ParseSince(bad, kNow);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--since")) << bad;
  }
  absl::StatusOr<int64_t> future = ParseSince("2030-01-01", kNow);
  ASSERT_FALSE(future.ok());
  EXPECT_THAT(future.status().message(), HasSubstr("in the future"));
}

}  // namespace
}  // namespace mobius::cli
