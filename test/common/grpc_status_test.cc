#include "common/rpc/grpc_status.h"

#include "gtest/gtest.h"

namespace mobius {
namespace {

TEST(GrpcStatus, RoundTripsEveryCanonicalCode) {
  for (int c = 0; c <= 16; ++c) {
    auto code = static_cast<absl::StatusCode>(c);
    absl::Status s(code, c == 0 ? "" : "field spec.model: missing");
    grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), c);
    if (c != 0) EXPECT_EQ(g.error_message(), "field spec.model: missing");
    EXPECT_EQ(FromGrpcStatus(g), s);
  }
}

}  // namespace
}  // namespace mobius
