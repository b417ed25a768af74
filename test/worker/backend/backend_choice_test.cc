// ChooseBackend without a GPU: "cpu", "auto" falling back with the reason, "cuda" refused clearly,
// unknown names INVALID_ARGUMENT naming the value, and a registered factory taken by name.
#include "worker/backend/backend_choice.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::backend {
namespace {

using ::testing::HasSubstr;

ChooseBackendOptions Options() {
  ChooseBackendOptions o;
  o.cpu.backend.capacity_bytes = uint64_t{1} << 20;
  return o;
}

TEST(BackendChoiceTest, CpuIsTheCpuBackend) {
  absl::StatusOr<ChosenBackend> b = ChooseBackend("cpu", {}, Options());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->kind, BackendKind::kCpu);
  EXPECT_EQ(b->backend->name(), "cpu");
  EXPECT_FALSE(b->fell_back());
}

TEST(BackendChoiceTest, AutoWithoutCudaFallsBackWithTheReason) {
  ASSERT_FALSE(CudaBackendRegistered());  // this test binary registers no CUDA factory
  absl::StatusOr<ChosenBackend> b = ChooseBackend("auto", {}, Options());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->kind, BackendKind::kCpu);
  EXPECT_EQ(b->fallback_reason, "this binary is built without CUDA");
  EXPECT_EQ(FallbackDescription(b->fallback_reason),
            "no usable CUDA device (this binary is built without CUDA); falling back to the CPU "
            "backend");
  ChooseBackendOptions o = Options();
  o.cpu_only_reason = "links are emulated";
  EXPECT_EQ(ChooseBackend("auto", {}, o)->fallback_reason, "links are emulated");
  o = Options();
  o.without_cuda_reason = "this mobius-worker is built without CUDA";
  EXPECT_EQ(ChooseBackend("auto", {}, o)->fallback_reason, o.without_cuda_reason);
}

TEST(BackendChoiceTest, CudaWithoutAGpuIsAClearError) {
  absl::StatusOr<ChosenBackend> b = ChooseBackend("cuda", {}, Options());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.status().message(),
            "backend cuda requested but unusable: this binary is built without CUDA");
  ChooseBackendOptions o = Options();
  o.cpu_only_reason = "ignored by cuda";
  o.cuda_unavailable_reason = "GPU 3 is not in CUDA_VISIBLE_DEVICES=0";
  EXPECT_THAT(ChooseBackend("cuda", {}, o).status().message(),
              HasSubstr("unusable: GPU 3 is not in CUDA_VISIBLE_DEVICES=0"));
}

TEST(BackendChoiceTest, UnknownNamesAreInvalidArguments) {
  for (const char* name : {"tpu", "", "CPU"}) {
    absl::StatusOr<ChosenBackend> b = ChooseBackend(name, {}, Options());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(b.status().message(), HasSubstr(absl::StrCat("(got \"", name, "\")")));
  }
  EXPECT_TRUE(ValidateBackendName("auto").ok());
}

TEST(BackendChoiceTest, ARegisteredFactoryIsTakenAndItsFailureIsTheReason) {
  int calls = 0;
  RegisterCudaBackendFactory(
      [&](const DeviceBackendRequest& r) -> absl::StatusOr<std::unique_ptr<Backend>> {
        ++calls;
        EXPECT_EQ(r.device, 2);
        return absl::FailedPreconditionError("cudaErrorNoDevice: no CUDA-capable device");
      });
  absl::StatusOr<ChosenBackend> b = ChooseBackend("auto", {.device = 2}, Options());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->fallback_reason, "cudaErrorNoDevice: no CUDA-capable device");
  EXPECT_THAT(ChooseBackend("cuda", {.device = 2}, Options()).status().message(),
              HasSubstr("unusable: cudaErrorNoDevice"));
  EXPECT_EQ(calls, 2);
  RegisterCudaBackendFactory(nullptr);
}

}  // namespace
}  // namespace mobius::backend
