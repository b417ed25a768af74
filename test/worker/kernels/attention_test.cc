// attention_* (flash-style, logsumexp only) against reference ops_attention.h (full probability
// matrix) on the same bf16-rounded inputs: GQA 4/2 and 8/1, head_dim 16 and 64, T not a multiple
// of the tiles, T = 1, with and without a sliding window.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/kernels/kernel_test_util.h"
#include "worker/kernels/cpu/attention.h"
#include "worker/reference/ops_attention.h"

namespace mobius::kernels::cpu {
namespace {

using testing::Bf16Tensor;
using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::kBf16Rtol;
using testing::kFp32Rtol;
using testing::MaxAbs;
using testing::RandomBf16;
using testing::ToFloats;

struct AttnResult {
  std::vector<uint16_t> out, dq, dk, dv;
  std::vector<float> lse;
};

class AttentionTest : public ::testing::TestWithParam<AttentionShape> {
 protected:
  void SetUp() override {
    const AttentionShape& s = GetParam();
    std::mt19937 rng(static_cast<uint32_t>(s.t * 131 + s.heads * 17 + s.head_dim + s.window));
    const int64_t nq = s.b * s.t * s.heads * s.head_dim, nkv = s.b * s.t * s.kv_heads * s.head_dim;
    q_ = RandomBf16(nq, 1.0f, rng);
    k_ = RandomBf16(nkv, 1.0f, rng);
    v_ = RandomBf16(nkv, 1.0f, rng);
    dout_ = RandomBf16(nq, 1.0f, rng);
    dq0_ = RandomBf16(nq, 0.01f, rng);  // gradients accumulate: start from non-zero values
    dk0_ = RandomBf16(nkv, 0.01f, rng);
    dv0_ = RandomBf16(nkv, 0.01f, rng);
  }

  AttnResult Run(ThreadPool* pool) const {
    const AttentionShape& s = GetParam();
    AttnResult r{std::vector<uint16_t>(q_.bits.size()), dq0_.bits, dk0_.bits, dv0_.bits,
                 std::vector<float>(s.b * s.heads * s.t)};
    attention_fwd(r.out.data(), r.lse.data(), q_.data(), k_.data(), v_.data(), s, pool);
    attention_bwd(r.dq.data(), r.dk.data(), r.dv.data(), dout_.data(), q_.data(), k_.data(),
                  v_.data(), r.out.data(), r.lse.data(), s, pool);
    return r;
  }

  // log sum exp of the scaled scores of each (b, h, t), in double.
  std::vector<float> ReferenceLse() const {
    const AttentionShape& s = GetParam();
    const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
    std::vector<float> lse(s.b * s.heads * s.t);
    for (int64_t b = 0; b < s.b; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        for (int64_t t = 0; t < s.t; ++t) {
          const int64_t first = s.window > 0 ? std::max<int64_t>(0, t - s.window + 1) : 0;
          std::vector<double> scores;
          for (int64_t t2 = first; t2 <= t; ++t2) {
            double dot = 0.0;
            for (int64_t d = 0; d < hd; ++d) {
              dot += static_cast<double>(q_.f32[((b * s.t + t) * s.heads + h) * hd + d]) *
                     k_.f32[((b * s.t + t2) * s.kv_heads + h / group) * hd + d];
            }
            scores.push_back(dot / std::sqrt(static_cast<double>(hd)));
          }
          const double m = *std::max_element(scores.begin(), scores.end());
          double sum = 0.0;
          for (double x : scores) sum += std::exp(x - m);
          lse[(b * s.heads + h) * s.t + t] = static_cast<float>(m + std::log(sum));
        }
      }
    }
    return lse;
  }

  Bf16Tensor q_, k_, v_, dout_, dq0_, dk0_, dv0_;
};

TEST_P(AttentionTest, MatchesReference) {
  const AttentionShape& s = GetParam();
  const AttnResult r = Run(nullptr);
  const reference::AttentionShape rs{s.b, s.t, s.heads, s.kv_heads, s.head_dim, s.window};
  std::vector<float> out(q_.f32.size()), att(s.b * s.heads * s.t * s.t);
  reference::AttentionForward(out.data(), att.data(), q_.f32.data(), k_.f32.data(), v_.f32.data(),
                              rs);
  // out is a convex combination of v rows: fp32 vs double leaves ~1e-6 of max|v| absolute.
  ExpectClose("attention out", ToFloats(r.out), out, kBf16Rtol, 1e-5 * MaxAbs(v_.f32));
  ExpectClose("attention lse", r.lse, ReferenceLse(), kFp32Rtol, 1e-5);

  std::vector<float> dq = dq0_.f32, dk = dk0_.f32, dv = dv0_.f32;
  reference::AttentionBackward(dq.data(), dk.data(), dv.data(), dout_.f32.data(), q_.f32.data(),
                               k_.f32.data(), v_.f32.data(), att.data(), rs);
  // dv = P^T dO is formed from fp32 P: one output rounding plus fp32 noise.
  ExpectClose("attention dv", ToFloats(r.dv), dv, kBf16Rtol, 1e-5 * MaxAbs(dv));
  // dq, dk go through D = rowsum(dO * O) with O as stored in bf16 (FlashAttention's choice): each
  // O element is off by up to 2^-8 relative, which shifts every dS of a row by the same absolute
  // amount; that error is on the scale of the largest gradient, not of each element.
  const double kDsAtolShare = 1.0 / 64;
  ExpectClose("attention dq", ToFloats(r.dq), dq, kBf16Rtol, kDsAtolShare * MaxAbs(dq));
  ExpectClose("attention dk", ToFloats(r.dk), dk, kBf16Rtol, kDsAtolShare * MaxAbs(dk));
}

TEST_P(AttentionTest, SameBitsForOneTwoAndThreeThreads) {
  const AttnResult one = Run(nullptr);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    const AttnResult r = Run(&pool);
    ExpectBitwiseEqual("attention out", r.out, one.out);
    ExpectBitwiseEqual("attention lse", r.lse, one.lse);
    ExpectBitwiseEqual("attention dq", r.dq, one.dq);
    ExpectBitwiseEqual("attention dk", r.dk, one.dk);
    ExpectBitwiseEqual("attention dv", r.dv, one.dv);
  }
}

// The KV-cache forward (incremental decoding): the keys and values copied into caches of a larger
// capacity (the rows past the sequence hold garbage that must not be read), the queries run as a
// prefill of the first part and then one position at a time, with two threads. Without a window
// every out and lse row equals the full forward's bit for bit (the same key tiles; masked keys add
// exact zeros); with one the key tiles start at each call's first position, so the online softmax
// is split differently: within the reference tolerances of MatchesReference.
TEST_P(AttentionTest, CachedForwardMatchesFullForward) {
  const AttentionShape& s = GetParam();
  const AttnResult full = Run(nullptr);
  const int64_t hd = s.head_dim, capacity = s.t + 5, prefill = s.t / 2 + 1;
  std::vector<uint16_t> kc(s.b * capacity * s.kv_heads * hd, 0x7fc0);  // NaN: must stay unread
  std::vector<uint16_t> vc(kc.size(), 0x7fc0);
  const int64_t row = s.kv_heads * hd;
  for (int64_t b = 0; b < s.b; ++b) {
    std::copy_n(k_.data() + b * s.t * row, s.t * row, kc.data() + b * capacity * row);
    std::copy_n(v_.data() + b * s.t * row, s.t * row, vc.data() + b * capacity * row);
  }
  std::vector<uint16_t> out(full.out.size());
  std::vector<float> lse(full.lse.size());
  ThreadPool pool(2);
  const int64_t qrow = s.heads * hd;
  for (int64_t start = 0; start < s.t;) {
    const int64_t n = start == 0 ? std::min(prefill, s.t) : 1;
    AttentionShape step = s;
    step.t = n;
    std::vector<uint16_t> q(s.b * n * qrow), o(q.size());
    std::vector<float> l(s.b * s.heads * n);
    for (int64_t b = 0; b < s.b; ++b) {
      std::copy_n(q_.data() + (b * s.t + start) * qrow, n * qrow, q.data() + b * n * qrow);
    }
    attention_cached_fwd(o.data(), l.data(), q.data(), kc.data(), vc.data(), step, start,
                         capacity, &pool);
    for (int64_t b = 0; b < s.b; ++b) {
      std::copy_n(o.data() + b * n * qrow, n * qrow, out.data() + (b * s.t + start) * qrow);
      for (int64_t h = 0; h < s.heads; ++h) {
        std::copy_n(l.data() + (b * s.heads + h) * n, n,
                    lse.data() + (b * s.heads + h) * s.t + start);
      }
    }
    start += n;
  }
  if (s.window == 0) {
    ExpectBitwiseEqual("cached attention out", out, full.out);
    ExpectBitwiseEqual("cached attention lse", lse, full.lse);
  } else {
    ExpectClose("cached attention out", ToFloats(out), ToFloats(full.out), kBf16Rtol,
                1e-5 * MaxAbs(v_.f32));
    ExpectClose("cached attention lse", lse, full.lse, kFp32Rtol, 1e-5);
  }
}

// {b, t, heads, kv_heads, head_dim, window}; tiles are 32 queries x 64 keys.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(AttentionShape{2, 37, 4, 2, 16, 0}, AttentionShape{1, 70, 8, 1, 64, 0},
                      AttentionShape{2, 130, 4, 2, 64, 0}, AttentionShape{1, 1, 4, 2, 16, 0},
                      AttentionShape{2, 1, 8, 1, 64, 3}, AttentionShape{2, 100, 4, 2, 16, 17},
                      AttentionShape{1, 150, 8, 1, 64, 64}, AttentionShape{1, 33, 4, 2, 64, 40}),
    [](const auto& info) {
      const AttentionShape& s = info.param;
      return "b" + std::to_string(s.b) + "_t" + std::to_string(s.t) + "_h" +
             std::to_string(s.heads) + "_kv" + std::to_string(s.kv_heads) + "_hd" +
             std::to_string(s.head_dim) + "_w" + std::to_string(s.window);
    });

}  // namespace
}  // namespace mobius::kernels::cpu
