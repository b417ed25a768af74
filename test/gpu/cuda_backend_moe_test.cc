// cuda_backend_test's mixture-of-experts ops (the harness: cuda_backend_test_util.h): the routing
// kernels of moe_params.h, and gpt-oss's (clamped SwiGLU, attention sinks, bias on fp32 rows,
// scaled RoPE tables), on CudaBackend against CpuBackend.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "test/gpu/cuda_backend_test_util.h"
#include "test/gpu/gpu_test_util.h"

namespace mobius::backend {
namespace {

using namespace cuda_backend_test;  // NOLINT: the harness

// Mixture-of-experts routing (moe_params.h): 300 tokens, 16 experts, top 4, renormalised or not.
// The routing (ids, order, pos, offsets) must be identical (its probabilities differ by float
// rounding only: the CPU sums the softmax in double; a near-tie would flip a choice and show as
// an ids mismatch), the gather, dy and the fp32 scatter bitwise, the 16-bit combine within
// two ulps, the rest within 1e-5 of max|cpu|.
TEST_F(CudaBackendTest, MoeRouting) {
  const int64_t n = 300, e = 16, k = 4, c = 96;
  auto as_float = [](const std::vector<int32_t>& v) { return std::vector<float>(v.begin(), v.end()); };
  for (DType dt : HalfDTypes()) {
    for (bool renormalize : {false, true}) {
      const auto logits = gpu_test::RandomFloats(n * e, -3.0f, 3.0f, 40);
      const auto x = HalfBits(dt, n * c, 1, 41), y = HalfBits(dt, n * k * c, 1, 42);
      const auto dout = gpu_test::RandomFloats(n * c, -1.0f, 1.0f, 43);
      const auto src = gpu_test::RandomFloats(n * k * c, -1.0f, 1.0f, 44);
      Both(Name(renormalize ? "moe renormalised" : "moe", dt), [&](Side& s) -> Outputs {
        float* probs = s.Zeros<float>(n * e);
        float* weights = s.Zeros<float>(n * k);
        int32_t* ids = s.Zeros<int32_t>(n * k);
        int32_t* order = s.Zeros<int32_t>(n * k);
        int32_t* pos = s.Zeros<int32_t>(n * k);
        int32_t* offsets = s.Zeros<int32_t>(e + 1);
        EXPECT_OK(s.b().MoeRoute(s.q(), {.n = n, .experts = e, .k = k,
                                         .renormalize = renormalize, .logits = s.Put(logits),
                                         .probs = probs, .ids = ids, .weights = weights,
                                         .order = order, .pos = pos, .offsets = offsets}));
        uint16_t* gathered = s.Zeros<uint16_t>(n * k * c);
        EXPECT_OK(s.b().MoeGather(s.q(), {.dtype = dt, .n = n, .k = k, .c = c, .order = order,
                                          .src = s.Put(x), .dst = gathered}));
        const uint16_t* yd = s.Put(y);
        uint16_t* out = s.Zeros<uint16_t>(n * c);
        EXPECT_OK(s.b().MoeCombine(s.q(), {.dtype = dt, .n = n, .k = k, .c = c, .pos = pos,
                                           .weights = weights, .y = yd, .out = out}));
        float* dy = s.Zeros<float>(n * k * c);
        float* dweights = s.Zeros<float>(n * k);
        EXPECT_OK(s.b().MoeCombineBackward(
            s.q(), {.dtype = dt, .n = n, .k = k, .c = c, .pos = pos, .weights = weights,
                    .dout = s.Put(dout), .y = yd, .dy = dy, .dweights = dweights}));
        float* dst = s.Put(dout);
        EXPECT_OK(s.b().MoeScatterAdd(s.q(), {.n = n, .k = k, .c = c, .pos = pos,
                                              .src = s.Put(src), .dst = dst}));
        float* dlogits = s.Zeros<float>(n * e);
        EXPECT_OK(s.b().MoeRouteBackward(
            s.q(), {.n = n, .experts = e, .k = k, .renormalize = renormalize,
                    .dweights = dweights, .probs = probs, .ids = ids, .weights = weights,
                    .dlogits = dlogits}));
        EXPECT_OK(s.Sync());
        return {s.Get<float>(probs, n * e), s.Get<float>(weights, n * k),
                as_float(s.Get<int32_t>(ids, n * k)), as_float(s.Get<int32_t>(order, n * k)),
                as_float(s.Get<int32_t>(pos, n * k)), as_float(s.Get<int32_t>(offsets, e + 1)),
                s.GetHalf(dt, gathered, n * k * c), s.GetHalf(dt, out, n * c),
                s.Get<float>(dy, n * k * c), s.Get<float>(dweights, n * k),
                s.Get<float>(dst, n * c), s.Get<float>(dlogits, n * e)};
      }, {1e-5, 1e-5, 0, 0, 0, 0, 0, Tol(dt), 0, 1e-5, 0, 1e-5});
    }
  }
}

// gpt-oss's ops (op_params.h): clamped SwiGLU over interleaved gate/up with values beyond the
// clamps, attention sinks after a windowed attention (forward, then the sinks' and the
// attention's backward), bias on fp32 rows, and RoPE tables scaled by YaRN's attention factor.
TEST_F(CudaBackendTest, GptOssOps) {
  const int64_t n = 300, w = 96, b = 2, t = 40, h = 4, kv = 2, hd = 64, half = hd / 2;
  const AttentionShapeParams shape{.b = b, .t = t, .heads = h, .kv_heads = kv, .head_dim = hd,
                                   .window = 8};
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(150000.0f, -2.0f * i / hd);
  for (DType dt : HalfDTypes()) {
    const auto gu = HalfBits(dt, n * 2 * w, 12, 61), dact = HalfBits(dt, n * w, 1, 62);
    const auto q = HalfBits(dt, b * t * h * hd, 1, 63), k = HalfBits(dt, b * t * kv * hd, 1, 64),
               v = HalfBits(dt, b * t * kv * hd, 1, 65), sinks = HalfBits(dt, h, 2, 66),
               dout = HalfBits(dt, b * t * h * hd, 1, 67), bias = HalfBits(dt, w, 2, 68);
    const auto rows = gpu_test::RandomFloats(n * w, -3.0f, 3.0f, 69);
    Both(Name("gpt-oss ops", dt), [&](Side& s) -> Outputs {
      const uint16_t* gui = s.Put(gu);
      uint16_t* act = s.Zeros<uint16_t>(n * w);
      uint16_t* dgu = s.Zeros<uint16_t>(n * 2 * w);
      EXPECT_OK(s.b().ClampedSwiGluForward(s.q(), {.dtype = dt, .n = n, .width = w,
                                                   .gate_up = gui, .out = act}));
      EXPECT_OK(s.b().ClampedSwiGluBackward(s.q(), {.dtype = dt, .n = n, .width = w,
                                                    .dout = s.Put(dact), .gate_up = gui,
                                                    .dgate_up = dgu}));
      const uint16_t* qi = s.Put(q);
      const uint16_t* ki = s.Put(k);
      const uint16_t* vi = s.Put(v);
      const uint16_t* zi = s.Put(sinks);
      const uint16_t* di = s.Put(dout);
      uint16_t* out = s.Zeros<uint16_t>(b * t * h * hd);
      float* lse = s.Zeros<float>(b * h * t);
      EXPECT_OK(s.b().AttentionForward(s.q(), {.dtype = dt, .shape = shape, .q = qi, .k = ki,
                                               .v = vi, .out = out, .lse = lse}));
      EXPECT_OK(s.b().AttentionSinkForward(s.q(), {.dtype = dt, .b = b, .t = t, .heads = h,
                                                   .head_dim = hd, .sinks = zi, .out = out,
                                                   .lse = lse}));
      float* dz = s.Zeros<float>(h);
      EXPECT_OK(s.b().AttentionSinkBackward(s.q(), {.dtype = dt, .b = b, .t = t, .heads = h,
                                                    .head_dim = hd, .sinks = zi, .out = out,
                                                    .dout = di, .lse = lse, .dsinks = dz}));
      uint16_t* dq = s.Zeros<uint16_t>(b * t * h * hd);
      uint16_t* dk = s.Zeros<uint16_t>(b * t * kv * hd);
      uint16_t* dv = s.Zeros<uint16_t>(b * t * kv * hd);
      EXPECT_OK(s.b().AttentionBackward(s.q(), {.dtype = dt, .shape = shape, .dout = di,
                                                .q = qi, .k = ki, .v = vi, .out = out,
                                                .lse = lse, .dq = dq, .dk = dk, .dv = dv}));
      float* r = s.Put(rows);
      EXPECT_OK(s.b().BiasAdd(s.q(), {.dtype = dt, .n = n, .c = w, .fp32_rows = true,
                                      .inp = r, .bias = s.Put(bias), .out = r}));
      float* cos = s.Zeros<float>(t * half);
      float* sin = s.Zeros<float>(t * half);
      EXPECT_OK(s.b().RopeTables(s.q(), {.t = t, .half = half, .scale = 1.3465736f,
                                         .inv_freq = s.Put(inv_freq), .cos = cos, .sin = sin}));
      EXPECT_OK(s.Sync());
      return {s.GetHalf(dt, act, n * w),          s.GetHalf(dt, dgu, n * 2 * w),
              s.GetHalf(dt, out, b * t * h * hd),  s.Get<float>(lse, b * h * t),
              s.Get<float>(dz, h),                 s.GetHalf(dt, dq, b * t * h * hd),
              s.GetHalf(dt, dk, b * t * kv * hd),  s.GetHalf(dt, dv, b * t * kv * hd),
              s.Get<float>(r, n * w),              s.Get<float>(cos, t * half),
              s.Get<float>(sin, t * half)};
    }, {Tol(dt), Tol(dt), Tol(dt), 1e-5, 1e-4, Tol(dt), Tol(dt), Tol(dt), 0, 3e-7, 3e-7});
  }
}

}  // namespace
}  // namespace mobius::backend
