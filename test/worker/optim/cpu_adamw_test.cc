// CpuAdamW (many tensors, thread pool), the global gradient norm, clipping and argument checks.
#include <bit>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "test/worker/optim/adamw_test_util.h"
#include "worker/optim/adamw.h"
#include "worker/optim/thread_pool.h"

namespace mobius::optim {
namespace {

using testing::TensorState;

// Sizes around the chunk boundary, an empty tensor and tiny ones.
const std::vector<size_t> kTensorSizes = {CpuAdamW::kChunkElements * 3 + 5, 0, 1, 17,
                                          CpuAdamW::kChunkElements, 100003};

std::vector<TensorState> MakeTensors() {
  std::vector<TensorState> out;
  for (size_t i = 0; i < kTensorSizes.size(); ++i) {
    out.push_back(TensorState::Random(kTensorSizes[i], 100 + static_cast<uint32_t>(i)));
  }
  return out;
}

std::vector<ParamBuffers> BuffersOf(std::vector<TensorState>& tensors) {
  std::vector<ParamBuffers> out;
  for (size_t i = 0; i < tensors.size(); ++i) out.push_back(tensors[i].Buffers(i % 2 == 0));
  return out;
}

std::unique_ptr<CpuAdamW> MakeOptimizer(int threads, Kernel kernel = Kernel::kAuto) {
  CpuAdamW::Options options;
  options.config = {.lr = 2e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  options.num_threads = threads;
  options.kernel = kernel;
  absl::StatusOr<std::unique_ptr<CpuAdamW>> opt = CpuAdamW::Create(options);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return std::move(*opt);
}

// Any thread count gives bit for bit what AdamWStep gives on each tensor alone.
TEST(CpuAdamWTest, MatchesSingleTensorStepForAnyThreadCount) {
  std::vector<TensorState> expected = MakeTensors();
  auto reference = MakeOptimizer(1);
  for (int64_t step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_TRUE(AdamWStep(reference->config(), step, 0.8f, expected[i].Buffers(i % 2 == 0),
                            reference->kernel())
                      .ok());
    }
  }
  for (int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(threads);
    std::vector<TensorState> tensors = MakeTensors();
    auto opt = MakeOptimizer(threads);
    EXPECT_EQ(opt->num_threads(), threads);
    const std::vector<ParamBuffers> buffers = BuffersOf(tensors);
    for (int64_t step = 1; step <= 3; ++step) ASSERT_TRUE(opt->Step(step, 0.8f, buffers).ok());
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(tensors[i].master, expected[i].master) << "tensor " << i;
      EXPECT_EQ(tensors[i].m, expected[i].m) << "tensor " << i;
      EXPECT_EQ(tensors[i].v, expected[i].v) << "tensor " << i;
      EXPECT_EQ(tensors[i].bf16, expected[i].bf16) << "tensor " << i;
    }
  }
}

// out_fp16 per tensor (mixed in one Step): the copies are fp16 bits, Fp32ToF16 of the new master,
// and everything else is what the bf16 run computes.
TEST(CpuAdamWTest, Fp16CopiesPerTensor) {
  std::vector<TensorState> bf16 = MakeTensors(), fp16 = MakeTensors();
  std::vector<ParamBuffers> bf16_buffers = BuffersOf(bf16), fp16_buffers = BuffersOf(fp16);
  for (size_t i = 0; i < fp16_buffers.size(); i += 2) fp16_buffers[i].out_fp16 = true;
  auto opt = MakeOptimizer(3);
  for (int64_t step = 1; step <= 2; ++step) {
    ASSERT_TRUE(opt->Step(step, 0.8f, bf16_buffers).ok());
    ASSERT_TRUE(opt->Step(step, 0.8f, fp16_buffers).ok());
  }
  for (size_t i = 0; i < fp16.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "tensor " << i);
    EXPECT_EQ(fp16[i].master, bf16[i].master);
    if (!fp16_buffers[i].out_fp16) {
      EXPECT_EQ(fp16[i].bf16, bf16[i].bf16);
      continue;
    }
    for (size_t j = 0; j < fp16[i].master.size(); ++j) {
      ASSERT_EQ(fp16[i].bf16[j], numeric::Fp32ToF16(fp16[i].master[j])) << j;
    }
  }
}

TEST(CpuAdamWTest, DefaultThreadsAndLearningRate) {
  auto opt = MakeOptimizer(0);
  EXPECT_GE(opt->num_threads(), 1);
  EXPECT_NE(opt->kernel(), Kernel::kAuto);
  ASSERT_TRUE(opt->SetLearningRate(5e-4).ok());
  EXPECT_EQ(opt->config().lr, 5e-4);
  EXPECT_EQ(opt->SetLearningRate(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt->SetLearningRate(NAN).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt->config().lr, 5e-4);
}

TEST(CpuAdamWTest, GlobalGradNormIsExactAndThreadCountInvariant) {
  std::vector<TensorState> tensors = MakeTensors();
  std::vector<std::span<const float>> grads;
  double expect = 0;
  for (const TensorState& t : tensors) {
    grads.emplace_back(t.grad);
    for (float g : t.grad) expect += static_cast<double>(g) * g;
  }
  expect = std::sqrt(expect);
  const double one = MakeOptimizer(1)->GlobalGradNorm(grads);
  EXPECT_NEAR(one, expect, 1e-12 * expect);
  for (int threads : {2, 3, 8}) {
    EXPECT_EQ(std::bit_cast<uint64_t>(MakeOptimizer(threads)->GlobalGradNorm(grads)),
              std::bit_cast<uint64_t>(one))
        << threads;
  }
  EXPECT_EQ(MakeOptimizer(2)->GlobalGradNorm({}), 0.0);
}

TEST(ClipScaleTest, PyTorchClipGradNormFactor) {
  EXPECT_EQ(ClipScale(0.0, 1.0), 1.0f);
  EXPECT_EQ(ClipScale(0.5, 1.0), 1.0f);
  EXPECT_EQ(ClipScale(4.0, 1.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(ClipScale(1.0, 1.0), static_cast<float>(1.0 / (1.0 + 1e-6)));  // just below 1
  EXPECT_EQ(ClipScale(std::numeric_limits<double>::infinity(), 1.0), 0.0f);
  EXPECT_TRUE(std::isnan(ClipScale(NAN, 1.0)));
}

TEST(AdamWValidationTest, RejectsBadArguments) {
  TensorState s = TensorState::Random(8, 1);
  const AdamWConfig ok;
  EXPECT_EQ(AdamWStep(ok, 0, 1.0f, s.Buffers()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AdamWStep(ok, 1, NAN, s.Buffers()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AdamWStep({.beta1 = 1.0}, 1, 1.0f, s.Buffers()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AdamWStep({.eps = 0}, 1, 1.0f, s.Buffers()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AdamWStep({.weight_decay = -1}, 1, 1.0f, s.Buffers()).code(),
            absl::StatusCode::kInvalidArgument);
  ParamBuffers null_grad = s.Buffers();
  null_grad.grad = nullptr;
  EXPECT_EQ(AdamWStep(ok, 1, 1.0f, null_grad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(AdamWStep(ok, 1, 1.0f, ParamBuffers{}).ok());  // empty tensor, null buffers: fine

  // CpuAdamW::Step checks every tensor before touching any.
  auto opt = MakeOptimizer(2);
  TensorState before = s;
  std::vector<ParamBuffers> buffers = {s.Buffers(), null_grad};
  EXPECT_EQ(opt->Step(1, 1.0f, buffers).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.master, before.master);

  EXPECT_EQ(CpuAdamW::Create({.num_threads = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  if (!KernelAvailable(Kernel::kAvx512)) {
    EXPECT_EQ(AdamWStep(ok, 1, 1.0f, s.Buffers(), Kernel::kAvx512).code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(CpuAdamW::Create({.kernel = Kernel::kAvx512}).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(ThreadPoolTest, RunsEveryIndexOnceAndIsReusable) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  for (size_t n : {0u, 1u, 3u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    for (int round = 0; round < 20; ++round) {
      pool.ParallelFor(n, [&](size_t i) { hits[i].fetch_add(1); });
    }
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 20) << i;
  }
}

}  // namespace
}  // namespace mobius::optim
