// worker/kernels/cuda/gemm.h (cuBLASLt) against a plain C++ reference in double (label `gpu`).
//
// Tolerances (relative to max|ref|): bf16 / fp16 C: HalfTol, 8e-3 / 2e-3 (the fp32 result rounded
// once, plus a possible neighbour from a different summation order). fp32 C from 16-bit inputs:
// products of two bf16 or two fp16 are exact in fp32, the K-term fp32 sum in cuBLAS's order
// differs from double by about sqrt(K) * 2^-24 * sum|a b| ~ 1e-5 of max|ref| at K = 256: 1e-4.
// fp32 inputs: the same, 1e-4 (CUBLAS_COMPUTE_32F: no TF32).
//
// half_accumulate (CUBLAS_COMPUTE_16F: the products summed in fp16, unit roundoff u = 2^-11)
// against the double reference, K = 256, 1024, 4096, inputs uniform in [-1, 1]:
//   - per element, the first-order worst case of any summation order, |C - ref| <=
//     (K + 1) u (|alpha| sum_k |a_ik b_kj| + |beta c0_ij|) + u |ref_ij| (gamma_K of the additions,
//     the final rounding);
//   - over the matrix, worst |C - ref| <= (2 + sqrt(K)) u max|ref| (8.8e-3 of max|ref| at K = 256,
//     3.2e-2 at K = 4096): with random-signed products the partial sums grow like sqrt(k), and the
//     rounding errors of K fp16 additions add up like a random walk, about u K / 7 ~
//     sqrt(K) u max|ref| / 9 per element and under 0.5 sqrt(K) u max|ref| for the worst of the
//     8192 elements even when every addition is rounded (tensor cores round once per 16-term
//     block: less); the final rounding of C adds u max|ref|. A sum accumulated in fp32 passes too:
//     the test bounds the error, and prints how many elements differ from the fp32-accumulate
//     result, which shows the mode is in effect.
#include "worker/kernels/cuda/gemm.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "test/gpu/gpu_test_util.h"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::ExpectClose;
using gpu_test::kBf16Tol;
using gpu_test::kF16Tol;
using gpu_test::RandomFloats;
using gpu_test::RandomHalf;

// Host operands as fp32 values (the exact values of the bf16 data).
struct Case {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int64_t batch = 1;
  bool broadcast_b = false;  // stride_b = 0
  bool bias = false;
};

// C_b = alpha op(A_b) op(B_b) + beta C_b (+ bias), row-major, packed (ld = row length).
std::vector<float> Reference(const Case& c, const std::vector<float>& a,
                             const std::vector<float>& b, const std::vector<float>& c0,
                             const std::vector<float>& bias) {
  std::vector<float> out(c0);
  const int64_t sa = c.m * c.k, sb = c.broadcast_b ? 0 : c.k * c.n, sc = c.m * c.n;
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double av = a[bi * sa + (c.ta ? p * c.m + i : i * c.k + p)];
          const double bv = b[bi * sb + (c.tb ? j * c.k + p : p * c.n + j)];
          acc += av * bv;
        }
        double r =
            c.alpha * acc + (c.beta == 0.0f ? 0.0 : c.beta * double{c0[bi * sc + i * c.n + j]});
        if (c.bias) r += bias[j];
        out[bi * sc + i * c.n + j] = static_cast<float>(r);
      }
    }
  }
  return out;
}

// sum_k |op(A)_ik op(B)_kj| per element of C (batch-major, as Reference), for the fp16
// accumulation bound.
std::vector<double> AbsProducts(const Case& c, const std::vector<float>& a,
                                const std::vector<float>& b) {
  std::vector<double> out(c.batch * c.m * c.n, 0.0);
  const int64_t sa = c.m * c.k, sb = c.broadcast_b ? 0 : c.k * c.n, sc = c.m * c.n;
  for (int64_t bi = 0; bi < c.batch; ++bi) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          acc += std::fabs(double{a[bi * sa + (c.ta ? p * c.m + i : i * c.k + p)]} *
                           b[bi * sb + (c.tb ? j * c.k + p : p * c.n + j)]);
        }
        out[bi * sc + i * c.n + j] = acc;
      }
    }
  }
  return out;
}

HalfType HalfOf(GemmType t) { return t == GemmType::kF16 ? HalfType::kF16 : HalfType::kBf16; }

GemmArgs Args(const Case& c, GemmType in, GemmType out, const void* a, const void* b, void* cp,
              const void* bias) {
  GemmArgs g;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.a_type = g.b_type = in;
  g.c_type = out;
  g.a = a;
  g.b = b;
  g.c = cp;
  g.lda = c.ta ? c.m : c.k;
  g.ldb = c.tb ? c.k : c.n;
  g.ldc = c.n;
  g.stride_a = c.m * c.k;
  g.stride_b = c.broadcast_b ? 0 : c.k * c.n;
  g.stride_c = c.m * c.n;
  g.batch = c.batch;
  g.bias = bias;
  return g;
}

class GemmCuda : public testing::Test {
 protected:
  void SetUp() override {
    MOBIUS_REQUIRE_GPU();
    MOBIUS_ASSERT_KERNEL_OK(CublasLtGemm::Create(CublasLtGemm::kDefaultWorkspaceBytes, &gemm_));
  }

  // 16-bit A and B of `in` (bf16 or fp16); C in `out_type` (`in` or fp32); bias (when the case
  // has one) of C's type.
  void RunHalf(const Case& c, GemmType in, GemmType out_type, double tol, const char* what) {
    SCOPED_TRACE(what);
    const HalfType ht = HalfOf(in);
    const int64_t na = c.batch * c.m * c.k, nb = (c.broadcast_b ? 1 : c.batch) * c.k * c.n,
                  nc = c.batch * c.m * c.n;
    const auto a = RandomHalf(ht, na, 1.0f, 1), b = RandomHalf(ht, nb, 1.0f, 2),
               c0 = RandomHalf(ht, nc, 1.0f, 3);
    const auto bias = RandomHalf(ht, c.n, 1.0f, 4);
    const auto ref = Reference(c, a.values, b.values, c0.values, bias.values);
    DeviceArray<uint16_t> d_a(a.bits), d_b(b.bits), d_bias16(bias.bits), d_c16(c0.bits);
    DeviceArray<float> d_bias32(bias.values), d_c32(c0.values);
    const bool half_out = out_type != GemmType::kFp32;
    void* cp = half_out ? static_cast<void*>(d_c16.get()) : static_cast<void*>(d_c32.get());
    const void* bp = !c.bias    ? nullptr
                     : half_out ? static_cast<const void*>(d_bias16.get())
                                : static_cast<const void*>(d_bias32.get());
    MOBIUS_ASSERT_KERNEL_OK(
        gemm_->Run(Args(c, in, out_type, d_a.get(), d_b.get(), cp, bp), nullptr));
    if (half_out) {
      ExpectClose(ht, d_c16.ToHost(), ref, tol, what);
    } else {
      ExpectClose(d_c32.ToHost(), ref, tol, what);
    }
  }
  void RunBf16(const Case& c, GemmType out_type, double tol, const char* what) {
    RunHalf(c, GemmType::kBf16, out_type, tol, what);
  }

  // fp16 A, B and C with half_accumulate against the double reference, with the two bounds of the
  // file comment; also run with fp32 accumulation to count the elements the mode changes.
  void RunHalfAccumulate(const Case& c) {
    SCOPED_TRACE(testing::Message() << "half_accumulate m=" << c.m << " n=" << c.n << " k=" << c.k
                                    << " batch=" << c.batch);
    const int64_t na = c.batch * c.m * c.k, nb = (c.broadcast_b ? 1 : c.batch) * c.k * c.n,
                  nc = c.batch * c.m * c.n;
    const auto a = RandomHalf(HalfType::kF16, na, 1.0f, 11),
               b = RandomHalf(HalfType::kF16, nb, 1.0f, 12),
               c0 = RandomHalf(HalfType::kF16, nc, 1.0f, 13);
    const auto ref = Reference(c, a.values, b.values, c0.values, {});
    const auto abs_products = AbsProducts(c, a.values, b.values);
    DeviceArray<uint16_t> d_a(a.bits), d_b(b.bits), d_c(c0.bits), d_c32acc(c0.bits);
    GemmArgs g = Args(c, GemmType::kF16, GemmType::kF16, d_a.get(), d_b.get(), d_c.get(), nullptr);
    g.half_accumulate = true;
    MOBIUS_ASSERT_KERNEL_OK(gemm_->Run(g, nullptr));
    g.half_accumulate = false;
    g.c = d_c32acc.get();
    MOBIUS_ASSERT_KERNEL_OK(gemm_->Run(g, nullptr));
    const auto got = d_c.ToHost(), got32 = d_c32acc.ToHost();
    const double u = std::ldexp(1.0, -11);
    ExpectClose(HalfType::kF16, got, ref, (2.0 + std::sqrt(static_cast<double>(c.k))) * u,
                "fp16 accumulate");
    int64_t differ = 0, over = 0;
    for (int64_t i = 0; i < nc; ++i) {
      differ += got[i] != got32[i];
      const double err = std::fabs(double{gpu_test::FromHalf(HalfType::kF16, got[i])} - ref[i]);
      const double bound =
          (c.k + 1) * u *
              (std::fabs(c.alpha) * abs_products[i] + std::fabs(c.beta * c0.values[i])) +
          u * std::fabs(double{ref[i]}) + 1e-30;
      if (!(err <= bound) && over++ < 5) {
        ADD_FAILURE() << "element " << i << ": |C - ref| " << err << " > worst-case bound "
                      << bound;
      }
    }
    std::printf("  %lld of %lld elements differ from the fp32-accumulate result\n",
                static_cast<long long>(differ), static_cast<long long>(nc));
  }

  std::unique_ptr<CublasLtGemm> gemm_;
};

TEST_F(GemmCuda, Bf16NoTranspose) {
  RunBf16({.m = 67, .n = 129, .k = 200, .ta = false, .tb = false, .alpha = 1, .beta = 0},
          GemmType::kBf16, kBf16Tol, "NN bf16 out");
}

TEST_F(GemmCuda, Bf16LinearLayerWithBetaIntoFp32) {
  RunBf16({.m = 64, .n = 96, .k = 256, .ta = false, .tb = true, .alpha = 0.5f, .beta = 1},
          GemmType::kFp32, 1e-4, "NT fp32 out, beta 1");
}

TEST_F(GemmCuda, Bf16BiasEpilogue) {
  RunBf16({.m = 48, .n = 80, .k = 64, .ta = false, .tb = true, .alpha = 1, .beta = 0, .bias = true},
          GemmType::kBf16, kBf16Tol, "NT bf16 out + bias");
  RunBf16({.m = 48, .n = 80, .k = 64, .ta = false, .tb = true, .alpha = 1, .beta = 0, .bias = true},
          GemmType::kFp32, 1e-4, "NT fp32 out + bias");
}

TEST_F(GemmCuda, Bf16TransposedABatched) {
  RunBf16({.m = 40, .n = 24, .k = 72, .ta = true, .tb = false, .alpha = 1, .beta = 0, .batch = 3},
          GemmType::kBf16, kBf16Tol, "TN batched");
  RunBf16({.m = 40,
           .n = 24,
           .k = 72,
           .ta = true,
           .tb = true,
           .alpha = 2,
           .beta = 0.5f,
           .batch = 2,
           .broadcast_b = true},
          GemmType::kFp32, 1e-4, "TT batched, shared B");
}

TEST_F(GemmCuda, Fp16WithFp32Accumulation) {
  RunHalf({.m = 67, .n = 129, .k = 200, .ta = false, .tb = false, .alpha = 1, .beta = 0},
          GemmType::kF16, GemmType::kF16, kF16Tol, "NN fp16 out");
  RunHalf({.m = 64, .n = 96, .k = 256, .ta = false, .tb = true, .alpha = 0.5f, .beta = 1},
          GemmType::kF16, GemmType::kFp32, 1e-4, "NT fp32 out, beta 1");
  RunHalf({.m = 48, .n = 80, .k = 64, .ta = false, .tb = true, .alpha = 1, .beta = 0, .bias = true},
          GemmType::kF16, GemmType::kF16, kF16Tol, "NT fp16 out + bias");
  RunHalf({.m = 40,
           .n = 24,
           .k = 72,
           .ta = true,
           .tb = true,
           .alpha = 2,
           .beta = 0.5f,
           .batch = 2,
           .broadcast_b = true},
          GemmType::kF16, GemmType::kF16, kF16Tol, "TT batched, shared B, fp16 out");
}

TEST_F(GemmCuda, Fp16HalfAccumulateWithinTheFp16Bound) {
  for (int64_t k : {256, 1024, 4096}) {
    RunHalfAccumulate({.m = 64, .n = 128, .k = k, .ta = false, .tb = true, .alpha = 1, .beta = 0});
  }
  // alpha, beta exact in fp16; transposed A, batched.
  RunHalfAccumulate(
      {.m = 48, .n = 40, .k = 512, .ta = true, .tb = false, .alpha = 0.5f, .beta = 1, .batch = 3});
}

TEST_F(GemmCuda, Fp32) {
  const Case c{.m = 33, .n = 17, .k = 65, .ta = false, .tb = true, .alpha = 1, .beta = 0};
  const auto a = RandomFloats(c.m * c.k, -1, 1, 5), b = RandomFloats(c.n * c.k, -1, 1, 6);
  const std::vector<float> c0(c.m * c.n, 0.0f);
  const auto ref = Reference(c, a, b, c0, {});
  DeviceArray<float> d_a(a), d_b(b), d_c(c0);
  MOBIUS_ASSERT_KERNEL_OK(gemm_->Run(
      Args(c, GemmType::kFp32, GemmType::kFp32, d_a.get(), d_b.get(), d_c.get(), nullptr),
      nullptr));
  ExpectClose(d_c.ToHost(), ref, 1e-4, "fp32 NT");
}

TEST_F(GemmCuda, KZeroScalesC) {
  const Case c{
      .m = 5, .n = 7, .k = 0, .ta = false, .tb = false, .alpha = 1, .beta = 0.5f, .bias = true};
  const auto c0 = RandomFloats(c.m * c.n, -1, 1, 7), bias = RandomFloats(c.n, -1, 1, 8);
  const auto ref = Reference(c, {}, {}, c0, bias);
  DeviceArray<float> d_c(c0), d_bias(bias);
  GemmArgs g = Args(c, GemmType::kFp32, GemmType::kFp32, nullptr, nullptr, d_c.get(), d_bias.get());
  MOBIUS_ASSERT_KERNEL_OK(gemm_->Run(g, nullptr));
  ExpectClose(d_c.ToHost(), ref, 1e-6, "k = 0");
}

TEST_F(GemmCuda, PlansAreCached) {
  const Case c{.m = 32, .n = 32, .k = 32, .ta = false, .tb = false, .alpha = 1, .beta = 0};
  DeviceArray<uint16_t> d_a(32 * 32, 0), d_b(32 * 32, 0), d_c(32 * 32, 0);
  const GemmArgs g =
      Args(c, GemmType::kBf16, GemmType::kBf16, d_a.get(), d_b.get(), d_c.get(), nullptr);
  MOBIUS_ASSERT_KERNEL_OK(gemm_->Run(g, nullptr));
  const size_t plans = gemm_->cached_plans();
  MOBIUS_ASSERT_KERNEL_OK(gemm_->Run(g, nullptr));
  EXPECT_EQ(gemm_->cached_plans(), plans);
}

TEST(GemmArgsCheck, RejectsBadArgumentsAndMixedTypes) {  // host only
  GemmArgs g;
  g.m = g.n = g.k = 4;
  int dummy = 0;
  g.a = g.b = g.c = &dummy;
  g.lda = g.ldb = g.ldc = 4;
  EXPECT_TRUE(CheckGemmArgs(g).ok());
  GemmArgs bad = g;
  bad.ldc = 3;
  EXPECT_EQ(CheckGemmArgs(bad).code(), KernelCode::kInvalidArgument);
  bad = g;
  bad.a = nullptr;
  EXPECT_EQ(CheckGemmArgs(bad).code(), KernelCode::kInvalidArgument);
  bad = g;
  bad.batch = 2;
  bad.stride_c = 8;
  EXPECT_EQ(CheckGemmArgs(bad).code(), KernelCode::kInvalidArgument);
  bad = g;
  bad.a_type = GemmType::kFp32;  // fp32 x bf16
  EXPECT_EQ(CheckGemmArgs(bad).code(), KernelCode::kUnimplemented);
  // fp16: fp16 x fp16 -> fp16 / fp32; no mixing of the two 16-bit types.
  GemmArgs h = g;
  h.a_type = h.b_type = h.c_type = GemmType::kF16;
  EXPECT_TRUE(CheckGemmArgs(h).ok());
  h.c_type = GemmType::kFp32;
  EXPECT_TRUE(CheckGemmArgs(h).ok());
  h.c_type = GemmType::kBf16;  // fp16 inputs into a bf16 C
  EXPECT_EQ(CheckGemmArgs(h).code(), KernelCode::kUnimplemented);
  bad = g;
  bad.b_type = GemmType::kF16;  // bf16 x fp16
  const KernelStatus mixed = CheckGemmArgs(bad);
  EXPECT_EQ(mixed.code(), KernelCode::kUnimplemented);
  EXPECT_NE(mixed.message().find("a=bf16 b=fp16"), std::string::npos) << mixed.ToString();
  // half_accumulate: fp16 everywhere, alpha and beta finite in fp16.
  h.c_type = GemmType::kF16;
  h.half_accumulate = true;
  EXPECT_TRUE(CheckGemmArgs(h).ok());
  h.c_type = GemmType::kFp32;
  EXPECT_EQ(CheckGemmArgs(h).code(), KernelCode::kUnimplemented);
  h.c_type = GemmType::kF16;
  h.alpha = 1e5f;
  EXPECT_EQ(CheckGemmArgs(h).code(), KernelCode::kInvalidArgument);
  h.alpha = 1.0f;
  h.beta = NAN;
  EXPECT_EQ(CheckGemmArgs(h).code(), KernelCode::kInvalidArgument);
  bad = g;  // bf16 with half_accumulate
  bad.half_accumulate = true;
  EXPECT_EQ(CheckGemmArgs(bad).code(), KernelCode::kUnimplemented);
}

}  // namespace
}  // namespace mobius::kernels::cuda
