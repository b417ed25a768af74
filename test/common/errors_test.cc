#include "common/errors.h"

#include <cerrno>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius {
namespace {

using ::testing::HasSubstr;

TEST(Errors, ErrnoErrorMapsCodeAndNamesTheCallSite) {
  absl::Status s = ErrnoError(ENOENT, "open /nope", "/src/host/topology/x.cc", 42);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("open /nope: No such file or directory"));
  EXPECT_THAT(s.message(), HasSubstr("[host/topology/x.cc:42]"));
  EXPECT_EQ(ErrnoError(EACCES, "x", "a.cc", 1).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoError(EINVAL, "x", "a.cc", 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoError(0, "x", "a.cc", 1).code(), absl::StatusCode::kInternal);
}

TEST(Errors, MacroCapturesErrnoAndLine) {
  errno = EEXIST;
  absl::Status s = MOBIUS_ERRNO_ERROR("mkdir d");
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("errors_test.cc:"));
  errno = ENOMEM;
  absl::Status h = MOBIUS_HWLOC_ERROR("hwloc_topology_load");
  EXPECT_EQ(h.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(h.message(), HasSubstr("hwloc: hwloc_topology_load: Cannot allocate memory"));
}

TEST(Errors, AnnotateKeepsCode) {
  absl::Status s = Annotate(absl::NotFoundError("inner"), "loading model");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "loading model: inner");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace mobius
