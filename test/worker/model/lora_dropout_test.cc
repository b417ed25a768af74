// LoRA dropout through a linear layer (linear.h LoraTerm with dropout > 0) on the CPU backend
// against a float64 host computation of PEFT's definition with the same masks
// (worker/kernels/dropout_mask.h):
//   y  = x W^T + scale * (xd A^T) B^T,   xd = mask(x) / (1 - p)
//   dB = scale dy^T (xd A^T),  dA = gh^T xd,  dx = dy W + mask(gh A) / (1 - p),  gh = scale dy B
// Tolerance: |diff| <= 1e-5 * max|want| + 1e-6 per tensor (fp32 accumulation over at most 40
// terms against float64; the bf16 inputs are exact in both). Also: with dropout the adapter's
// output differs from the one without, and a pass with key 0 (eval) is the dropout-free one.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/numeric/bf16.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/kernels/dropout_mask.h"
#include "worker/model/linear.h"

namespace mobius::units {
namespace {

using backend::DeviceBuffer;
using backend::DType;

constexpr int64_t kN = 12, kIn = 40, kOut = 24, kRank = 4;
constexpr float kP = 0.3f, kScale = 2.0f;

float Value(int64_t i, int64_t mod, float step, float shift) {
  return numeric::Bf16ToFp32(numeric::Fp32ToBf16(step * static_cast<float>(i % mod) - shift));
}

double MaxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = 1e-5 * MaxAbs(want) + 1e-6;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
  }
}

class LoraDropoutLinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    be_ = *backend::CpuBackend::Create({.op_threads = 2});
    q_ = *be_->CreateQueue(backend::QueueKind::kCompute, 0);
    x_.resize(kN * kIn);
    w_.resize(kOut * kIn);
    a_.resize(kRank * kIn);
    b_.resize(kOut * kRank);
    dy_.resize(kN * kOut);
    for (int64_t i = 0; i < kN * kIn; ++i) x_[i] = Value(i, 37, 0.05f, 0.9f);
    for (int64_t i = 0; i < kOut * kIn; ++i) w_[i] = Value(i * 7, 29, 0.01f, 0.14f);
    for (int64_t i = 0; i < kRank * kIn; ++i) a_[i] = 0.02f * static_cast<float>(i % 11) - 0.1f;
    for (int64_t i = 0; i < kOut * kRank; ++i) b_[i] = 0.03f * static_cast<float>(i % 7) - 0.09f;
    for (int64_t i = 0; i < kN * kOut; ++i) dy_[i] = 0.01f * static_cast<float>(i % 13) - 0.06f;
  }

  template <typename T>
  DeviceBuffer Upload(const std::vector<T>& host, const char* name) {
    DeviceBuffer d = *be_->Allocate(sizeof(T) * host.size(), name);
    EXPECT_TRUE(be_->CopyToDevice(*q_, host.data(), d, 0, sizeof(T) * host.size()).ok());
    EXPECT_TRUE(be_->Synchronize(*q_).ok());  // the copy is queued: `host` may be a temporary
    return d;
  }
  std::vector<float> Download(const DeviceBuffer& d, int64_t n) {
    std::vector<float> host(n);
    EXPECT_TRUE(be_->CopyToHost(*q_, d, 0, host.data(), 4 * n).ok());
    EXPECT_TRUE(be_->Synchronize(*q_).ok());
    return host;
  }

  struct Result {
    std::vector<float> y, dx, da, db;
  };

  // Forward and backward through one adapted nn.Linear (kOutIn) with the given dropout and key.
  Result Run(float p, uint64_t key, int64_t row_offset) {
    std::vector<uint16_t> xb(x_.size()), wb(w_.size());
    for (size_t i = 0; i < x_.size(); ++i) xb[i] = numeric::Fp32ToBf16(x_[i]);
    for (size_t i = 0; i < w_.size(); ++i) wb[i] = numeric::Fp32ToBf16(w_[i]);
    DeviceBuffer x = Upload(xb, "x"), w = Upload(wb, "w"), a = Upload(a_, "a"),
                 b = Upload(b_, "b"), dy = Upload(dy_, "dy");
    DeviceBuffer da = Upload(std::vector<float>(a_.size(), 0.0f), "da");
    DeviceBuffer db = Upload(std::vector<float>(b_.size(), 0.0f), "db");
    DeviceBuffer y = *be_->Allocate(4 * kN * kOut, "y");
    DeviceBuffer dx = *be_->Allocate(4 * kN * kIn, "dx");
    DeviceBuffer h = *be_->Allocate(4 * kN * kRank, "h");
    DeviceBuffer gh = *be_->Allocate(4 * kN * kRank, "gh");
    DeviceBuffer xd = *be_->Allocate(4 * kN * kIn, "xd");
    LinearWeight lw;
    lw.w = w.data();
    lw.ld = kIn;
    lw.lora = {.a = static_cast<const float*>(a.data()), .b = static_cast<const float*>(b.data()),
               .da = static_cast<float*>(da.data()), .db = static_cast<float*>(db.data()),
               .rank = kRank, .scale = kScale, .h = static_cast<float*>(h.data()),
               .gh = static_cast<float*>(gh.data())};
    if (p > 0 && key != 0) {
      lw.lora.dropout = p;
      lw.lora.key = key;
      lw.lora.row_offset = row_offset;
      lw.lora.xd = static_cast<float*>(xd.data());
    }
    EXPECT_TRUE(LinearForward(*be_, *q_, lw, x.data(), y.data(), DType::kFp32, kN, kIn, kOut).ok());
    // The backward regenerates xd: scribble over it first to prove it does not rely on it.
    const std::vector<float> scribble(kN * kIn, 7.0f);
    EXPECT_TRUE(be_->CopyToDevice(*q_, scribble.data(), xd, 0, 4 * kN * kIn).ok());
    EXPECT_TRUE(be_->Synchronize(*q_).ok());
    EXPECT_TRUE(LinearBackward(*be_, *q_, lw, x.data(), dy.data(), DType::kFp32,
                               dx.data(), DType::kFp32, false, kN, kIn, kOut)
                    .ok());
    return {Download(y, kN * kOut), Download(dx, kN * kIn), Download(da, a_.size()),
            Download(db, b_.size())};
  }

  // The float64 definition with the masks of `key` (none when p == 0).
  void Want(float p, uint64_t key, int64_t row_offset, std::vector<double>* y,
              std::vector<double>* dx, std::vector<double>* da, std::vector<double>* db) {
    auto kept = [&](int64_t r, int64_t c) {
      return p == 0 || kernels::DropoutKeep(key, row_offset + r, c, p);
    };
    const double inv = 1.0 / (1.0 - p);
    std::vector<double> xd(kN * kIn), h(kN * kRank, 0), gh(kN * kRank, 0);
    for (int64_t r = 0; r < kN; ++r) {
      for (int64_t c = 0; c < kIn; ++c) xd[r * kIn + c] = kept(r, c) ? x_[r * kIn + c] * inv : 0;
    }
    y->assign(kN * kOut, 0);
    dx->assign(kN * kIn, 0);
    da->assign(a_.size(), 0);
    db->assign(b_.size(), 0);
    for (int64_t r = 0; r < kN; ++r) {
      for (int64_t j = 0; j < kRank; ++j) {
        for (int64_t c = 0; c < kIn; ++c) h[r * kRank + j] += xd[r * kIn + c] * a_[j * kIn + c];
      }
      for (int64_t o = 0; o < kOut; ++o) {
        double base = 0, lora = 0;
        for (int64_t c = 0; c < kIn; ++c) base += double{x_[r * kIn + c]} * w_[o * kIn + c];
        for (int64_t j = 0; j < kRank; ++j) lora += h[r * kRank + j] * b_[o * kRank + j];
        (*y)[r * kOut + o] = base + kScale * lora;
        for (int64_t j = 0; j < kRank; ++j) {
          gh[r * kRank + j] += kScale * double{dy_[r * kOut + o]} * b_[o * kRank + j];
          (*db)[o * kRank + j] += kScale * double{dy_[r * kOut + o]} * h[r * kRank + j];
        }
      }
    }
    for (int64_t r = 0; r < kN; ++r) {
      for (int64_t c = 0; c < kIn; ++c) {
        double through_w = 0, through_a = 0;
        for (int64_t o = 0; o < kOut; ++o) through_w += double{dy_[r * kOut + o]} * w_[o * kIn + c];
        for (int64_t j = 0; j < kRank; ++j) {
          through_a += gh[r * kRank + j] * a_[j * kIn + c];
          (*da)[j * kIn + c] += gh[r * kRank + j] * xd[r * kIn + c];
        }
        (*dx)[r * kIn + c] = through_w + (kept(r, c) ? through_a * inv : 0);
      }
    }
  }

  std::unique_ptr<backend::CpuBackend> be_;
  std::unique_ptr<backend::Queue> q_;
  std::vector<float> x_, w_, a_, b_, dy_;
};

TEST_F(LoraDropoutLinearTest, ForwardAndBackwardMatchTheDefinition) {
  const uint64_t key = kernels::LoraDropoutModuleKey(kernels::LoraDropoutStepKey(11, 2), 3);
  for (int64_t row_offset : {0, 36}) {
    const Result got = Run(kP, key, row_offset);
    std::vector<double> y, dx, da, db;
    Want(kP, key, row_offset, &y, &dx, &da, &db);
    ExpectNear(got.y, y, "y");
    ExpectNear(got.dx, dx, "dx");
    ExpectNear(got.da, da, "dA");
    ExpectNear(got.db, db, "dB");
  }
}

TEST_F(LoraDropoutLinearTest, DropoutChangesTheAdapterAndKeyZeroIsNone) {
  const uint64_t key = kernels::LoraDropoutModuleKey(kernels::LoraDropoutStepKey(11, 2), 3);
  const Result dropped = Run(kP, key, 0);
  const Result eval = Run(kP, 0, 0);  // what an eval pass passes: no masks
  const Result none = Run(0.0f, 0, 0);
  EXPECT_NE(dropped.y, none.y);
  EXPECT_NE(dropped.da, none.da);
  EXPECT_EQ(eval.y, none.y);
  EXPECT_EQ(eval.dx, none.dx);
  EXPECT_EQ(eval.da, none.da);
  EXPECT_EQ(eval.db, none.db);
  std::vector<double> y, dx, da, db;
  Want(0.0f, 0, 0, &y, &dx, &da, &db);
  ExpectNear(none.y, y, "y without dropout");
  ExpectNear(none.dx, dx, "dx without dropout");
}

}  // namespace
}  // namespace mobius::units
