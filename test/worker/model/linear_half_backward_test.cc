// The fp16 backward of a linear layer (linear.h half_backward, training.precision fp16) on the CPU
// backend against a float64 host computation of PyTorch autocast's order:
//   dy16 = fp16(dy)                               (an fp32 dy is rounded once first)
//   dx   = fp16(dy16 W)                           (= when !accumulate, fp16(dx + dy16 W) else)
//   dW  += fp32(fp16(dy16^T x)) per call          (each call's weight gradient rounded to fp16;
//                                                  a call's token chunks sum in fp16 first)
//   db  += column sums of dy16                    (fp32)
// Tolerance: the CPU GEMM sums in fp32 (40 and 12 terms here) and rounds once, so each fp16 result
// is within one fp16 step (2^-10 relative) of float64's rounding; dW after two calls within the
// sum of the two calls' steps. Also: a strided weight (a column slice of GPT-2's fused c_attn)
// keeps the fp32-output dW (dW += dy16^T x in fp32), and the refusals (an adapter, or a 16-bit
// dx without the fp16 backward) come back as INVALID_ARGUMENT before anything runs.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/model/linear.h"

namespace mobius::units {
namespace {

using backend::DeviceBuffer;
using backend::DType;

constexpr int64_t kN = 12, kIn = 40, kOut = 24;

float F16Round(double x) { return numeric::F16ToFp32(numeric::Fp32ToF16(static_cast<float>(x))); }
// One fp16 step at |x| (at least the smallest normal's).
double F16Step(double x) {
  return std::ldexp(1.0, std::max(std::ilogb(std::max(std::fabs(x), 6.1e-5)), -14) - 10);
}

class LinearHalfBackwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    be_ = *backend::CpuBackend::Create({.op_threads = 2});
    q_ = *be_->CreateQueue(backend::QueueKind::kCompute, 0);
  }
  template <typename T>
  DeviceBuffer Upload(const std::vector<T>& host, const char* name) {
    DeviceBuffer d = *be_->Allocate(sizeof(T) * host.size(), name);
    EXPECT_TRUE(be_->CopyToDevice(*q_, host.data(), d, 0, sizeof(T) * host.size()).ok());
    EXPECT_TRUE(be_->Synchronize(*q_).ok());
    return d;
  }
  template <typename T>
  std::vector<T> Download(const DeviceBuffer& d, int64_t n) {
    std::vector<T> host(n);
    EXPECT_TRUE(be_->CopyToHost(*q_, d, 0, host.data(), sizeof(T) * n).ok());
    EXPECT_TRUE(be_->Synchronize(*q_).ok());
    return host;
  }
  static std::vector<uint16_t> Halves(int64_t n, int salt, float scale) {
    std::vector<uint16_t> v(n);
    for (int64_t i = 0; i < n; ++i) {
      v[i] = numeric::Fp32ToF16(scale * (static_cast<float>((i * 37 + salt) % 41) / 20.0f - 1.0f));
    }
    return v;
  }
  std::unique_ptr<backend::Backend> be_;
  std::unique_ptr<backend::Queue> q_;
};

TEST_F(LinearHalfBackwardTest, OutputsAreFp16AndEachCallsWeightGradientIsRoundedOnce) {
  // nn.Linear (kOutIn): W [out, in]; two calls (two microbatches or token chunks) of N rows, the
  // first with an fp32 dy (the residual gradient), the second with an fp16 one.
  const std::vector<uint16_t> w = Halves(kOut * kIn, 3, 0.5f);
  const std::vector<uint16_t> x1 = Halves(kN * kIn, 5, 2.0f), x2 = Halves(kN * kIn, 9, 1.5f);
  std::vector<float> dy1(kN * kOut);
  for (int64_t i = 0; i < kN * kOut; ++i) dy1[i] = 0.013f * static_cast<float>(i % 17) - 0.1f;
  const std::vector<uint16_t> dy2 = Halves(kN * kOut, 11, 0.3f);
  std::vector<float> dw0(kOut * kIn);
  for (int64_t i = 0; i < kOut * kIn; ++i) dw0[i] = 0.001f * static_cast<float>(i % 23);
  DeviceBuffer d_w = Upload(w, "w"), d_x1 = Upload(x1, "x1"), d_x2 = Upload(x2, "x2");
  DeviceBuffer d_dy1 = Upload(dy1, "dy1"), d_dy2 = Upload(dy2, "dy2"), d_dw = Upload(dw0, "dw");
  DeviceBuffer d_db = Upload(std::vector<float>(kOut, 0.0f), "db");
  DeviceBuffer d_dx = *be_->Allocate(2 * kN * kIn, "dx");
  DeviceBuffer dy_half = *be_->Allocate(2 * kN * kOut, "dy_half");
  DeviceBuffer dw_half = *be_->Allocate(2 * kOut * kIn, "dw_half");
  LinearWeight lw{.dtype = DType::kF16, .half_accumulate = true, .half_backward = true,
                  .dy_half = dy_half.data(), .dw_half = dw_half.data(), .w = d_w.data(),
                  .ld = kIn, .dw = static_cast<float*>(d_dw.data()),
                  .dbias = static_cast<float*>(d_db.data())};
  ASSERT_TRUE(LinearBackward(*be_, *q_, lw, d_x1.data(), d_dy1.data(), DType::kFp32, d_dx.data(),
                             DType::kF16, false, kN, kIn, kOut)
                  .ok());
  const std::vector<uint16_t> dx1 = Download<uint16_t>(d_dx, kN * kIn);
  ASSERT_TRUE(LinearBackward(*be_, *q_, lw, d_x2.data(), d_dy2.data(), DType::kF16, d_dx.data(),
                             DType::kF16, true, kN, kIn, kOut)
                  .ok());
  const std::vector<uint16_t> dx2 = Download<uint16_t>(d_dx, kN * kIn);
  const std::vector<float> dw = Download<float>(d_dw, kOut * kIn);
  const std::vector<float> db = Download<float>(d_db, kOut);

  auto h = [](uint16_t bits) { return static_cast<double>(numeric::F16ToFp32(bits)); };
  std::vector<double> dy1h(kN * kOut);
  for (int64_t i = 0; i < kN * kOut; ++i) dy1h[i] = F16Round(dy1[i]);
  for (int64_t r = 0; r < kN; ++r) {
    for (int64_t c = 0; c < kIn; ++c) {
      double s1 = 0, s2 = 0;
      for (int64_t o = 0; o < kOut; ++o) {
        s1 += dy1h[r * kOut + o] * h(w[o * kIn + c]);
        s2 += h(dy2[r * kOut + o]) * h(w[o * kIn + c]);
      }
      const int64_t i = r * kIn + c;
      ASSERT_NEAR(h(dx1[i]), s1, F16Step(s1)) << "dx call 1 [" << i << "]";
      // += in fp16 storage: fp16(dx1 + s2), within a step of each rounding.
      ASSERT_NEAR(h(dx2[i]), h(dx1[i]) + s2, 2 * F16Step(h(dx1[i]) + s2)) << "dx call 2 [" << i << "]";
    }
  }
  for (int64_t o = 0; o < kOut; ++o) {
    double b = 0;
    for (int64_t r = 0; r < kN; ++r) b += dy1h[r * kOut + o] + h(dy2[r * kOut + o]);
    ASSERT_NEAR(db[o], b, 1e-5) << "db [" << o << "]";
    for (int64_t c = 0; c < kIn; ++c) {
      double g1 = 0, g2 = 0;
      for (int64_t r = 0; r < kN; ++r) {
        g1 += dy1h[r * kOut + o] * h(x1[r * kIn + c]);
        g2 += h(dy2[r * kOut + o]) * h(x2[r * kIn + c]);
      }
      const int64_t i = o * kIn + c;
      const double want = dw0[i] + static_cast<double>(F16Round(g1)) + F16Round(g2);
      ASSERT_NEAR(dw[i], want, F16Step(g1) + F16Step(g2) + 1e-6) << "dW [" << i << "]";
    }
  }
  // The rounding is really there: some element of dW differs from the unrounded fp32 sum by more
  // than fp32's precision would.
  bool rounded = false;
  for (int64_t o = 0; o < kOut && !rounded; ++o) {
    for (int64_t c = 0; c < kIn && !rounded; ++c) {
      double g = 0;
      for (int64_t r = 0; r < kN; ++r) g += dy1h[r * kOut + o] * h(x1[r * kIn + c]);
      for (int64_t r = 0; r < kN; ++r) g += h(dy2[r * kOut + o]) * h(x2[r * kIn + c]);
      rounded = std::fabs(dw[o * kIn + c] - (dw0[o * kIn + c] + g)) > 1e-4 * std::fabs(g) + 1e-6;
    }
  }
  EXPECT_TRUE(rounded) << "no weight gradient element shows fp16 rounding";
}

// Token chunks of one call (dw_half_first / dw_half_last, the MLP's): the chunks' fp16 weight
// gradients sum in the fp16 scratch and reach the fp32 gradient once, after the last chunk:
// dW = dW0 + fp16(fp16(g1) + g2); before the last chunk the fp32 gradient is untouched.
TEST_F(LinearHalfBackwardTest, ChunksOfOneCallReachTheFp32GradientOnce) {
  const std::vector<uint16_t> w = Halves(kOut * kIn, 3, 0.5f);
  const std::vector<uint16_t> x1 = Halves(kN * kIn, 5, 2.0f), x2 = Halves(kN * kIn, 9, 1.5f);
  const std::vector<uint16_t> dy1 = Halves(kN * kOut, 7, 0.3f), dy2 = Halves(kN * kOut, 11, 0.3f);
  std::vector<float> dw0(kOut * kIn, 0.25f);
  DeviceBuffer d_w = Upload(w, "w"), d_x1 = Upload(x1, "x1"), d_x2 = Upload(x2, "x2");
  DeviceBuffer d_dy1 = Upload(dy1, "dy1"), d_dy2 = Upload(dy2, "dy2"), d_dw = Upload(dw0, "dw");
  DeviceBuffer d_dx = *be_->Allocate(2 * kN * kIn, "dx");
  DeviceBuffer dw_half = *be_->Allocate(2 * kOut * kIn, "dw_half");
  LinearWeight lw{.dtype = DType::kF16, .half_backward = true, .dw_half = dw_half.data(),
                  .w = d_w.data(), .ld = kIn, .dw = static_cast<float*>(d_dw.data())};
  lw.dw_half_last = false;
  ASSERT_TRUE(LinearBackward(*be_, *q_, lw, d_x1.data(), d_dy1.data(), DType::kF16, d_dx.data(),
                             DType::kF16, false, kN, kIn, kOut)
                  .ok());
  EXPECT_EQ(Download<float>(d_dw, kOut * kIn), dw0) << "the fp32 gradient moved before the last chunk";
  lw.dw_half_first = false, lw.dw_half_last = true;
  ASSERT_TRUE(LinearBackward(*be_, *q_, lw, d_x2.data(), d_dy2.data(), DType::kF16, d_dx.data(),
                             DType::kF16, false, kN, kIn, kOut)
                  .ok());
  const std::vector<float> dw = Download<float>(d_dw, kOut * kIn);
  auto h = [](uint16_t bits) { return static_cast<double>(numeric::F16ToFp32(bits)); };
  for (int64_t o = 0; o < kOut; ++o) {
    for (int64_t c = 0; c < kIn; ++c) {
      double g1 = 0, g2 = 0;
      for (int64_t r = 0; r < kN; ++r) {
        g1 += h(dy1[r * kOut + o]) * h(x1[r * kIn + c]);
        g2 += h(dy2[r * kOut + o]) * h(x2[r * kIn + c]);
      }
      const double sum = static_cast<double>(F16Round(g1)) + g2;
      const int64_t i = o * kIn + c;
      ASSERT_NEAR(dw[i], 0.25 + F16Round(sum), F16Step(g1) + F16Step(sum) + 1e-6) << i;
    }
  }
}

// The LM head's blocked weight gradient (dw_block_rows, an [out, in] weight): blocks of 7 of the
// 24 output rows (none divides it) through a 7 x in fp16 scratch, each block's rows rounded to
// fp16 once and added into the fp32 gradient: dW = dW0 + fp16(dy16^T x), as the unblocked call,
// with the same dx; a blocked Conv1D weight or a blocked chunk of a longer call is refused.
TEST_F(LinearHalfBackwardTest, BlockedWeightGradientMatchesTheWholeOne) {
  constexpr int64_t kBlock = 7;
  const std::vector<uint16_t> w = Halves(kOut * kIn, 3, 0.5f), x = Halves(kN * kIn, 5, 2.0f);
  const std::vector<uint16_t> dy = Halves(kN * kOut, 7, 0.3f);
  std::vector<float> dw0(kOut * kIn);
  for (int64_t i = 0; i < kOut * kIn; ++i) dw0[i] = 0.001f * static_cast<float>(i % 23);
  DeviceBuffer d_w = Upload(w, "w"), d_x = Upload(x, "x"), d_dy = Upload(dy, "dy");
  DeviceBuffer d_dw = Upload(dw0, "dw"), d_dx = *be_->Allocate(2 * kN * kIn, "dx");
  DeviceBuffer dw_half = *be_->Allocate(2 * kBlock * kIn, "dw_half");
  LinearWeight lw{.dtype = DType::kF16, .half_accumulate = true, .half_backward = true,
                  .dw_half = dw_half.data(), .dw_block_rows = kBlock, .w = d_w.data(),
                  .ld = kIn, .dw = static_cast<float*>(d_dw.data())};
  ASSERT_TRUE(LinearBackward(*be_, *q_, lw, d_x.data(), d_dy.data(), DType::kF16, d_dx.data(),
                             DType::kF16, false, kN, kIn, kOut)
                  .ok());
  const std::vector<float> dw = Download<float>(d_dw, kOut * kIn);
  const std::vector<uint16_t> dx = Download<uint16_t>(d_dx, kN * kIn);
  auto h = [](uint16_t bits) { return static_cast<double>(numeric::F16ToFp32(bits)); };
  bool rounded = false;
  for (int64_t o = 0; o < kOut; ++o) {
    for (int64_t c = 0; c < kIn; ++c) {
      double g = 0;
      for (int64_t r = 0; r < kN; ++r) g += h(dy[r * kOut + o]) * h(x[r * kIn + c]);
      const int64_t i = o * kIn + c;
      ASSERT_NEAR(dw[i], dw0[i] + F16Round(g), F16Step(g) + 1e-6) << "dW [" << o << ", " << c << "]";
      rounded = rounded || std::fabs(dw[i] - (dw0[i] + g)) > 1e-4 * std::fabs(g) + 1e-6;
    }
  }
  EXPECT_TRUE(rounded) << "no weight gradient element shows fp16 rounding";
  for (int64_t r = 0; r < kN; ++r) {
    for (int64_t c = 0; c < kIn; ++c) {
      double s = 0;
      for (int64_t o = 0; o < kOut; ++o) s += h(dy[r * kOut + o]) * h(w[o * kIn + c]);
      ASSERT_NEAR(h(dx[r * kIn + c]), s, F16Step(s)) << "dx [" << r << ", " << c << "]";
    }
  }
  LinearWeight conv = lw;
  conv.in_out = true, conv.ld = kOut;
  EXPECT_EQ(LinearBackward(*be_, *q_, conv, d_x.data(), d_dy.data(), DType::kF16, d_dx.data(),
                           DType::kF16, false, kN, kIn, kOut)
                .code(),
            absl::StatusCode::kInvalidArgument);
  LinearWeight chunk = lw;
  chunk.dw_half_last = false;
  EXPECT_EQ(LinearBackward(*be_, *q_, chunk, d_x.data(), d_dy.data(), DType::kF16, d_dx.data(),
                           DType::kF16, false, kN, kIn, kOut)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// A column slice of a wider weight (ld > out, GPT-2's fused c_attn in Conv1D layout [in, ld]):
// the fp16 dx still, but dW += x^T dy16 straight into the strided fp32 gradient, whose other
// columns stay untouched.
TEST_F(LinearHalfBackwardTest, StridedWeightKeepsTheFp32WeightGradient) {
  constexpr int64_t kLd = 3 * kOut, kCol = kOut;  // the middle slice
  const std::vector<uint16_t> w = Halves(kIn * kLd, 4, 0.5f);
  const std::vector<uint16_t> x = Halves(kN * kIn, 6, 1.0f), dy = Halves(kN * kOut, 8, 0.2f);
  DeviceBuffer d_w = Upload(w, "w"), d_x = Upload(x, "x"), d_dy = Upload(dy, "dy");
  DeviceBuffer d_dw = Upload(std::vector<float>(kIn * kLd, 0.5f), "dw");
  DeviceBuffer d_dx = *be_->Allocate(2 * kN * kIn, "dx");
  DeviceBuffer dw_half = *be_->Allocate(2 * kIn * kLd, "dw_half");
  const uint16_t* wp = static_cast<const uint16_t*>(d_w.data()) + kCol;
  LinearWeight lw{.in_out = true, .dtype = DType::kF16, .half_backward = true,
                  .dw_half = dw_half.data(), .w = wp, .ld = kLd,
                  .dw = static_cast<float*>(d_dw.data()) + kCol};
  ASSERT_TRUE(LinearBackward(*be_, *q_, lw, d_x.data(), d_dy.data(), DType::kF16, d_dx.data(),
                             DType::kF16, false, kN, kIn, kOut)
                  .ok());
  const std::vector<float> dw = Download<float>(d_dw, kIn * kLd);
  auto h = [](uint16_t bits) { return static_cast<double>(numeric::F16ToFp32(bits)); };
  for (int64_t c = 0; c < kIn; ++c) {
    for (int64_t j = 0; j < kLd; ++j) {
      const float got = dw[c * kLd + j];
      if (j < kCol || j >= kCol + kOut) {
        ASSERT_EQ(got, 0.5f) << "column " << j << " is another slice's";
        continue;
      }
      double g = 0;
      for (int64_t r = 0; r < kN; ++r) g += h(x[r * kIn + c]) * h(dy[r * kOut + j - kCol]);
      ASSERT_NEAR(got, 0.5 + g, 1e-5) << "dW [" << c << ", " << j << "]";
    }
  }
}

TEST_F(LinearHalfBackwardTest, RefusesAnAdapterAndA16BitDxWithoutIt) {
  DeviceBuffer buf = *be_->Allocate(4096, "buf");
  float a[4] = {}, b[4] = {};
  LinearWeight adapted{.dtype = DType::kF16, .half_backward = true, .w = buf.data(), .ld = 2};
  adapted.lora.a = a, adapted.lora.b = b, adapted.lora.rank = 1;
  absl::Status s = LinearBackward(*be_, *q_, adapted, buf.data(), buf.data(), DType::kF16,
                                  buf.data(), DType::kF16, false, 2, 2, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("no adapter"), std::string::npos) << s;
  LinearWeight plain{.dtype = DType::kF16, .w = buf.data(), .ld = 2};
  s = LinearBackward(*be_, *q_, plain, buf.data(), buf.data(), DType::kF16, buf.data(),
                     DType::kF16, false, 2, 2, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("needs the fp16 backward"), std::string::npos) << s;
}

}  // namespace
}  // namespace mobius::units
