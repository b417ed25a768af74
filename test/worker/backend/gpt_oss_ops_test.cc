// gpt-oss's ops on the CPU backend against the fp32 reference ops on the same 16-bit inputs:
//   ClampedSwiGlu forward and backward, values spanning [-12, 12] so that both clamps hold for a
//     share of them (their gradient exactly 0 there): within one 16-bit rounding of the result;
//   AttentionForward + AttentionSinkForward (and the backward pair), with and without a window:
//     out within 2e-2 of max|out| (the 16-bit probabilities' rounding), lse exactly the
//     reference's logaddexp to 1e-5, dq/dk/dv/dsinks within 2e-2 of their max;
//   BiasAdd over fp32 rows (gpt-oss's router logits): exact.
// bf16 and fp16 alike.
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/reference/ops_activation.h"
#include "worker/reference/ops_attention.h"

namespace mobius::backend {
namespace {

class GptOssOpsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    backend_ = *CpuBackend::Create({.op_threads = 2});
    queue_ = *backend_->CreateQueue(QueueKind::kCompute, 0);
  }

  // Random values in [-scale, scale], rounded to the op's 16-bit format: bits and their values.
  std::vector<uint16_t> Random(int64_t n, float scale, std::vector<float>* values) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> x(n);
    for (float& v : x) v = u(rng_);
    std::vector<uint16_t> bits(n);
    ToBits(x, &bits);
    FromBits(bits, values);
    return bits;
  }
  void ToBits(const std::vector<float>& x, std::vector<uint16_t>* bits) const {
    bits->resize(x.size());
    if (GetParam() == DType::kF16) {
      numeric::Fp32ToF16(x.data(), bits->data(), x.size());
    } else {
      numeric::Fp32ToBf16(x.data(), bits->data(), x.size());
    }
  }
  void FromBits(const std::vector<uint16_t>& bits, std::vector<float>* x) const {
    x->resize(bits.size());
    if (GetParam() == DType::kF16) {
      numeric::F16ToFp32(bits.data(), x->data(), bits.size());
    } else {
      numeric::Bf16ToFp32(bits.data(), x->data(), bits.size());
    }
  }
  // One rounding of the format (relative): bf16 2^-8, fp16 2^-11.
  double Ulp() const { return GetParam() == DType::kF16 ? 0x1p-11 : 0x1p-8; }

  DeviceBuffer Upload(const void* data, uint64_t bytes) {
    DeviceBuffer b = *backend_->Allocate(bytes, "t");
    EXPECT_TRUE(backend_->CopyToDevice(*queue_, data, b, 0, bytes).ok());
    return b;
  }
  template <typename T>
  std::vector<T> Download(const DeviceBuffer& b, size_t n) {
    std::vector<T> out(n);
    EXPECT_TRUE(backend_->CopyToHost(*queue_, b, 0, out.data(), sizeof(T) * n).ok());
    EXPECT_TRUE(backend_->Synchronize(*queue_).ok());
    return out;
  }

  std::mt19937 rng_{5};
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Queue> queue_;
};

TEST_P(GptOssOpsTest, ClampedSwiGluMatchesTheReferenceAndHoldsTheClamps) {
  const int64_t n = 37, w = 50;
  const float alpha = 1.702f, limit = 7.0f;
  std::vector<float> gu, dy;
  const std::vector<uint16_t> gu_bits = Random(n * 2 * w, 12.0f, &gu);
  const std::vector<uint16_t> dy_bits = Random(n * w, 1.0f, &dy);
  DeviceBuffer gu_d = Upload(gu_bits.data(), 2 * gu_bits.size());
  DeviceBuffer dy_d = Upload(dy_bits.data(), 2 * dy_bits.size());
  DeviceBuffer out_d = *backend_->Allocate(2 * n * w, "out");
  DeviceBuffer dgu_d = *backend_->Allocate(2 * n * 2 * w, "dgu");
  ASSERT_TRUE(backend_->ClampedSwiGluForward(*queue_, {.dtype = GetParam(), .n = n, .width = w,
                                                       .alpha = alpha, .limit = limit,
                                                       .gate_up = gu_d.data(),
                                                       .out = out_d.data()})
                  .ok());
  ASSERT_TRUE(backend_->ClampedSwiGluBackward(*queue_, {.dtype = GetParam(), .n = n, .width = w,
                                                        .alpha = alpha, .limit = limit,
                                                        .dout = dy_d.data(),
                                                        .gate_up = gu_d.data(),
                                                        .dgate_up = dgu_d.data()})
                  .ok());
  std::vector<float> out, dgu;
  FromBits(Download<uint16_t>(out_d, n * w), &out);
  FromBits(Download<uint16_t>(dgu_d, n * 2 * w), &dgu);
  std::vector<float> want(n * w), dwant(n * 2 * w);
  reference::ClampedSwiGluForward(want.data(), gu.data(), n, w, alpha, limit);
  reference::ClampedSwiGluBackward(dwant.data(), dy.data(), gu.data(), n, w, alpha, limit);
  int64_t clamped_gate = 0, clamped_up = 0;
  for (int64_t i = 0; i < n * w; ++i) {
    // One rounding of the result, plus fast_math's exp (a few fp32 ulps).
    EXPECT_NEAR(out[i], want[i], Ulp() * std::fabs(want[i]) + 1e-5) << i;
    for (int j : {0, 1}) {
      EXPECT_NEAR(dgu[2 * i + j], dwant[2 * i + j], Ulp() * std::fabs(dwant[2 * i + j]) + 1e-5)
          << 2 * i + j;
    }
    if (gu[2 * i] > limit) {
      ++clamped_gate;
      EXPECT_EQ(dgu[2 * i], 0.0f);
    }
    if (std::fabs(gu[2 * i + 1]) > limit) {
      ++clamped_up;
      EXPECT_EQ(dgu[2 * i + 1], 0.0f);
    }
  }
  EXPECT_GT(clamped_gate, n * w / 10);  // both clamps were exercised
  EXPECT_GT(clamped_up, n * w / 5);
}

TEST_P(GptOssOpsTest, AttentionWithSinksMatchesTheReference) {
  for (const int64_t window : {int64_t{0}, int64_t{4}}) {
    SCOPED_TRACE(window);
    const int64_t B = 2, T = 9, H = 4, KV = 2, hd = 8;
    std::vector<float> q, k, v, z, dy;
    const std::vector<uint16_t> qb = Random(B * T * H * hd, 1.5f, &q);
    const std::vector<uint16_t> kb = Random(B * T * KV * hd, 1.5f, &k);
    const std::vector<uint16_t> vb = Random(B * T * KV * hd, 1.0f, &v);
    const std::vector<uint16_t> zb = Random(H, 2.0f, &z);
    const std::vector<uint16_t> dyb = Random(B * T * H * hd, 1.0f, &dy);
    DeviceBuffer qd = Upload(qb.data(), 2 * qb.size()), kd = Upload(kb.data(), 2 * kb.size());
    DeviceBuffer vd = Upload(vb.data(), 2 * vb.size()), zd = Upload(zb.data(), 2 * zb.size());
    DeviceBuffer dyd = Upload(dyb.data(), 2 * dyb.size());
    DeviceBuffer out = *backend_->Allocate(2 * qb.size(), "out");
    DeviceBuffer lse = *backend_->Allocate(4 * B * H * T, "lse");
    DeviceBuffer dq = *backend_->Allocate(2 * qb.size(), "dq");
    DeviceBuffer dk = *backend_->Allocate(2 * kb.size(), "dk");
    DeviceBuffer dv = *backend_->Allocate(2 * vb.size(), "dv");
    std::vector<float> zeros(H, 0.0f);
    DeviceBuffer dz = Upload(zeros.data(), 4 * H);
    for (DeviceBuffer* g : {&dq, &dk, &dv}) {
      ASSERT_TRUE(backend_->Zero(*queue_, {.dst = g->data(), .bytes = g->size_bytes()}).ok());
    }
    const AttentionShapeParams shape{B, T, H, KV, hd, window};
    const DType dt = GetParam();
    auto* lse_p = static_cast<float*>(lse.data());
    ASSERT_TRUE(backend_->AttentionForward(*queue_, {.dtype = dt, .shape = shape, .q = qd.data(),
                                                     .k = kd.data(), .v = vd.data(),
                                                     .out = out.data(), .lse = lse_p})
                    .ok());
    ASSERT_TRUE(backend_->AttentionSinkForward(*queue_, {.dtype = dt, .b = B, .t = T, .heads = H,
                                                         .head_dim = hd, .sinks = zd.data(),
                                                         .out = out.data(), .lse = lse_p})
                    .ok());
    ASSERT_TRUE(backend_->AttentionSinkBackward(
                            *queue_, {.dtype = dt, .b = B, .t = T, .heads = H, .head_dim = hd,
                                      .sinks = zd.data(), .out = out.data(), .dout = dyd.data(),
                                      .lse = lse_p, .dsinks = static_cast<float*>(dz.data())})
                    .ok());
    ASSERT_TRUE(backend_->AttentionBackward(*queue_, {.dtype = dt, .shape = shape,
                                                      .dout = dyd.data(), .q = qd.data(),
                                                      .k = kd.data(), .v = vd.data(),
                                                      .out = out.data(), .lse = lse_p,
                                                      .dq = dq.data(), .dk = dk.data(),
                                                      .dv = dv.data()})
                    .ok());
    std::vector<float> got_out, got_dq, got_dk, got_dv;
    FromBits(Download<uint16_t>(out, qb.size()), &got_out);
    FromBits(Download<uint16_t>(dq, qb.size()), &got_dq);
    FromBits(Download<uint16_t>(dk, kb.size()), &got_dk);
    FromBits(Download<uint16_t>(dv, vb.size()), &got_dv);
    const std::vector<float> got_dz = Download<float>(dz, H);
    const std::vector<float> got_lse = Download<float>(lse, B * H * T);

    reference::AttentionShape rs{B, T, H, KV, hd, window, z.data()};
    std::vector<float> ref_out(q.size()), att(B * H * T * T);
    reference::AttentionForward(ref_out.data(), att.data(), q.data(), k.data(), v.data(), rs);
    std::vector<float> rdq(q.size()), rdk(k.size()), rdv(v.size()), rdz(H);
    reference::AttentionBackward(rdq.data(), rdk.data(), rdv.data(), dy.data(), q.data(),
                                 k.data(), v.data(), att.data(), rs, rdz.data());
    auto check = [](const char* what, const std::vector<float>& got,
                    const std::vector<float>& want, double rel) {
      double max_want = 0, worst = 0;
      for (float w : want) max_want = std::max(max_want, std::fabs(double{w}));
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(double{got[i]} - want[i]));
      }
      EXPECT_GT(max_want, 0) << what;
      EXPECT_LE(worst, rel * max_want) << what;
      std::printf("  %-6s max|diff| %.3g of max %.3g\n", what, worst, max_want);
    };
    check("out", got_out, ref_out, 2e-2);
    check("dq", got_dq, rdq, 2e-2);
    check("dk", got_dk, rdk, 2e-2);
    check("dv", got_dv, rdv, 2e-2);
    check("dsinks", got_dz, rdz, 2e-2);
    // lse' = logaddexp(the rows' lse, sink): the probabilities the reference's att keeps sum to
    // 1 - p_sink = 1 - exp(sink - lse').
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t t = 0; t < T; ++t) {
          double kept = 0;
          for (int64_t t2 = 0; t2 < T; ++t2) kept += att[((b * H + h) * T + t) * T + t2];
          EXPECT_NEAR(1.0 - std::exp(z[h] - got_lse[(b * H + h) * T + t]), kept, 2e-3);
        }
      }
    }
  }
}

TEST_P(GptOssOpsTest, BiasAddsToFp32Rows) {
  const int64_t n = 5, c = 7;
  std::vector<float> x(n * c), bias;
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i) - 3.1f;
  const std::vector<uint16_t> bias_bits = Random(c, 2.0f, &bias);
  DeviceBuffer xd = Upload(x.data(), 4 * x.size());
  DeviceBuffer bd = Upload(bias_bits.data(), 2 * bias_bits.size());
  ASSERT_TRUE(backend_->BiasAdd(*queue_, {.dtype = GetParam(), .n = n, .c = c, .fp32_rows = true,
                                          .inp = xd.data(), .bias = bd.data(), .out = xd.data()})
                  .ok());
  const std::vector<float> got = Download<float>(xd, x.size());
  for (int64_t i = 0; i < n * c; ++i) EXPECT_EQ(got[i], x[i] + bias[i % c]) << i;
}

INSTANTIATE_TEST_SUITE_P(Formats, GptOssOpsTest, ::testing::Values(DType::kBf16, DType::kF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace mobius::backend
