// worker/kernels/cuda/attention.cuh and the KV-cache forward (attention_cached.cuh) against a naive
// fp32 reference that materialises the T x T probabilities (label `gpu`). Shapes cover GQA, MHA, a
// sliding window (also over more than one 64-row tile), head_dim 64 and 128 (the tiled tensor-core
// forward), 36 (the reference kernels' scalar path) and 256, and T not a multiple of 32 or 64.
//
// Every shape runs in bf16 and in fp16. Tolerances (relative to max|ref|): out, dq, dk, dv are
// 16-bit values computed in fp32 from the same 16-bit inputs, so one output rounding plus a
// possible neighbour: HalfTol (two ulps: 8e-3 bf16, 2e-3 fp16). The tiled forward also rounds P to
// the 16-bit type before P V (as FlashAttention does): 2^-9 (bf16) or 2^-12 (fp16) relative per
// term, averaging out over the keys, well inside the same tolerance. lse is fp32 (expf and fp32
// sums over <= T terms): 1e-5.
#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/attention_cached.cuh"

#include <algorithm>
#include <cmath>
#include <vector>

#include "test/gpu/gpu_test_util.h"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::ExpectClose;
using gpu_test::HalfTol;
using gpu_test::kHalfTypes;
using gpu_test::RandomHalf;

struct Grads {
  std::vector<float> out, lse, dq, dk, dv;
};

// out and the gradients (added to dq0/dk0/dv0) of causal GQA attention, in double; the backward
// reads out as the op returns it, rounded to ht.
Grads Reference(HalfType ht, const AttentionShape& s, const std::vector<float>& q, const std::vector<float>& k,
                const std::vector<float>& v, const std::vector<float>& dout,
                const std::vector<float>& dq0, const std::vector<float>& dk0,
                const std::vector<float>& dv0) {
  const int64_t T = s.t, H = s.heads, KV = s.kv_heads, hd = s.head_dim, group = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  auto qi = [&](int64_t b, int64_t t, int64_t h) { return ((b * T + t) * H + h) * hd; };
  auto ki = [&](int64_t b, int64_t t, int64_t h) { return ((b * T + t) * KV + h) * hd; };
  Grads g;
  g.out.assign(q.size(), 0.0f);
  g.lse.assign(s.b * H * T, 0.0f);
  std::vector<double> dq(dq0.begin(), dq0.end()), dk(dk0.begin(), dk0.end()),
      dv(dv0.begin(), dv0.end());
  std::vector<double> p(T), dp(T);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / group;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t first = s.window > 0 ? std::max<int64_t>(0, t - s.window + 1) : 0;
        double m = -INFINITY;
        for (int64_t j = first; j <= t; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += double{q[qi(b, t, h) + d]} * k[ki(b, j, kh) + d];
          p[j] = dot * scale;
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (int64_t j = first; j <= t; ++j) sum += std::exp(p[j] - m);
        const double lse = m + std::log(sum);
        g.lse[(b * H + h) * T + t] = static_cast<float>(lse);
        for (int64_t j = first; j <= t; ++j) p[j] = std::exp(p[j] - lse);
        std::vector<double> o(hd, 0.0);
        for (int64_t j = first; j <= t; ++j) {
          for (int64_t d = 0; d < hd; ++d) o[d] += p[j] * v[ki(b, j, kh) + d];
        }
        for (int64_t d = 0; d < hd; ++d) g.out[qi(b, t, h) + d] = static_cast<float>(o[d]);
        // Backward of this query row. D = dO . O from the 16-bit output the op is given.
        double dsum = 0;
        for (int64_t d = 0; d < hd; ++d) {
          dsum += dout[qi(b, t, h) + d] * double{gpu_test::RoundHalf(ht, static_cast<float>(o[d]))};
        }
        for (int64_t j = first; j <= t; ++j) {
          double dpj = 0;
          for (int64_t d = 0; d < hd; ++d)
            dpj += double{dout[qi(b, t, h) + d]} * v[ki(b, j, kh) + d];
          const double ds = p[j] * (dpj - dsum) * scale;
          for (int64_t d = 0; d < hd; ++d) {
            dq[qi(b, t, h) + d] += ds * k[ki(b, j, kh) + d];
            dk[ki(b, j, kh) + d] += ds * q[qi(b, t, h) + d];
            dv[ki(b, j, kh) + d] += p[j] * dout[qi(b, t, h) + d];
          }
        }
      }
    }
  }
  g.dq.assign(dq.begin(), dq.end());
  g.dk.assign(dk.begin(), dk.end());
  g.dv.assign(dv.begin(), dv.end());
  return g;
}

void CheckShapeIn(HalfType ht, const AttentionShape& s) {
  SCOPED_TRACE(testing::Message() << HalfTypeName(ht) << " b=" << s.b << " t=" << s.t
                                  << " h=" << s.heads << " kv=" << s.kv_heads
                                  << " hd=" << s.head_dim << " window=" << s.window);
  const double tol = HalfTol(ht);
  const int64_t nq = s.b * s.t * s.heads * s.head_dim, nk = s.b * s.t * s.kv_heads * s.head_dim;
  const auto q = RandomHalf(ht, nq, 1.0f, 1), k = RandomHalf(ht, nk, 1.0f, 2),
             v = RandomHalf(ht, nk, 1.0f, 3);
  const auto dout = RandomHalf(ht, nq, 1.0f, 4);
  const auto dq0 = RandomHalf(ht, nq, 0.05f, 5), dk0 = RandomHalf(ht, nk, 0.05f, 6),
             dv0 = RandomHalf(ht, nk, 0.05f, 7);
  const Grads ref = Reference(ht, s, q.values, k.values, v.values, dout.values, dq0.values,
                              dk0.values, dv0.values);
  DeviceArray<uint16_t> d_q(q.bits), d_k(k.bits), d_v(v.bits), d_out(nq), d_dout(dout.bits);
  DeviceArray<float> d_lse(s.b * s.heads * s.t);
  // The reference forward first, then attention_fwd (the tiled kernel where it applies), whose
  // out and lse the backward uses.
  MOBIUS_ASSERT_KERNEL_OK(attention_fwd_reference(ht, d_out.get(), d_lse.get(), d_q.get(),
                                                  d_k.get(), d_v.get(), s, nullptr));
  ExpectClose(ht, d_out.ToHost(), ref.out, tol, "attention out (reference)");
  ExpectClose(d_lse.ToHost(), ref.lse, 1e-5, "attention lse (reference)");
  const bool tiled = AttentionFlashFwdApplies(s, d_q.get(), d_k.get(), d_v.get());
  EXPECT_EQ(tiled, s.head_dim == 64 || s.head_dim == 128);
  EXPECT_EQ(AttentionMmaFwdApplies(s, d_q.get(), d_k.get(), d_v.get()), tiled);
  if (tiled) {  // both tiled forwards by name (attention_fwd below picks one)
    EXPECT_TRUE(AttentionMmaFwdChecked(ht, s.head_dim));
    MOBIUS_ASSERT_KERNEL_OK(attention_flash_fwd(ht, d_out.get(), d_lse.get(), d_q.get(), d_k.get(),
                                                d_v.get(), s, nullptr));
    ExpectClose(ht, d_out.ToHost(), ref.out, tol, "attention out (WMMA)");
    ExpectClose(d_lse.ToHost(), ref.lse, 1e-5, "attention lse (WMMA)");
    MOBIUS_ASSERT_KERNEL_OK(attention_mma_fwd(ht, d_out.get(), d_lse.get(), d_q.get(), d_k.get(),
                                              d_v.get(), s, nullptr));
    ExpectClose(ht, d_out.ToHost(), ref.out, tol, "attention out (mma)");
    ExpectClose(d_lse.ToHost(), ref.lse, 1e-5, "attention lse (mma)");
  }
  MOBIUS_ASSERT_KERNEL_OK(
      attention_fwd(ht, d_out.get(), d_lse.get(), d_q.get(), d_k.get(), d_v.get(), s, nullptr));
  ExpectClose(ht, d_out.ToHost(), ref.out, tol, tiled ? "attention out (tiled)" : "attention out");
  ExpectClose(d_lse.ToHost(), ref.lse, 1e-5, tiled ? "attention lse (tiled)" : "attention lse");
  // The backward three ways, each from the same initial gradients: attention_bwd (the tiled
  // kernel where it applies and its on-device check passed), the reference kernels, the tiled
  // kernel itself.
  const bool tiled_bwd = AttentionFlashBwdApplies(s, d_q.get(), d_k.get(), d_v.get(), d_dout.get());
  EXPECT_EQ(tiled_bwd, s.head_dim == 64 || s.head_dim == 128);
  if (tiled_bwd) EXPECT_TRUE(AttentionFlashBwdChecked(ht, s.head_dim));
  for (int which = 0; which < (tiled_bwd ? 3 : 2); ++which) {
    const char* name = which == 0 ? "attention_bwd" : which == 1 ? "reference" : "tiled";
    SCOPED_TRACE(name);
    DeviceArray<uint16_t> dq(dq0.bits), dk(dk0.bits), dv(dv0.bits);
    const auto bwd = which == 0 ? attention_bwd : which == 1 ? attention_bwd_reference
                                                             : attention_flash_bwd;
    MOBIUS_ASSERT_KERNEL_OK(bwd(ht, dq.get(), dk.get(), dv.get(), d_dout.get(), d_q.get(),
                                d_k.get(), d_v.get(), d_out.get(), d_lse.get(), s, nullptr));
    ExpectClose(ht, dq.ToHost(), ref.dq, tol, "attention dq");
    ExpectClose(ht, dk.ToHost(), ref.dk, tol, "attention dk");
    ExpectClose(ht, dv.ToHost(), ref.dv, tol, "attention dv");
  }
}

void CheckShape(const AttentionShape& s) {
  for (HalfType ht : kHalfTypes) CheckShapeIn(ht, s);
}

// attention_cached.cuh: the keys and values in caches of a larger capacity (rows past the sequence
// NaN: never read), the queries as a prefill of the first half, then one position at a time; out
// and lse of every row against the same reference (HalfTol, 1e-5), in bf16 and in fp16.
void CheckCachedShapeIn(HalfType ht, const AttentionShape& s) {
  SCOPED_TRACE(testing::Message() << HalfTypeName(ht) << " cached b=" << s.b << " t=" << s.t
                                  << " h=" << s.heads << " kv=" << s.kv_heads
                                  << " hd=" << s.head_dim << " window=" << s.window);
  const int64_t hd = s.head_dim, qrow = s.heads * hd, krow = s.kv_heads * hd;
  const int64_t capacity = s.t + 3, nq = s.b * s.t * qrow, nk = s.b * s.t * krow;
  const auto q = RandomHalf(ht, nq, 1.0f, 11), k = RandomHalf(ht, nk, 1.0f, 12),
             v = RandomHalf(ht, nk, 1.0f, 13);
  const std::vector<float> none(nq, 0.0f), none_k(nk, 0.0f);
  const Grads ref = Reference(ht, s, q.values, k.values, v.values, none, none, none_k, none_k);
  // 0x7fc0: a NaN in both formats.
  std::vector<uint16_t> kc(s.b * capacity * krow, 0x7fc0), vc(kc.size(), 0x7fc0);
  for (int64_t b = 0; b < s.b; ++b) {
    std::copy_n(k.bits.begin() + b * s.t * krow, s.t * krow, kc.begin() + b * capacity * krow);
    std::copy_n(v.bits.begin() + b * s.t * krow, s.t * krow, vc.begin() + b * capacity * krow);
  }
  DeviceArray<uint16_t> d_k(kc), d_v(vc);
  std::vector<float> out(nq), lse(s.b * s.heads * s.t);
  for (int64_t start = 0; start < s.t;) {
    const int64_t n = start == 0 ? s.t / 2 + 1 : 1;
    AttentionShape step = s;
    step.t = n;
    std::vector<uint16_t> qs(s.b * n * qrow);
    for (int64_t b = 0; b < s.b; ++b) {
      std::copy_n(q.bits.begin() + (b * s.t + start) * qrow, n * qrow, qs.begin() + b * n * qrow);
    }
    DeviceArray<uint16_t> d_q(qs), d_out(qs.size());
    DeviceArray<float> d_lse(s.b * s.heads * n);
    MOBIUS_ASSERT_KERNEL_OK(attention_cached_fwd(ht, d_out.get(), d_lse.get(), d_q.get(),
                                                 d_k.get(), d_v.get(), step, start, capacity,
                                                 nullptr));
    const std::vector<uint16_t> o = d_out.ToHost();
    const std::vector<float> l = d_lse.ToHost();
    for (int64_t b = 0; b < s.b; ++b) {
      for (int64_t i = 0; i < n * qrow; ++i) {
        out[(b * s.t + start) * qrow + i] = gpu_test::FromHalf(ht, o[b * n * qrow + i]);
      }
      for (int64_t h = 0; h < s.heads; ++h) {
        std::copy_n(l.begin() + (b * s.heads + h) * n, n,
                    lse.begin() + (b * s.heads + h) * s.t + start);
      }
    }
    start += n;
  }
  ExpectClose(out, ref.out, HalfTol(ht), "cached attention out");
  ExpectClose(lse, ref.lse, 1e-5, "cached attention lse");
}

void CheckCachedShape(const AttentionShape& s) {
  for (HalfType ht : kHalfTypes) CheckCachedShapeIn(ht, s);
}

TEST(AttentionCuda, CachedForwardMatchesReference) {
  MOBIUS_REQUIRE_GPU();
  CheckCachedShape({.b = 2, .t = 37, .heads = 4, .kv_heads = 2, .head_dim = 64, .window = 0});
  CheckCachedShape({.b = 1, .t = 45, .heads = 6, .kv_heads = 2, .head_dim = 36, .window = 16});
  // A prefill over several of the tiled forward's tiles (76 rows from position 0), a window.
  CheckCachedShape({.b = 2, .t = 150, .heads = 4, .kv_heads = 1, .head_dim = 128, .window = 40});
}

TEST(AttentionCuda, CachedForwardRefusesAPositionPastTheCapacity) {
  EXPECT_EQ(attention_cached_fwd(HalfType::kBf16, nullptr, nullptr, nullptr, nullptr, nullptr,
                                 {.b = 1, .t = 2, .heads = 2, .kv_heads = 1, .head_dim = 8}, 3, 4,
                                 nullptr)
                .code(),
            KernelCode::kInvalidArgument);
}

TEST(AttentionCuda, GqaMatchesReference) {
  MOBIUS_REQUIRE_GPU();
  CheckShape({.b = 2, .t = 37, .heads = 4, .kv_heads = 2, .head_dim = 64, .window = 0});
}

TEST(AttentionCuda, MhaLongerSequenceMatchesReference) {
  MOBIUS_REQUIRE_GPU();
  CheckShape({.b = 1, .t = 100, .heads = 2, .kv_heads = 2, .head_dim = 128, .window = 0});
}

TEST(AttentionCuda, SlidingWindowAndScalarPathMatchReference) {
  MOBIUS_REQUIRE_GPU();
  CheckShape({.b = 2, .t = 45, .heads = 6, .kv_heads = 2, .head_dim = 36, .window = 16});
}

TEST(AttentionCuda, TiledForwardAcrossTilesWithWindowMatchesReference) {
  MOBIUS_REQUIRE_GPU();
  CheckShape({.b = 1, .t = 150, .heads = 4, .kv_heads = 1, .head_dim = 64, .window = 40});
  CheckShape({.b = 2, .t = 130, .heads = 2, .kv_heads = 2, .head_dim = 128, .window = 0});
}

// The tiled backward over many tiles both ways: GQA 4:1, a window that cuts tiles, a partial last
// tile, head_dim 128.
TEST(AttentionCuda, TiledBackwardAcrossManyTilesMatchesReference) {
  MOBIUS_REQUIRE_GPU();
  CheckShape({.b = 2, .t = 300, .heads = 8, .kv_heads = 2, .head_dim = 128, .window = 100});
  CheckShape({.b = 1, .t = 257, .heads = 4, .kv_heads = 4, .head_dim = 64, .window = 0});
}

TEST(AttentionCuda, HeadDim256MatchesReference) {
  MOBIUS_REQUIRE_GPU();
  CheckShape({.b = 1, .t = 19, .heads = 2, .kv_heads = 1, .head_dim = 256, .window = 0});
}

TEST(AttentionCuda, ShapeChecks) {  // before anything touches the device
  EXPECT_EQ(CheckAttentionShape({.b = 1, .t = 4, .heads = 3, .kv_heads = 2, .head_dim = 64}).code(),
            KernelCode::kInvalidArgument);
  EXPECT_EQ(
      CheckAttentionShape({.b = 1, .t = 4, .heads = 2, .kv_heads = 1, .head_dim = 512}).code(),
      KernelCode::kUnimplemented);
  EXPECT_TRUE(CheckAttentionShape({.b = 1, .t = 4, .heads = 2, .kv_heads = 1, .head_dim = 8}).ok());
}

}  // namespace
}  // namespace mobius::kernels::cuda
