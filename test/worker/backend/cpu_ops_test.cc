// The transformer ops on CpuBackend: argument validation at enqueue, data-dependent errors at
// Synchronize, and a cast round trip. The ops' numerics are covered through the layer units against
// the reference (test/worker/model/units_golden_test.cc) and the kernels' own tests.
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace mobius::backend {
namespace {

class CpuOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = *CpuBackend::Create({.op_threads = 2});
    queue_ = *backend_->CreateQueue(QueueKind::kCompute, 0);
  }
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Queue> queue_;
};

TEST_F(CpuOpsTest, RejectsBadThreadCount) {
  EXPECT_EQ(CpuBackend::Create({.op_threads = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CpuOpsTest, ValidatesArgumentsAtEnqueue) {
  DeviceBuffer buf = *backend_->Allocate(4096, "buf");
  AttentionParams att{.shape = {.b = 1, .t = 4, .heads = 3, .kv_heads = 2, .head_dim = 8},
                      .q = buf.at(0), .k = buf.at(0), .v = buf.at(0), .out = buf.at(1024),
                      .lse = static_cast<float*>(buf.at(2048))};
  EXPECT_EQ(backend_->AttentionForward(*queue_, att).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->GeluForward(*queue_, {.n = 8, .inp = nullptr, .out = buf.at(0)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->RopeForward(*queue_, {.b = 1, .t = 1, .nh = 1, .head_dim = 3}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend_->Synchronize(*queue_).ok());
}

TEST_F(CpuOpsTest, TokenOutOfRangeIsReportedBySynchronize) {
  DeviceBuffer tokens = *backend_->Allocate(8, "tokens");
  DeviceBuffer wte = *backend_->Allocate(2 * 4 * 2, "wte");
  DeviceBuffer out = *backend_->Allocate(2 * 2 * 2, "out");
  const int32_t host[2] = {1, 7};
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, host, tokens, 0, 8).ok());
  ASSERT_TRUE(backend_->EmbeddingForward(
                          *queue_, {.b = 1, .t = 2, .c = 2, .vocab = 4,
                                    .tokens = static_cast<const int32_t*>(tokens.data()),
                                    .wte = wte.data(), .out = out.data()})
                  .ok());
  const absl::Status s = backend_->Synchronize(*queue_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(backend_->Synchronize(*queue_).ok());  // reported once
}

TEST_F(CpuOpsTest, ZeroAndCastRoundTrip) {
  const std::vector<float> src = {1.0f, -2.5f, 3.0f, 0.15625f};
  DeviceBuffer f = *backend_->Allocate(16, "f32");
  DeviceBuffer h = *backend_->Allocate(8, "bf16");
  DeviceBuffer back = *backend_->Allocate(16, "back");
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, src.data(), f, 0, 16).ok());
  ASSERT_TRUE(backend_->Cast(*queue_, {.n = 4, .src_type = DType::kFp32, .dst_type = DType::kBf16,
                                       .src = f.data(), .dst = h.data()}).ok());
  ASSERT_TRUE(backend_->Zero(*queue_, {.dst = f.data(), .bytes = 16}).ok());
  ASSERT_TRUE(backend_->Cast(*queue_, {.n = 4, .src_type = DType::kBf16, .dst_type = DType::kFp32,
                                       .src = h.data(), .dst = back.data()}).ok());
  std::vector<float> got(4), zeros(4, -1.0f);
  ASSERT_TRUE(backend_->CopyToHost(*queue_, back, 0, got.data(), 16).ok());
  ASSERT_TRUE(backend_->CopyToHost(*queue_, f, 0, zeros.data(), 16).ok());
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  EXPECT_EQ(got, src);  // all exactly representable in bf16
  EXPECT_EQ(zeros, std::vector<float>(4, 0.0f));
}

}  // namespace
}  // namespace mobius::backend
