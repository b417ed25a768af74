// attention_* (flash-style, logsumexp only) against reference ops_attention.h (full probability
// matrix) on the same 16-bit-rounded inputs, in bf16 and fp16: GQA 4/2 and 8/1, head_dim 16 and
// 64, T not a multiple of the tiles, T = 1, with and without a sliding window.
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

using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::Format;
using testing::HalfTensor;
using testing::kFp32Rtol;
using testing::MaxAbs;
using testing::RandomHalf;
using testing::ToFloats;

template <typename T>
struct AttnResult {
  std::vector<T> out, dq, dk, dv;
  std::vector<float> lse;
};

// The inputs of one shape in one format (the same draws for every format).
template <typename T>
struct AttnInputs {
  explicit AttnInputs(const AttentionShape& s) {
    std::mt19937 rng(static_cast<uint32_t>(s.t * 131 + s.heads * 17 + s.head_dim + s.window));
    const int64_t nq = s.b * s.t * s.heads * s.head_dim, nkv = s.b * s.t * s.kv_heads * s.head_dim;
    q = RandomHalf<T>(nq, 1.0f, rng);
    k = RandomHalf<T>(nkv, 1.0f, rng);
    v = RandomHalf<T>(nkv, 1.0f, rng);
    dout = RandomHalf<T>(nq, 1.0f, rng);
    dq0 = RandomHalf<T>(nq, 0.01f, rng);  // gradients accumulate: start from non-zero values
    dk0 = RandomHalf<T>(nkv, 0.01f, rng);
    dv0 = RandomHalf<T>(nkv, 0.01f, rng);
  }
  HalfTensor<T> q, k, v, dout, dq0, dk0, dv0;
};

class AttentionTest : public ::testing::TestWithParam<AttentionShape> {
 protected:
  template <typename T>
  AttnResult<T> Run(const AttnInputs<T>& in, ThreadPool* pool) const {
    const AttentionShape& s = GetParam();
    AttnResult<T> r{std::vector<T>(in.q.bits.size()), in.dq0.bits, in.dk0.bits, in.dv0.bits,
                    std::vector<float>(s.b * s.heads * s.t)};
    attention_fwd(r.out.data(), r.lse.data(), in.q.data(), in.k.data(), in.v.data(), s, pool);
    attention_bwd(r.dq.data(), r.dk.data(), r.dv.data(), in.dout.data(), in.q.data(), in.k.data(),
                  in.v.data(), r.out.data(), r.lse.data(), s, pool);
    return r;
  }

  // log sum exp of the scaled scores of each (b, h, t), in double.
  template <typename T>
  std::vector<float> ReferenceLse(const AttnInputs<T>& in) const {
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
              dot += static_cast<double>(in.q.f32[((b * s.t + t) * s.heads + h) * hd + d]) *
                     in.k.f32[((b * s.t + t2) * s.kv_heads + h / group) * hd + d];
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

  template <typename T>
  void CheckReference() const {
    using F = Format<T>;
    SCOPED_TRACE(F::kName);
    const AttentionShape& s = GetParam();
    const AttnInputs<T> in(s);
    const AttnResult<T> r = Run(in, nullptr);
    const reference::AttentionShape rs{s.b, s.t, s.heads, s.kv_heads, s.head_dim, s.window};
    std::vector<float> out(in.q.f32.size()), att(s.b * s.heads * s.t * s.t);
    reference::AttentionForward(out.data(), att.data(), in.q.f32.data(), in.k.f32.data(),
                                in.v.f32.data(), rs);
    // out is a convex combination of v rows: fp32 vs double leaves ~1e-6 of max|v| absolute.
    ExpectClose("attention out", ToFloats(r.out), out, F::kRtol,
                1e-5 * MaxAbs(in.v.f32) + F::kAtol);
    ExpectClose("attention lse", r.lse, ReferenceLse(in), kFp32Rtol, 1e-5);

    std::vector<float> dq = in.dq0.f32, dk = in.dk0.f32, dv = in.dv0.f32;
    reference::AttentionBackward(dq.data(), dk.data(), dv.data(), in.dout.f32.data(),
                                 in.q.f32.data(), in.k.f32.data(), in.v.f32.data(), att.data(), rs);
    // dv = P^T dO is formed from fp32 P: one output rounding plus fp32 noise.
    ExpectClose("attention dv", ToFloats(r.dv), dv, F::kRtol, 1e-5 * MaxAbs(dv) + F::kAtol);
    // dq, dk go through D = rowsum(dO * O) with O as stored in 16 bits (FlashAttention's choice):
    // each O element is off by up to half an ulp (bf16 2^-8, fp16 2^-11 relative), which shifts
    // every dS of a row by the same absolute amount; that error is on the scale of the largest
    // gradient, not of each element: 2 ulps (bf16 1/64, fp16 1/512) of it.
    const double ds_atol_share = 2 * F::kRtol;
    ExpectClose("attention dq", ToFloats(r.dq), dq, F::kRtol, ds_atol_share * MaxAbs(dq));
    ExpectClose("attention dk", ToFloats(r.dk), dk, F::kRtol, ds_atol_share * MaxAbs(dk));
  }

  template <typename T>
  void CheckThreads() const {
    SCOPED_TRACE(Format<T>::kName);
    const AttnInputs<T> in(GetParam());
    const AttnResult<T> one = Run(in, nullptr);
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      const AttnResult<T> r = Run(in, &pool);
      ExpectBitwiseEqual("attention out", r.out, one.out);
      ExpectBitwiseEqual("attention lse", r.lse, one.lse);
      ExpectBitwiseEqual("attention dq", r.dq, one.dq);
      ExpectBitwiseEqual("attention dk", r.dk, one.dk);
      ExpectBitwiseEqual("attention dv", r.dv, one.dv);
    }
  }

  template <typename T>
  void CheckCached() const;
};

TEST_P(AttentionTest, MatchesReference) {
  CheckReference<uint16_t>();
  CheckReference<F16>();
}

TEST_P(AttentionTest, SameBitsForOneTwoAndThreeThreads) {
  CheckThreads<uint16_t>();
  CheckThreads<F16>();
}

// The KV-cache forward (incremental decoding): the keys and values copied into caches of a larger
// capacity (the rows past the sequence hold garbage that must not be read), the queries run as a
// prefill of the first part and then one position at a time, with two threads. Without a window
// every out and lse row equals the full forward's bit for bit (the same key tiles; masked keys add
// exact zeros); with one the key tiles start at each call's first position, so the online softmax
// is split differently: within the reference tolerances of MatchesReference.
template <typename T>
void AttentionTest::CheckCached() const {
  using F = Format<T>;
  SCOPED_TRACE(F::kName);
  const AttentionShape& s = GetParam();
  const AttnInputs<T> in(s);
  const AttnResult<T> full = Run(in, nullptr);
  const int64_t hd = s.head_dim, capacity = s.t + 5, prefill = s.t / 2 + 1;
  // NaN in both formats (bf16 0x7fc0; fp16 0x7fc0 is a NaN too): must stay unread.
  std::vector<T> kc(s.b * capacity * s.kv_heads * hd, T{0x7fc0});
  std::vector<T> vc(kc.size(), T{0x7fc0});
  const int64_t row = s.kv_heads * hd;
  for (int64_t b = 0; b < s.b; ++b) {
    std::copy_n(in.k.data() + b * s.t * row, s.t * row, kc.data() + b * capacity * row);
    std::copy_n(in.v.data() + b * s.t * row, s.t * row, vc.data() + b * capacity * row);
  }
  std::vector<T> out(full.out.size());
  std::vector<float> lse(full.lse.size());
  ThreadPool pool(2);
  const int64_t qrow = s.heads * hd;
  for (int64_t start = 0; start < s.t;) {
    const int64_t n = start == 0 ? std::min(prefill, s.t) : 1;
    AttentionShape step = s;
    step.t = n;
    std::vector<T> q(s.b * n * qrow), o(q.size());
    std::vector<float> l(s.b * s.heads * n);
    for (int64_t b = 0; b < s.b; ++b) {
      std::copy_n(in.q.data() + (b * s.t + start) * qrow, n * qrow, q.data() + b * n * qrow);
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
    ExpectClose("cached attention out", ToFloats(out), ToFloats(full.out), F::kRtol,
                1e-5 * MaxAbs(in.v.f32) + F::kAtol);
    ExpectClose("cached attention lse", lse, full.lse, kFp32Rtol, 1e-5);
  }
}

TEST_P(AttentionTest, CachedForwardMatchesFullForward) {
  CheckCached<uint16_t>();
  CheckCached<F16>();
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
