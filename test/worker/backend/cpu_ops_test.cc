// The transformer ops on CpuBackend: argument validation at enqueue, data-dependent errors at
// Synchronize, and a cast round trip. The ops' numerics are covered through the layer units against
// the reference (test/worker/model/units_golden_test.cc) and the kernels' own tests.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "common/numeric/nf4.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/kernels/dropout_mask.h"
#include "worker/optim/adamw.h"

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

// The device optimizer op is the CPU optimizer, bit for bit, for a tensor that spans several
// parallel chunks (tails included), with decay, clipping scale and a bf16 copy out.
TEST_F(CpuOpsTest, AdamWMatchesTheCpuOptimizerBitwise) {
  const int64_t n = 3 * (int64_t{1} << 14) + 37;
  std::vector<float> master(n), m(n), v(n), grad(n);
  for (int64_t i = 0; i < n; ++i) {
    master[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
    m[i] = 1e-3f * static_cast<float>(i % 13);
    v[i] = 1e-6f * static_cast<float>(i % 7);
    grad[i] = 0.02f * static_cast<float>((i * 31) % 41) - 0.4f;
  }
  std::vector<float> ref_master = master, ref_m = m, ref_v = v;
  std::vector<uint16_t> ref_bf16(n);
  const optim::AdamWConfig config{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                                  .weight_decay = 0.1};
  ASSERT_TRUE(optim::AdamWStep(config, 7, 0.5f,
                               {.master = ref_master.data(), .m = ref_m.data(),
                                .v = ref_v.data(), .grad = grad.data(),
                                .bf16_out = ref_bf16.data(), .n = static_cast<size_t>(n)})
                  .ok());
  const uint64_t f32 = 4 * static_cast<uint64_t>(n);
  DeviceBuffer d_master = *backend_->Allocate(f32, "master"), d_m = *backend_->Allocate(f32, "m"),
               d_v = *backend_->Allocate(f32, "v"), d_g = *backend_->Allocate(f32, "g"),
               d_b = *backend_->Allocate(2 * static_cast<uint64_t>(n), "bf16");
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, master.data(), d_master, 0, f32).ok());
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, m.data(), d_m, 0, f32).ok());
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, v.data(), d_v, 0, f32).ok());
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, grad.data(), d_g, 0, f32).ok());
  ASSERT_TRUE(backend_->AdamW(*queue_, {.n = n, .step = 7, .lr = 3e-3, .beta1 = 0.9,
                                        .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                                        .grad_scale = 0.5f,
                                        .master = static_cast<float*>(d_master.data()),
                                        .m = static_cast<float*>(d_m.data()),
                                        .v = static_cast<float*>(d_v.data()),
                                        .grad = static_cast<const float*>(d_g.data()),
                                        .bf16_out = d_b.data()})
                  .ok());
  std::vector<float> got_master(n), got_m(n), got_v(n);
  std::vector<uint16_t> got_bf16(n);
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_master, 0, got_master.data(), f32).ok());
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_m, 0, got_m.data(), f32).ok());
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_v, 0, got_v.data(), f32).ok());
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_b, 0, got_bf16.data(), 2 * n).ok());
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  EXPECT_EQ(got_master, ref_master);
  EXPECT_EQ(got_m, ref_m);
  EXPECT_EQ(got_v, ref_v);
  EXPECT_EQ(got_bf16, ref_bf16);
}

TEST_F(CpuOpsTest, AdamWRejectsBadHyperparameters) {
  DeviceBuffer buf = *backend_->Allocate(64, "buf");
  float* f = static_cast<float*>(buf.data());
  AdamWParams p{.n = 4, .master = f, .m = f + 4, .v = f + 8, .grad = f + 12};
  EXPECT_TRUE(backend_->AdamW(*queue_, p).ok());
  AdamWParams bad = p;
  bad.step = 0;
  EXPECT_EQ(backend_->AdamW(*queue_, bad).code(), absl::StatusCode::kInvalidArgument);
  bad = p;
  bad.beta2 = 1.0;
  const absl::Status s = backend_->AdamW(*queue_, bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("beta2"), std::string::npos) << s;
  bad = p;
  bad.grad = nullptr;
  EXPECT_EQ(backend_->AdamW(*queue_, bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend_->Synchronize(*queue_).ok());
}

TEST_F(CpuOpsTest, SumSquaresAccumulates) {
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f};
  DeviceBuffer d_x = *backend_->Allocate(4 * x.size(), "x");
  DeviceBuffer d_out = *backend_->Allocate(8, "out");
  const double start = 2.0;
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, x.data(), d_x, 0, 4 * x.size()).ok());
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, &start, d_out, 0, 8).ok());
  SumSquaresParams p{.n = 5, .x = static_cast<const float*>(d_x.data()),
                     .out = static_cast<double*>(d_out.data())};
  ASSERT_TRUE(backend_->SumSquares(*queue_, p).ok());
  ASSERT_TRUE(backend_->SumSquares(*queue_, p).ok());
  double got = 0;
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_out, 0, &got, 8).ok());
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  EXPECT_EQ(got, 2.0 + 2 * (1 + 4 + 0.25 + 9 + 0.0625));
  EXPECT_EQ(backend_->SumSquares(*queue_, {.n = 1, .x = nullptr, .out = p.out}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->SumSquares(*queue_, {.n = 1, .x = p.x, .out = p.out, .chunk = -1}).code(),
            absl::StatusCode::kInvalidArgument);
  // Chunk mode: 5 elements in chunks of 2 -> 3 sums, each the optimizer's sum of its chunk.
  DeviceBuffer d_parts = *backend_->Allocate(3 * 8, "parts");
  const std::vector<double> ones = {1.0, 1.0, 1.0};
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, ones.data(), d_parts, 0, 24).ok());
  ASSERT_TRUE(backend_->SumSquares(*queue_, {.n = 5, .x = p.x,
                                             .out = static_cast<double*>(d_parts.data()),
                                             .chunk = 2})
                  .ok());
  std::vector<double> parts(3);
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_parts, 0, parts.data(), 24).ok());
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  EXPECT_EQ(parts, (std::vector<double>{1 + 1 + 4, 1 + 0.25 + 9, 1 + 0.0625}));
}

// LoRA dropout (DropoutParams): each element kept iff DropoutKeep(key, row_offset + row, col)
// and scaled by 1/(1-p); the kept fraction is 1-p; the mask of a row depends on its row in the
// batch, not on the call (two halves with row offsets == one call); the backward accumulates the
// same mask; bad arguments are refused.
TEST_F(CpuOpsTest, DropoutMaskIsCounterBasedAndSplitInvariant) {
  constexpr int64_t kN = 64, kC = 256;
  constexpr float kP = 0.25f;
  std::vector<uint16_t> x(kN * kC);
  for (size_t i = 0; i < x.size(); ++i) x[i] = numeric::Fp32ToBf16(0.01f * (i % 97) - 0.3f);
  DeviceBuffer d_x = *backend_->Allocate(2 * x.size(), "x");
  DeviceBuffer d_out = *backend_->Allocate(4 * x.size(), "out");
  DeviceBuffer d_half = *backend_->Allocate(4 * x.size(), "half");
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, x.data(), d_x, 0, 2 * x.size()).ok());
  const uint64_t key = kernels::LoraDropoutModuleKey(kernels::LoraDropoutStepKey(7, 3), 2);
  DropoutParams p{.n = kN, .c = kC, .inp_type = DType::kBf16, .inp = d_x.data(),
                  .out = static_cast<float*>(d_out.data()), .p = kP, .key = key,
                  .row_offset = 100};
  ASSERT_TRUE(backend_->Dropout(*queue_, p).ok());
  // The same rows in two calls of half the rows each.
  for (int half = 0; half < 2; ++half) {
    DropoutParams h = p;
    h.n = kN / 2;
    h.inp = d_x.at(2 * half * (kN / 2) * kC);
    h.out = static_cast<float*>(d_half.at(4 * half * (kN / 2) * kC));
    h.row_offset = 100 + half * (kN / 2);
    ASSERT_TRUE(backend_->Dropout(*queue_, h).ok());
  }
  std::vector<float> out(x.size()), halves(x.size());
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_out, 0, out.data(), 4 * out.size()).ok());
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_half, 0, halves.data(), 4 * halves.size()).ok());
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  EXPECT_EQ(out, halves);
  int64_t kept = 0;
  const float scale = 1.0f / (1.0f - kP);
  for (int64_t r = 0; r < kN; ++r) {
    for (int64_t c = 0; c < kC; ++c) {
      const bool keep = kernels::DropoutKeep(key, 100 + r, c, kP);
      kept += keep;
      const float want = keep ? numeric::Bf16ToFp32(x[r * kC + c]) * scale : 0.0f;
      ASSERT_EQ(out[r * kC + c], want) << r << "," << c;
    }
  }
  // 16384 Bernoulli(0.75) draws: sd 55; 5 sd.
  EXPECT_NEAR(static_cast<double>(kept), 0.75 * kN * kC, 5 * 55.0);
  // Another key (the next step, another module) draws another mask.
  DropoutParams other = p;
  other.key = kernels::LoraDropoutModuleKey(kernels::LoraDropoutStepKey(7, 4), 2);
  ASSERT_TRUE(backend_->Dropout(*queue_, other).ok());
  std::vector<float> out2(x.size());
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_out, 0, out2.data(), 4 * out2.size()).ok());
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  EXPECT_NE(out, out2);
  // Backward: dx += mask(g) / (1 - p), with the forward's mask.
  std::vector<float> g(x.size(), 1.0f), dx(x.size(), 0.5f);
  DeviceBuffer d_g = *backend_->Allocate(4 * g.size(), "g");
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, g.data(), d_g, 0, 4 * g.size()).ok());
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, dx.data(), d_half, 0, 4 * dx.size()).ok());
  DropoutParams back = p;
  back.inp_type = DType::kFp32;
  back.inp = d_g.data();
  back.out = static_cast<float*>(d_half.data());
  back.accumulate = true;
  ASSERT_TRUE(backend_->Dropout(*queue_, back).ok());
  ASSERT_TRUE(backend_->CopyToHost(*queue_, d_half, 0, dx.data(), 4 * dx.size()).ok());
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  for (int64_t i = 0; i < kN * kC; ++i) {
    const bool keep = kernels::DropoutKeep(key, 100 + i / kC, i % kC, kP);
    ASSERT_EQ(dx[i], keep ? 0.5f + scale : 0.5f) << i;
  }
  // Refused: p out of [0, 1), an fp32-only backward with bf16 input, null pointers.
  for (float bad : {1.0f, -0.1f}) {
    DropoutParams b = p;
    b.p = bad;
    EXPECT_EQ(backend_->Dropout(*queue_, b).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  DropoutParams b = p;
  b.accumulate = true;
  EXPECT_EQ(backend_->Dropout(*queue_, b).code(), absl::StatusCode::kInvalidArgument);
  b = p;
  b.out = nullptr;
  EXPECT_EQ(backend_->Dropout(*queue_, b).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend_->Synchronize(*queue_).ok());
}

// The NF4 dequantise (DequantizeNf4Params) from a blob gives numeric::DequantizeNf4's values rounded
// once, bf16 and fp16, across several scale groups and an odd tail; bad arguments are refused.
TEST_F(CpuOpsTest, DequantizeNf4EqualsTheReference) {
  const int64_t n = 64 * 300 + 7;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.013f * i) * (1 + (i / 64) % 5) * 0.02f;
  const numeric::Nf4Tensor t = numeric::QuantizeNf4(x.data(), n);
  std::vector<uint8_t> blob(numeric::Nf4Bytes(n));
  numeric::WriteNf4Blob(t, blob.data());
  std::vector<float> ref(n);
  numeric::DequantizeNf4(t, ref.data());
  DeviceBuffer d_blob = *backend_->Allocate(blob.size(), "blob");
  DeviceBuffer d_out = *backend_->Allocate(2 * n, "out");
  ASSERT_TRUE(backend_->CopyToDevice(*queue_, blob.data(), d_blob, 0, blob.size()).ok());
  for (DType dt : {DType::kBf16, DType::kF16}) {
    ASSERT_TRUE(backend_->DequantizeNf4(*queue_, {.n = n, .src = d_blob.data(), .dst_type = dt,
                                                  .out = d_out.data()}).ok());
    std::vector<uint16_t> out(n);
    ASSERT_TRUE(backend_->CopyToHost(*queue_, d_out, 0, out.data(), 2 * n).ok());
    ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = dt == DType::kF16 ? numeric::Fp32ToF16(ref[i])
                                              : numeric::Fp32ToBf16(ref[i]);
      ASSERT_EQ(out[i], want) << DTypeName(dt) << " " << i;
    }
  }
  EXPECT_EQ(backend_->DequantizeNf4(*queue_, {.n = n, .src = d_blob.data(), .dst_type = DType::kFp32,
                                              .out = d_out.data()}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->DequantizeNf4(*queue_, {.n = n, .src = nullptr, .out = d_out.data()}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->DequantizeNf4(*queue_, {.n = 8, .src = d_blob.at(2), .out = d_out.data()})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::backend
