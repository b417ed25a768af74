// CudaBackend against CpuBackend (the oracle) through the Backend interface (the harness:
// cuda_backend_test_util.h; the mixture-of-experts ops: cuda_backend_moe_test.cc): every op on the same
// seeded random inputs on both, in bf16 and in fp16 (the ops' dtype fields), outputs compared with
// the per-op tolerances of docs/gpu.md (rule: worst |cuda - cpu| <= tol * max|cpu|; 0 = bitwise;
// a 16-bit output's tolerance is two ulps of its format, HalfTol: 8e-3 bf16, 2e-3 fp16); plus the backend contract on a GPU: the
// memory cap and arena reuse, chunked copies, events ordering two queues, pinned registration,
// data errors reported once by Synchronize, argument errors at enqueue. Label `gpu`: skipped
// without a device. Full tree only (CpuBackend and CudaBackend need Abseil).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/nf4.h"
#include "gtest/gtest.h"
#include "test/gpu/cuda_backend_test_util.h"
#include "test/gpu/gpu_test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"

namespace mobius::backend {
namespace {

using namespace cuda_backend_test;  // NOLINT: the harness

TEST_F(CudaBackendTest, NameAndCapacity) {
  if (self_check_) GTEST_SKIP() << "CUDA only";
  EXPECT_EQ(cuda_->name(), "cuda:0");
  EXPECT_EQ(cuda_->capacity_bytes(), uint64_t{1} << 30);
}

TEST_F(CudaBackendTest, GemmHalfAndFp32) {
  const int64_t m = 96, n = 80, k = 200;
  for (DType dt : HalfDTypes()) {
    const auto a = HalfBits(dt, m * k, 1.0f, 1), b = HalfBits(dt, n * k, 1.0f, 2);
    Both(Name("gemm", dt), [&](Side& s) -> Outputs {
      float* c32 = s.Zeros<float>(m * n);
      uint16_t* c16 = s.Zeros<uint16_t>(m * n);
      GemmParams p{.m = m, .n = n, .k = k, .trans_b = true, .a_type = dt, .a = s.Put(a),
                   .lda = k, .b_type = dt, .b = s.Put(b), .ldb = k,
                   .c_type = DType::kFp32, .c = c32, .ldc = n};
      EXPECT_OK(s.b().Gemm(s.q(), p));
      p.c_type = dt;
      p.c = c16;
      EXPECT_OK(s.b().Gemm(s.q(), p));
      EXPECT_OK(s.Sync());
      return {s.Get<float>(c32, m * n), s.GetHalf(dt, c16, m * n)};
    }, {1e-4, Tol(dt)});
  }
}

// fp16 with half_accumulate: CUDA sums in fp16 (CUBLAS_COMPUTE_16F), the CPU backend in fp32 with
// one rounding (gemm_params.h). K = 1024 products of values in [-1, 1]: the fp16 accumulation's
// error stays under (2 + sqrt(K)) 2^-11 = 1.7e-2 of max|C| (the bound and its derivation:
// test/gpu/gemm_test.cc), beta 1 adds C's own rounding.
TEST_F(CudaBackendTest, GemmFp16HalfAccumulate) {
  if (!oracle_fp16_) GTEST_SKIP() << kNoOracleFp16;
  const int64_t m = 64, n = 96, k = 1024;
  const auto a = HalfBits(DType::kF16, m * k, 1.0f, 60), b = HalfBits(DType::kF16, n * k, 1.0f, 61);
  const auto c0 = HalfBits(DType::kF16, m * n, 1.0f, 62);
  Both("gemm fp16 half_accumulate", [&](Side& s) -> Outputs {
    uint16_t* c = s.Put(c0);
    EXPECT_OK(s.b().Gemm(s.q(), {.m = m, .n = n, .k = k, .trans_b = true, .alpha = 0.5f,
                                 .beta = 1.0f, .a_type = DType::kF16, .a = s.Put(a), .lda = k,
                                 .b_type = DType::kF16, .b = s.Put(b), .ldb = k,
                                 .c_type = DType::kF16, .c = c, .ldc = n,
                                 .half_accumulate = true}));
    EXPECT_OK(s.Sync());
    return {s.GetHalf(DType::kF16, c, m * n)};
  }, {(2.0 + 32.0) * std::ldexp(1.0, -11)});
}

// The runtime's backward multiplies fp32 activation gradients with 16-bit operands; CUDA rounds the
// fp32 operand to the other operand's type first (cuda_ops.cc), so the tolerance is that rounding
// of one operand summed over K terms of random sign: two ulps of the format (8e-3 bf16, 2e-3 fp16)
// of max|C| is ample.
TEST_F(CudaBackendTest, GemmMixedFp32TimesHalf) {
  const int64_t m = 64, n = 96, k = 130;
  const auto dy = gpu_test::RandomFloats(m * k, -1, 1, 30);
  for (DType dt : HalfDTypes()) {
    const auto w = HalfBits(dt, k * n, 1.0f, 31);
    Both(Name("gemm mixed", dt), [&](Side& s) -> Outputs {
      float* c1 = s.Zeros<float>(m * n);
      float* c2 = s.Zeros<float>(m * n);
      // dx = dy * W (fp32 x 16-bit), then dW^T-like: W^T-shaped (16-bit x fp32) with beta = 1.
      EXPECT_OK(s.b().Gemm(s.q(), {.m = m, .n = n, .k = k, .a_type = DType::kFp32,
                                   .a = s.Put(dy), .lda = k, .b_type = dt, .b = s.Put(w),
                                   .ldb = n, .c_type = DType::kFp32, .c = c1, .ldc = n}));
      EXPECT_OK(s.b().Gemm(s.q(), {.m = n, .n = m, .k = k, .trans_a = true, .trans_b = true,
                                   .beta = 1.0f, .a_type = dt, .a = s.Put(w), .lda = n,
                                   .b_type = DType::kFp32, .b = s.Put(dy), .ldb = k,
                                   .c_type = DType::kFp32, .c = c2, .ldc = m}));
      EXPECT_OK(s.Sync());
      return {s.Get<float>(c1, m * n), s.Get<float>(c2, m * n)};
    }, {Tol(dt), Tol(dt)});
  }
}

// LoRA's output term (worker/model/linear.cc): y (16-bit) += scale * h B^T with h and B fp32 and
// beta 1, which cuBLASLt has no type set for: CUDA widens C into fp32 scratch, accumulates and
// rounds once, as the CPU backend does; the fp32 operands are multiplied unrounded on both, so
// the difference is the fp32 sum order (within one ulp of C).
TEST_F(CudaBackendTest, GemmFp32IntoHalfWithBeta) {
  const int64_t m = 48, n = 72, k = 16;
  const auto h = gpu_test::RandomFloats(m * k, -1, 1, 40);
  const auto b = gpu_test::RandomFloats(n * k, -1, 1, 41);
  for (DType dt : HalfDTypes()) {
    const auto y = HalfBits(dt, m * n, 1.0f, 42);
    Both(Name("gemm fp32 -> 16-bit", dt), [&](Side& s) -> Outputs {
      uint16_t* c = s.Put(y);
      EXPECT_OK(s.b().Gemm(s.q(), {.m = m, .n = n, .k = k, .trans_b = true, .alpha = 2.0f,
                                   .beta = 1.0f, .a_type = DType::kFp32, .a = s.Put(h), .lda = k,
                                   .b_type = DType::kFp32, .b = s.Put(b), .ldb = k,
                                   .c_type = dt, .c = c, .ldc = n}));
      EXPECT_OK(s.Sync());
      return {s.GetHalf(dt, c, m * n)};
    }, {Tol(dt)});
  }
}

// Type sets cuBLASLt lacks are refused at enqueue, naming the types (the CPU backend computes them
// all, so this is CUDA only).
TEST_F(CudaBackendTest, GemmTypeSetsWithoutCublasLtAreUnimplemented) {
  if (self_check_) GTEST_SKIP() << "CUDA only";
  Side s(cuda_.get());
  const auto a = HalfBits(DType::kBf16, 16, 1, 1), b = HalfBits(DType::kF16, 16, 1, 2);
  uint16_t* c = s.Zeros<uint16_t>(16);
  GemmParams p{.m = 4, .n = 4, .k = 4, .a_type = DType::kBf16, .a = s.Put(a), .lda = 4,
               .b_type = DType::kF16, .b = s.Put(b), .ldb = 4, .c_type = DType::kFp32, .c = c,
               .ldc = 4};
  absl::Status st = s.b().Gemm(s.q(), p);  // bf16 x fp16
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("a bf16, b fp16"), std::string::npos) << st;
  p.b_type = DType::kBf16;
  p.c_type = DType::kF16;  // bf16 inputs into an fp16 C
  st = s.b().Gemm(s.q(), p);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  p.a_type = p.b_type = p.c_type = DType::kF16;
  p.half_accumulate = true;
  p.alpha = 1e6f;  // not an fp16 scalar
  EXPECT_EQ(s.b().Gemm(s.q(), p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_OK(s.Sync());  // nothing was enqueued
}

TEST_F(CudaBackendTest, CastZeroResidualBiasAreBitwise) {
  const int64_t n = 64, c = 37;
  const auto f = gpu_test::RandomFloats(n * c, -3, 3, 3);
  for (DType dt : HalfDTypes()) {
    const DType other = dt == DType::kBf16 ? DType::kF16 : DType::kBf16;
    const auto x = HalfBits(dt, n * c, 2, 4), y = HalfBits(dt, n * c, 2, 5),
               bias = HalfBits(dt, c, 1, 6);
    Both(Name("cast/residual/bias", dt), [&](Side& s) -> Outputs {
      uint16_t* h = s.Zeros<uint16_t>(n * c);
      float* back = s.Zeros<float>(n * c);
      uint16_t* converted = s.Zeros<uint16_t>(n * c);
      uint16_t* sum = s.Zeros<uint16_t>(n * c);
      uint16_t* biased = s.Zeros<uint16_t>(n * c);
      float* zeroed = s.Put(f);
      EXPECT_OK(s.b().Cast(s.q(), {.n = n * c, .src_type = DType::kFp32, .dst_type = dt,
                                   .src = s.Put(f), .dst = h}));
      EXPECT_OK(s.b().Cast(s.q(), {.n = n * c, .src_type = dt, .dst_type = DType::kFp32,
                                   .src = h, .dst = back}));
      if (oracle_fp16_) {  // bf16 <-> fp16
        EXPECT_OK(s.b().Cast(s.q(), {.n = n * c, .src_type = dt, .dst_type = other, .src = h,
                                     .dst = converted}));
      }
      EXPECT_OK(s.b().ResidualAdd(s.q(), {.dtype = dt, .n = n * c, .a = s.Put(x), .b = s.Put(y),
                                          .out = sum}));
      EXPECT_OK(s.b().BiasAdd(s.q(), {.dtype = dt, .n = n, .c = c, .inp = s.Put(x),
                                      .bias = s.Put(bias), .out = biased}));
      EXPECT_OK(s.b().Zero(s.q(), {.dst = zeroed, .bytes = 4 * static_cast<uint64_t>(n * c)}));
      EXPECT_OK(s.Sync());
      return {s.GetHalf(dt, h, n * c), s.Get<float>(back, n * c),
              oracle_fp16_ ? s.GetHalf(other, converted, n * c) : std::vector<float>(n * c),
              s.GetHalf(dt, sum, n * c), s.GetHalf(dt, biased, n * c),
              s.Get<float>(zeroed, n * c)};
    }, {0, 0, 0, 0, 0, 0});
  }
}

// LoRA dropout: the counter-based mask (worker/kernels/dropout_mask.h) is the same on both
// backends, element for element, forward (bf16 and fp32 input; fp16 below) and accumulating
// backward.
TEST_F(CudaBackendTest, DropoutIsBitwise) {
  const int64_t n = 130, c = 77;
  const auto x16 = Bf16Bits(n * c, 2, 50);
  const auto x32 = gpu_test::RandomFloats(n * c, -2, 2, 51);
  const auto acc = gpu_test::RandomFloats(n * c, -1, 1, 52);
  Both("dropout", [&](Side& s) -> Outputs {
    float* a = s.Zeros<float>(n * c);
    float* b = s.Zeros<float>(n * c);
    float* d = s.Put(acc);
    EXPECT_OK(s.b().Dropout(s.q(), {.n = n, .c = c, .inp_type = DType::kBf16, .inp = s.Put(x16),
                                    .out = a, .p = 0.1f, .key = 12345, .row_offset = 7}));
    EXPECT_OK(s.b().Dropout(s.q(), {.n = n, .c = c, .inp_type = DType::kFp32, .inp = s.Put(x32),
                                    .out = b, .p = 0.5f, .key = 999, .row_offset = 0}));
    EXPECT_OK(s.b().Dropout(s.q(), {.n = n, .c = c, .inp_type = DType::kFp32, .inp = s.Put(x32),
                                    .out = d, .accumulate = true, .p = 0.3f, .key = 4242,
                                    .row_offset = 1000}));
    EXPECT_OK(s.Sync());
    return {s.Get<float>(a, n * c), s.Get<float>(b, n * c), s.Get<float>(d, n * c)};
  }, {0, 0, 0});
}

TEST_F(CudaBackendTest, DropoutOfFp16IsBitwise) {
  if (!oracle_fp16_) GTEST_SKIP() << kNoOracleFp16;
  const int64_t n = 130, c = 77;
  const auto x = HalfBits(DType::kF16, n * c, 2, 53);
  Both("dropout fp16", [&](Side& s) -> Outputs {
    float* out = s.Zeros<float>(n * c);
    EXPECT_OK(s.b().Dropout(s.q(), {.n = n, .c = c, .inp_type = DType::kF16, .inp = s.Put(x),
                                    .out = out, .p = 0.2f, .key = 777, .row_offset = 3}));
    EXPECT_OK(s.Sync());
    return {s.Get<float>(out, n * c)};
  }, {0});
}

// The NF4 dequantise of a QLoRA base: the GPU kernel's values are the CPU's bit for bit, bf16 and
// fp16, over several scale groups and an odd tail.
TEST_F(CudaBackendTest, DequantizeNf4IsBitwise) {
  const int64_t n = 64 * 700 + 5;
  const auto x = gpu_test::RandomFloats(n, -0.05f, 0.05f, 54);
  const numeric::Nf4Tensor t = numeric::QuantizeNf4(x.data(), n);
  std::vector<uint8_t> blob(numeric::Nf4Bytes(n));
  numeric::WriteNf4Blob(t, blob.data());
  Both("dequantize_nf4", [&](Side& s) -> Outputs {
    const uint8_t* src = s.Put(blob);
    uint16_t* a = s.Zeros<uint16_t>(n);
    uint16_t* b = s.Zeros<uint16_t>(n);
    EXPECT_OK(s.b().DequantizeNf4(s.q(), {.n = n, .src = src, .dst_type = DType::kBf16, .out = a}));
    EXPECT_OK(s.b().DequantizeNf4(s.q(), {.n = n, .src = src, .dst_type = DType::kF16, .out = b}));
    EXPECT_OK(s.Sync());
    return {s.GetBf16(a, n), s.GetHalf(DType::kF16, b, n)};
  }, {0, 0});
}

TEST_F(CudaBackendTest, BiasBackward) {
  const int64_t n = 300, c = 70;
  const auto d32 = gpu_test::RandomFloats(n * c, -1, 1, 8);
  for (DType dt : HalfDTypes()) {
    const auto d16 = HalfBits(dt, n * c, 1, 7);
    Both(Name("bias_backward", dt), [&](Side& s) -> Outputs {
      float* a = s.Zeros<float>(c);
      float* b = s.Zeros<float>(c);
      EXPECT_OK(s.b().BiasBackward(s.q(), {.n = n, .c = c, .dout_type = dt, .dout = s.Put(d16),
                                           .dbias = a}));
      EXPECT_OK(s.b().BiasBackward(s.q(), {.n = n, .c = c, .dout_type = DType::kFp32,
                                           .dout = s.Put(d32), .dbias = b}));
      EXPECT_OK(s.Sync());
      return {s.Get<float>(a, c), s.Get<float>(b, c)};
    }, {1e-5, 1e-5});
  }
}

TEST_F(CudaBackendTest, EmbeddingForwardBackward) {
  const int64_t b = 2, t = 24, c = 48, vocab = 50, positions = 32;
  std::vector<int32_t> tokens(b * t);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7) % vocab);
  for (DType dt : HalfDTypes()) {
    const auto wte = HalfBits(dt, vocab * c, 1, 9), wpe = HalfBits(dt, positions * c, 1, 10);
    const auto dout = HalfBits(dt, b * t * c, 1, 11);
    Both(Name("embedding", dt), [&](Side& s) -> Outputs {
      uint16_t* out = s.Zeros<uint16_t>(b * t * c);
      float* dwte = s.Zeros<float>(vocab * c);
      float* dwpe = s.Zeros<float>(positions * c);
      const int32_t* tok = s.Put(tokens);
      EXPECT_OK(s.b().EmbeddingForward(s.q(), {.dtype = dt, .b = b, .t = t, .c = c,
                                               .vocab = vocab, .positions = positions,
                                               .tokens = tok, .wte = s.Put(wte),
                                               .wpe = s.Put(wpe), .out = out}));
      EXPECT_OK(s.b().EmbeddingBackward(s.q(), {.dtype = dt, .b = b, .t = t, .c = c,
                                                .vocab = vocab, .positions = positions,
                                                .tokens = tok, .dout = s.Put(dout),
                                                .dwte = dwte, .dwpe = dwpe}));
      EXPECT_OK(s.Sync());
      return {s.GetHalf(dt, out, b * t * c), s.Get<float>(dwte, vocab * c),
              s.Get<float>(dwpe, positions * c)};
    }, {0, 1e-5, 1e-5});
  }
}

TEST_F(CudaBackendTest, BadTokenIdIsReportedOnceBySynchronize) {
  if (self_check_) GTEST_SKIP() << "CUDA only";
  Side s(cuda_.get());
  const std::vector<int32_t> tokens = {1, 99};
  uint16_t* out = s.Zeros<uint16_t>(2 * 4);
  EXPECT_OK(s.b().EmbeddingForward(s.q(), {.b = 1, .t = 2, .c = 4, .vocab = 8,
                                           .tokens = s.Put(tokens),
                                           .wte = s.Put(Bf16Bits(32, 1, 1)), .out = out}));
  const absl::Status st = s.Sync();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("token id"), std::string::npos) << st;
  EXPECT_OK(s.Sync());  // reported once; the queue accepts work again
  EXPECT_OK(s.b().Zero(s.q(), {.dst = out, .bytes = 16}));
  EXPECT_OK(s.Sync());
  // Argument errors are returned at enqueue, as on the CPU.
  EXPECT_EQ(s.b().GeluForward(s.q(), {.n = 8, .inp = nullptr, .out = out}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaBackendTest, NormsForwardBackward) {
  for (DType dt : HalfDTypes()) {
    for (NormOp op : {NormOp::kLayerNorm, NormOp::kRmsNorm}) {
      const bool ln = op == NormOp::kLayerNorm;
      const int64_t n = 40, c = 200;
      const auto x = HalfBits(dt, n * c, 2, 12), w = HalfBits(dt, c, 1, 13),
                 bias = HalfBits(dt, c, 1, 14);
      const auto dout = HalfBits(dt, n * c, 1, 15);
      Both(Name(ln ? "layernorm" : "rmsnorm", dt), [&](Side& s) -> Outputs {
        uint16_t* out = s.Zeros<uint16_t>(n * c);
        float* mean = s.Zeros<float>(n);
        float* rstd = s.Zeros<float>(n);
        const uint16_t* inp = s.Put(x);
        const uint16_t* weight = s.Put(w);
        EXPECT_OK(s.b().NormForward(s.q(), {.dtype = dt, .op = op, .n = n, .c = c, .eps = 1e-5f,
                                            .inp = inp, .weight = weight,
                                            .bias = ln ? s.Put(bias) : nullptr, .out = out,
                                            .mean = ln ? mean : nullptr, .rstd = rstd}));
        float* dinp = s.Zeros<float>(n * c);
        uint16_t* dinp16 = s.Zeros<uint16_t>(n * c);
        float* dw = s.Zeros<float>(c);
        float* db = s.Zeros<float>(c);
        NormBackwardParams bp{.dtype = dt, .op = op, .n = n, .c = c, .dout = s.Put(dout),
                              .inp = inp, .weight = weight, .mean = ln ? mean : nullptr,
                              .rstd = rstd, .dinp_type = DType::kFp32, .dinp = dinp,
                              .dweight = dw, .dbias = ln ? db : nullptr};
        EXPECT_OK(s.b().NormBackward(s.q(), bp));
        // dinp in the op's own 16-bit type (the weights' gradients accumulate a second time).
        bp.dinp_type = dt;
        bp.dinp = dinp16;
        EXPECT_OK(s.b().NormBackward(s.q(), bp));
        EXPECT_OK(s.Sync());
        return {s.GetHalf(dt, out, n * c), s.Get<float>(rstd, n), s.Get<float>(dinp, n * c),
                s.GetHalf(dt, dinp16, n * c), s.Get<float>(dw, c), s.Get<float>(db, c)};
      }, {Tol(dt), 1e-4, 1e-4, Tol(dt), 1e-4, 1e-4});
    }
  }
}

TEST_F(CudaBackendTest, GeluSwiGlu) {
  const int64_t n = 5000;
  for (DType dt : HalfDTypes()) {
    const auto x = HalfBits(dt, n, 4, 16), g = HalfBits(dt, n, 4, 17),
               dout = HalfBits(dt, n, 1, 18);
    Both(Name("gelu/swiglu", dt), [&](Side& s) -> Outputs {
      uint16_t* y = s.Zeros<uint16_t>(n);
      uint16_t* dx = s.Zeros<uint16_t>(n);
      uint16_t* sw = s.Zeros<uint16_t>(n);
      uint16_t* dgate = s.Zeros<uint16_t>(n);
      uint16_t* dup = s.Zeros<uint16_t>(n);
      const uint16_t* xi = s.Put(x);
      const uint16_t* gi = s.Put(g);
      const uint16_t* di = s.Put(dout);
      EXPECT_OK(s.b().GeluForward(s.q(), {.dtype = dt, .n = n, .inp = xi, .out = y}));
      EXPECT_OK(
          s.b().GeluBackward(s.q(), {.dtype = dt, .n = n, .dout = di, .inp = xi, .dinp = dx}));
      EXPECT_OK(s.b().SwiGluForward(s.q(), {.dtype = dt, .n = n, .gate = gi, .up = xi,
                                            .out = sw}));
      EXPECT_OK(s.b().SwiGluBackward(s.q(), {.dtype = dt, .n = n, .dout = di, .gate = gi,
                                             .up = xi, .dgate = dgate, .dup = dup}));
      EXPECT_OK(s.Sync());
      return {s.GetHalf(dt, y, n), s.GetHalf(dt, dx, n), s.GetHalf(dt, sw, n),
              s.GetHalf(dt, dgate, n), s.GetHalf(dt, dup, n)};
    }, {Tol(dt), Tol(dt), Tol(dt), Tol(dt), Tol(dt)});
  }
}

TEST_F(CudaBackendTest, Rope) {
  const int64_t b = 2, t = 16, nh = 3, hd = 32, half = hd / 2;
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hd);
  for (DType dt : HalfDTypes()) {
    const auto x = HalfBits(dt, b * t * nh * hd, 2, 19), dout = HalfBits(dt, b * t * nh * hd, 1, 20);
    Both(Name("rope", dt), [&](Side& s) -> Outputs {
      float* cos = s.Zeros<float>(t * half);
      float* sin = s.Zeros<float>(t * half);
      uint16_t* y = s.Zeros<uint16_t>(b * t * nh * hd);
      uint16_t* dx = s.Zeros<uint16_t>(b * t * nh * hd);
      EXPECT_OK(s.b().RopeTables(s.q(), {.t = t, .half = half, .inv_freq = s.Put(inv_freq),
                                         .cos = cos, .sin = sin}));
      EXPECT_OK(s.b().RopeForward(s.q(), {.dtype = dt, .b = b, .t = t, .nh = nh, .head_dim = hd,
                                          .cos = cos, .sin = sin, .inp = s.Put(x), .out = y}));
      EXPECT_OK(s.b().RopeBackward(s.q(), {.dtype = dt, .b = b, .t = t, .nh = nh,
                                           .head_dim = hd, .cos = cos, .sin = sin,
                                           .dout = s.Put(dout), .dinp = dx}));
      EXPECT_OK(s.Sync());
      return {s.Get<float>(cos, t * half), s.Get<float>(sin, t * half),
              s.GetHalf(dt, y, b * t * nh * hd), s.GetHalf(dt, dx, b * t * nh * hd)};
    }, {3e-7, 3e-7, Tol(dt), Tol(dt)});
  }
}

TEST_F(CudaBackendTest, AttentionForwardBackward) {
  for (DType dt : HalfDTypes()) {
    for (int64_t hd : {64, 48}) {  // 64: the tiled kernel; 48: the reference path
      const int64_t b = 2, t = 40, h = 4, kv = 2;
      const AttentionShapeParams shape{.b = b, .t = t, .heads = h, .kv_heads = kv,
                                       .head_dim = hd};
      const auto q = HalfBits(dt, b * t * h * hd, 1, 21), k = HalfBits(dt, b * t * kv * hd, 1, 22),
                 v = HalfBits(dt, b * t * kv * hd, 1, 23),
                 dout = HalfBits(dt, b * t * h * hd, 1, 24);
      Both(Name("attention hd" + std::to_string(hd), dt), [&](Side& s) -> Outputs {
        uint16_t* out = s.Zeros<uint16_t>(b * t * h * hd);
        float* lse = s.Zeros<float>(b * h * t);
        const uint16_t* qi = s.Put(q);
        const uint16_t* ki = s.Put(k);
        const uint16_t* vi = s.Put(v);
        EXPECT_OK(s.b().AttentionForward(s.q(), {.dtype = dt, .shape = shape, .q = qi, .k = ki,
                                                 .v = vi, .out = out, .lse = lse}));
        uint16_t* dq = s.Zeros<uint16_t>(b * t * h * hd);
        uint16_t* dk = s.Zeros<uint16_t>(b * t * kv * hd);
        uint16_t* dv = s.Zeros<uint16_t>(b * t * kv * hd);
        EXPECT_OK(s.b().AttentionBackward(s.q(), {.dtype = dt, .shape = shape,
                                                  .dout = s.Put(dout), .q = qi, .k = ki, .v = vi,
                                                  .out = out, .lse = lse, .dq = dq, .dk = dk,
                                                  .dv = dv}));
        EXPECT_OK(s.Sync());
        return {s.GetHalf(dt, out, b * t * h * hd), s.Get<float>(lse, b * h * t),
                s.GetHalf(dt, dq, b * t * h * hd), s.GetHalf(dt, dk, b * t * kv * hd),
                s.GetHalf(dt, dv, b * t * kv * hd)};
      }, {Tol(dt), 1e-5, Tol(dt), Tol(dt), Tol(dt)});
    }
  }
}

// The KV-cache attention: a cache of 24 positions holding 21, three new queries at 18..20.
TEST_F(CudaBackendTest, CachedAttentionForward) {
  const int64_t b = 2, cap = 24, start = 18, t = 3, h = 4, kv = 2, hd = 64;
  const AttentionShapeParams shape{.b = b, .t = t, .heads = h, .kv_heads = kv, .head_dim = hd};
  for (DType dt : HalfDTypes()) {
    const auto q = HalfBits(dt, b * t * h * hd, 1, 41), k = HalfBits(dt, b * cap * kv * hd, 1, 42),
               v = HalfBits(dt, b * cap * kv * hd, 1, 43);
    Both(Name("cached attention", dt), [&](Side& s) -> Outputs {
      uint16_t* out = s.Zeros<uint16_t>(b * t * h * hd);
      float* lse = s.Zeros<float>(b * h * t);
      EXPECT_OK(s.b().CachedAttentionForward(
          s.q(), {.dtype = dt, .shape = shape, .start = start, .capacity = cap, .q = s.Put(q),
                  .k = s.Put(k), .v = s.Put(v), .out = out, .lse = lse}));
      EXPECT_OK(s.Sync());
      return {s.GetHalf(dt, out, b * t * h * hd), s.Get<float>(lse, b * h * t)};
    }, {Tol(dt), 1e-5});
  }
}

TEST_F(CudaBackendTest, CrossEntropy) {
  const int64_t n = 48, v = 1000;
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = i % 5 == 0 ? kIgnoreIndex : (i * 37) % v;
  for (DType dt : HalfDTypes()) {
    const auto logits = HalfBits(dt, n * v, 4, 25);
    Both(Name("cross_entropy", dt), [&](Side& s) -> Outputs {
      float* losses = s.Zeros<float>(n);
      float* lse = s.Zeros<float>(n);
      float* mean = s.Zeros<float>(1);
      uint16_t* dlogits = s.Zeros<uint16_t>(n * v);
      const uint16_t* li = s.Put(logits);
      const int32_t* ti = s.Put(targets);
      EXPECT_OK(s.b().CrossEntropyForward(s.q(), {.n = n, .v = v, .logits_type = dt,
                                                  .logits = li, .targets = ti, .losses = losses,
                                                  .lse = lse, .mean_loss = mean}));
      EXPECT_OK(s.b().CrossEntropyBackward(s.q(), {.n = n, .v = v, .logits_type = dt,
                                                   .logits = li, .lse = lse, .targets = ti,
                                                   .dloss = 1.0f, .dlogits = dlogits}));
      EXPECT_OK(s.Sync());
      return {s.Get<float>(losses, n), s.Get<float>(lse, n), s.Get<float>(mean, 1),
              s.GetHalf(dt, dlogits, n * v)};
    }, {1e-5, 1e-5, 1e-5, Tol(dt)});
  }
}

TEST_F(CudaBackendTest, AdamWIsBitwiseAndSumSquaresClose) {
  const int64_t n = 70001;
  const auto master = gpu_test::RandomFloats(n, -1, 1, 26);
  const auto m = gpu_test::RandomFloats(n, -0.01f, 0.01f, 27);
  const auto v = gpu_test::RandomFloats(n, 0, 1e-4f, 28);
  const auto g = gpu_test::RandomFloats(n, -0.5f, 0.5f, 29);
  for (DType dt : HalfDTypes()) {
    Both(Name("adamw", dt), [&](Side& s) -> Outputs {
      float* pm = s.Put(master);
      float* pmm = s.Put(m);
      float* pv = s.Put(v);
      uint16_t* out = s.Zeros<uint16_t>(n);
      EXPECT_OK(s.b().AdamW(s.q(), {.n = n, .step = 5, .lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95,
                                    .eps = 1e-8, .weight_decay = 0.1, .grad_scale = 0.7f,
                                    .master = pm, .m = pmm, .v = pv, .grad = s.Put(g),
                                    .bf16_out = out, .out_type = dt}));
      EXPECT_OK(s.Sync());
      return {s.Get<float>(pm, n), s.Get<float>(pmm, n), s.Get<float>(pv, n),
              s.GetHalf(dt, out, n)};
    }, {0, 0, 0, 0});
  }
  double got[2] = {0, 0};
  int i = 0;
  for (Backend* b : {static_cast<Backend*>(cpu_.get()), cuda_.get()}) {
    Side s(b);
    std::vector<double> start = {1.5};
    double* out = s.Put(start);
    EXPECT_OK(s.b().SumSquares(s.q(), {.n = n, .x = s.Put(g), .out = out}));
    got[i++] = s.Get<double>(out, 1)[0];
  }
  EXPECT_NEAR(got[1], got[0], 1e-12 * got[0]);
  // Chunk mode (resident's norm partials): 70001 elements in chunks of 16384 -> 5 sums.
  Both("sum_squares chunks", [&](Side& s) -> Outputs {
    double* parts = s.Zeros<double>(5);
    EXPECT_OK(s.b().SumSquares(s.q(), {.n = n, .x = s.Put(g), .out = parts, .chunk = 16384}));
    EXPECT_OK(s.Sync());
    const std::vector<double> d = s.Get<double>(parts, 5);
    return {std::vector<float>(d.begin(), d.end())};
  }, {1e-6});
}

TEST_F(CudaBackendTest, MemoryCapArenaReuseAndChunkedCopies) {
  if (self_check_) GTEST_SKIP() << "CUDA only";
  auto small = CreateCudaBackend(
      {.backend = {.capacity_bytes = 4 << 20, .copy_chunk_bytes = 4096}, .device = 0});
  ASSERT_TRUE(small.ok()) << small.status();
  Backend& b = **small;
  auto a = b.Allocate(3 << 20, "stage0.weights");
  ASSERT_TRUE(a.ok()) << a.status();
  auto refused = b.Allocate(2 << 20, "stage1.weights");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("stage1.weights"), std::string::npos);
  a->Reset();
  EXPECT_EQ(b.used_bytes(), 0u);
  auto again = b.Allocate(4 << 20, "whole");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(b.peak_bytes(), uint64_t{4} << 20);

  // A 1 MiB + 3 byte copy in 4 KiB chunks through a pinned host buffer, round trip, with an
  // event ordering the download queue behind the upload queue.
  const uint64_t bytes = (1 << 20) + 3;
  auto pinned = b.AllocateHost(bytes);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(b.pinned_host_bytes(), bytes);
  for (uint64_t i = 0; i < bytes; ++i) static_cast<uint8_t*>(pinned->data())[i] = i * 13 % 251;
  std::vector<uint8_t> back(bytes, 0);
  ASSERT_TRUE(b.RegisterHost(back.data(), bytes).ok());
  EXPECT_EQ(b.RegisterHost(back.data() + 8, 16).code(), absl::StatusCode::kAlreadyExists);
  auto up = *b.CreateQueue(QueueKind::kHostToDevice, 0);
  auto down = *b.CreateQueue(QueueKind::kDeviceToHost, 0);
  auto done = *b.CreateEvent();
  EXPECT_OK(b.CopyToDevice(*up, pinned->data(), *again, 0, bytes));
  EXPECT_OK(b.Record(*up, *done));
  EXPECT_OK(b.Wait(*down, *done));
  EXPECT_OK(b.CopyToHost(*down, *again, 0, back.data(), bytes));
  EXPECT_OK(b.Synchronize(*down));
  EXPECT_EQ(std::memcmp(back.data(), pinned->data(), bytes), 0);
  EXPECT_EQ(b.CopyToHost(*down, *again, (4 << 20) - 2, back.data(), 4).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_OK(b.UnregisterHost(back.data()));
  EXPECT_EQ(b.registered_host_bytes(), 0u);
}

TEST_F(CudaBackendTest, MissingDeviceIsAFailedPrecondition) {
  if (self_check_) GTEST_SKIP() << "CUDA only";
  auto none = CreateCudaBackend({.device = 1000});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition) << none.status();
}

}  // namespace
}  // namespace mobius::backend
