#include "common/status_macros.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace mobius {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status QuarterInto(int x, int* out) {
  MOBIUS_ASSIGN_OR_RETURN(int half, Half(x));
  MOBIUS_ASSIGN_OR_RETURN(*out, Half(half));
  return absl::OkStatus();
}

absl::StatusOr<int> Eighth(int x) {
  int q = 0;
  MOBIUS_RETURN_IF_ERROR(QuarterInto(x, &q));
  MOBIUS_ASSIGN_OR_RETURN(auto e, Half(q));
  return e;
}

TEST(StatusMacros, PropagatesValuesAndErrors) {
  int out = 0;
  EXPECT_TRUE(QuarterInto(8, &out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(QuarterInto(6, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QuarterInto(7, &out).message(), "odd");
  ASSERT_TRUE(Eighth(16).ok());
  EXPECT_EQ(*Eighth(16), 2);
  EXPECT_EQ(Eighth(12).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius
