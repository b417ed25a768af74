// CpuBackend::Gemm against a naive reference on the same bf16- or fp16-rounded inputs.
//
// Tolerance: both sides accumulate the same products (exact in fp32/double for 16-bit inputs), so
// only the summation order and the final rounding differ. The reference sums in double; the fp32
// result may differ by the standard bound gamma_k = k * 2^-24 (times 2 for safety) of
// |alpha| * sum|a||b| + |beta * c0|. A bf16 C adds one rounding: 2^-8 of |result| (half a bf16 ulp is
// 2^-9 relative). An fp16 C likewise 2^-11 of |result| (half an fp16 ulp is at most 2^-11
// relative) plus 2^-25 absolute (half the subnormal spacing, where fp16 rounds in absolute steps).
// The CPU backend accumulates in fp32 with or without half_accumulate (cpu_gemm.h), so the same
// bound holds there, and the bits are those of the product without it.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cpu/cpu_gemm.h"

namespace mobius::backend {
namespace {

using numeric::Bf16ToFp32;
using numeric::F16ToFp32;
using numeric::Fp32ToBf16;
using numeric::Fp32ToF16;

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  DType at = DType::kBf16, bt = DType::kBf16, ct = DType::kFp32;
  float alpha = 1.0f, beta = 0.0f;
  int64_t batch = 1;
  bool broadcast_b = false;  // stride_b = 0
  int64_t pad = 3;           // extra leading-dimension elements
};

// A batch of rows x cols matrices with leading dimension ld in device memory of one dtype; the
// values (rounded to that dtype) are kept on the host for the reference.
struct Operand {
  DeviceBuffer buffer;
  std::vector<float> values;
  int64_t ld = 0, stride = 0;
  DType type = DType::kFp32;

  float At(int64_t b, int64_t r, int64_t c) const { return values[b * stride + r * ld + c]; }
};

class CpuGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CpuBackend::Create({});
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
    auto queue = backend_->CreateQueue(QueueKind::kCompute, 0);
    ASSERT_TRUE(queue.ok());
    queue_ = std::move(*queue);
  }

  Operand Make(DType type, int64_t batches, int64_t rows, int64_t cols, int64_t pad, bool nan_fill) {
    Operand op;
    op.type = type;
    op.ld = cols + pad;
    op.stride = rows * op.ld + 5;
    const int64_t count = batches * op.stride;
    op.values.resize(count);
    auto buffer = backend_->Allocate(std::max<int64_t>(count, 1) * DTypeBytes(type), "operand");
    EXPECT_TRUE(buffer.ok());
    op.buffer = std::move(*buffer);
    std::normal_distribution<float> dist(0.f, 1.f);
    for (int64_t i = 0; i < count; ++i) {
      float v = nan_fill ? NAN : dist(rng_);
      if (type == DType::kBf16) {
        uint16_t bits = Fp32ToBf16(v);
        static_cast<uint16_t*>(op.buffer.data())[i] = bits;
        op.values[i] = Bf16ToFp32(bits);
      } else if (type == DType::kF16) {
        uint16_t bits = Fp32ToF16(v);
        static_cast<uint16_t*>(op.buffer.data())[i] = bits;
        op.values[i] = F16ToFp32(bits);
      } else {
        static_cast<float*>(op.buffer.data())[i] = v;
        op.values[i] = v;
      }
    }
    return op;
  }

  float Read(const Operand& op, int64_t index) const {
    const uint16_t bits = static_cast<const uint16_t*>(op.buffer.data())[index];
    switch (op.type) {
      case DType::kBf16: return Bf16ToFp32(bits);
      case DType::kF16: return F16ToFp32(bits);
      case DType::kFp32: break;
    }
    return static_cast<const float*>(op.buffer.data())[index];
  }

  void Check(const Case& c, bool nan_c = false, bool half_accumulate = false) {
    SCOPED_TRACE(testing::Message() << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta
                                    << " tb=" << c.tb << " a=" << DTypeName(c.at) << " b="
                                    << DTypeName(c.bt) << " c=" << DTypeName(c.ct) << " beta="
                                    << c.beta << " batch=" << c.batch);
    const int64_t b_batches = c.broadcast_b ? 1 : c.batch;
    Operand a = c.ta ? Make(c.at, c.batch, c.k, c.m, c.pad, false) : Make(c.at, c.batch, c.m, c.k, c.pad, false);
    Operand b = c.tb ? Make(c.bt, b_batches, c.n, c.k, c.pad, false) : Make(c.bt, b_batches, c.k, c.n, c.pad, false);
    Operand out = Make(c.ct, c.batch, c.m, c.n, c.pad, nan_c);
    GemmParams p;
    p.m = c.m, p.n = c.n, p.k = c.k, p.trans_a = c.ta, p.trans_b = c.tb;
    p.alpha = c.alpha, p.beta = c.beta, p.batch = c.batch;
    p.a_type = c.at, p.a = a.buffer.data(), p.lda = a.ld, p.stride_a = a.stride;
    p.b_type = c.bt, p.b = b.buffer.data(), p.ldb = b.ld, p.stride_b = c.broadcast_b ? 0 : b.stride;
    p.c_type = c.ct, p.c = out.buffer.data(), p.ldc = out.ld, p.stride_c = out.stride;
    p.half_accumulate = half_accumulate;
    ASSERT_TRUE(backend_->Gemm(*queue_, p).ok());
    ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
    double worst = 0;
    for (int64_t bt = 0; bt < c.batch; ++bt) {
      const int64_t bb = c.broadcast_b ? 0 : bt;
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double sum = 0, abs_sum = 0;
          for (int64_t l = 0; l < c.k; ++l) {
            double x = c.ta ? a.At(bt, l, i) : a.At(bt, i, l);
            double y = c.tb ? b.At(bb, j, l) : b.At(bb, l, j);
            sum += x * y;
            abs_sum += std::fabs(x * y);
          }
          const double c0 = c.beta == 0.0f ? 0.0 : out.At(bt, i, j);
          const double ref = c.alpha * sum + c.beta * c0;
          double tol = 2.0 * (c.k + 2) * std::ldexp(1.0, -24) *
                       (std::fabs(c.alpha) * abs_sum + std::fabs(c.beta * c0));
          if (c.ct == DType::kBf16) tol += std::ldexp(std::fabs(ref), -8);
          if (c.ct == DType::kF16) tol += std::ldexp(std::fabs(ref), -11) + 0x1p-25;
          const double got = Read(out, bt * out.stride + i * out.ld + j);
          ASSERT_NEAR(got, ref, tol + 1e-30) << "at batch " << bt << " [" << i << "," << j << "]";
          worst = std::max(worst, std::fabs(got - ref));
        }
      }
    }
    // Padding after each row is untouched (compared as bits: it may be NaN).
    if (c.m > 0 && c.n > 0 && c.pad > 0) {
      const float pad_value = Read(out, c.n);
      EXPECT_EQ(std::memcmp(&pad_value, &out.values[c.n], sizeof(float)), 0);
    }
  }

  std::mt19937 rng_{123};
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Queue> queue_;
};

TEST_F(CpuGemmTest, AllTransposesOddSizesBf16Inputs) {
  for (int64_t m : {1, 7, 33}) {
    for (int64_t n : {1, 7, 33}) {
      for (int64_t k : {1, 7, 33}) {
        for (bool ta : {false, true}) {
          for (bool tb : {false, true}) Check({m, n, k, ta, tb});
        }
      }
    }
  }
}

TEST_F(CpuGemmTest, Fp32AndMixedInputs) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Check({33, 7, 65, ta, tb, DType::kFp32, DType::kFp32});
      Check({7, 33, 17, ta, tb, DType::kBf16, DType::kFp32});
      Check({7, 33, 17, ta, tb, DType::kFp32, DType::kBf16});
    }
  }
}

TEST_F(CpuGemmTest, BetaAccumulatesAndAlphaScales) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Check({33, 7, 33, ta, tb, DType::kBf16, DType::kBf16, DType::kFp32, 0.5f, 1.0f});
      Check({7, 33, 7, ta, tb, DType::kBf16, DType::kBf16, DType::kFp32, -2.0f, 0.25f});
    }
  }
}

TEST_F(CpuGemmTest, BetaZeroDoesNotReadC) {
  Check({7, 33, 33, false, true}, /*nan_c=*/true);
  Check({7, 33, 33, true, false, DType::kBf16, DType::kBf16, DType::kBf16}, /*nan_c=*/true);
}

TEST_F(CpuGemmTest, Bf16Output) {
  for (bool tb : {false, true}) {
    Check({33, 33, 64, false, tb, DType::kBf16, DType::kBf16, DType::kBf16});
    Check({7, 1, 33, true, tb, DType::kBf16, DType::kBf16, DType::kBf16, 1.0f, 1.0f});
  }
}

// fp16 operands and C (training.precision fp16), alone and mixed with bf16 / fp32, with beta.
TEST_F(CpuGemmTest, F16InputsAndOutputs) {
  constexpr DType kF16 = DType::kF16, kBf16 = DType::kBf16, kFp32 = DType::kFp32;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Check({33, 7, 65, ta, tb, kF16, kF16, kF16});
      Check({7, 33, 17, ta, tb, kF16, kF16, kFp32});
      Check({7, 33, 17, ta, tb, kF16, kFp32, kF16, 0.5f, 1.0f});
      Check({33, 7, 17, ta, tb, kFp32, kF16, kBf16, -2.0f, 0.25f});
      Check({7, 33, 33, ta, tb, kBf16, kF16, kF16, 1.0f, 0.5f});
    }
  }
  Check({7, 33, 33, false, true, kF16, kF16, kF16}, /*nan_c=*/true);  // beta 0: C unread
  Check({600, 96, 300, false, true, kF16, kF16, kF16, 1.0f, 0.5f});   // cut into pieces
  Case batched{7, 33, 17, false, true, kF16, kF16, kF16, 1.0f, 0.5f, 3};
  batched.broadcast_b = true;
  Check(batched);
}

// half_accumulate (fp16 A, B, C) is accepted; the CPU backend sums in fp32 and rounds once, so
// the result is within the same tolerance and bit for bit the product without the flag.
TEST_F(CpuGemmTest, HalfAccumulateIsFp32AccumulationRoundedOnce) {
  constexpr DType kF16 = DType::kF16;
  for (bool tb : {false, true}) {
    Check({33, 7, 65, false, tb, kF16, kF16, kF16, 1.0f, 0.5f}, false, /*half_accumulate=*/true);
  }
  const int64_t m = 40, n = 24, k = 300;
  Operand a = Make(kF16, 1, m, k, 0, false), b = Make(kF16, 1, n, k, 0, false);
  Operand c0 = Make(kF16, 1, m, n, 0, false);
  std::vector<std::vector<uint16_t>> outs;
  for (bool half_accumulate : {false, true}) {
    const auto* bits = static_cast<const uint16_t*>(c0.buffer.data());
    std::vector<uint16_t> out(bits, bits + m * n);
    GemmParams p;
    p.m = m, p.n = n, p.k = k, p.trans_b = true, p.beta = 0.5f;
    p.a_type = p.b_type = p.c_type = kF16;
    p.a = a.buffer.data(), p.lda = k;
    p.b = b.buffer.data(), p.ldb = k;
    p.c = out.data(), p.ldc = n;  // CPU backend: host memory is device memory
    p.half_accumulate = half_accumulate;
    ASSERT_TRUE(backend_->Gemm(*queue_, p).ok());
    ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
    outs.push_back(std::move(out));
  }
  EXPECT_EQ(outs[0], outs[1]);
  // Refused unless A, B and C are all fp16 (gemm_params.h).
  GemmParams bad;
  bad.m = bad.n = bad.k = 4;
  bad.a_type = bad.b_type = kF16;
  bad.c_type = DType::kFp32;
  bad.a = bad.b = a.buffer.data(), bad.lda = bad.ldb = 4;
  bad.c = c0.buffer.data(), bad.ldc = 4;
  bad.half_accumulate = true;
  EXPECT_EQ(backend_->Gemm(*queue_, bad).code(), absl::StatusCode::kInvalidArgument);
}

// An fp16 C beyond 65504 is +-inf (the loss scaler of an fp16 job looks for it); fp32 C is not.
TEST_F(CpuGemmTest, F16OutputOverflowsToInf) {
  const int64_t m = 2, n = 3, k = 256;
  std::vector<uint16_t> a(m * k, Fp32ToF16(1.0f)), b(k * n, Fp32ToF16(300.0f));  // sums 76800
  for (int64_t l = 0; l < k; ++l) a[k + l] = Fp32ToF16(-0.5f);                   // row 1: -38400
  std::vector<uint16_t> c(m * n, 0);
  std::vector<float> c32(m * n, 0.0f);
  GemmParams p;
  p.m = m, p.n = n, p.k = k;
  p.a_type = p.b_type = p.c_type = DType::kF16;
  p.a = a.data(), p.lda = k, p.b = b.data(), p.ldb = n, p.c = c.data(), p.ldc = n;
  ASSERT_TRUE(backend_->Gemm(*queue_, p).ok());
  p.c_type = DType::kFp32, p.c = c32.data();
  ASSERT_TRUE(backend_->Gemm(*queue_, p).ok());
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(F16ToFp32(c[j]), INFINITY) << j;
    EXPECT_EQ(F16ToFp32(c[n + j]), -38400.0f) << j;  // in range: 38400 is an fp16 value
    EXPECT_EQ(c32[j], 76800.0f) << j;
  }
}

TEST_F(CpuGemmTest, BatchedWithStridesAndBroadcastWeight) {
  Check({7, 33, 17, false, false, DType::kBf16, DType::kBf16, DType::kFp32, 1.0f, 0.0f, 4});
  Check({33, 7, 7, true, true, DType::kBf16, DType::kBf16, DType::kBf16, 1.0f, 0.5f, 3});
  Case shared{16, 24, 32, false, true};  // x W^T with one W for every batch
  shared.batch = 5;
  shared.broadcast_b = true;
  Check(shared);
}

TEST_F(CpuGemmTest, TransformerShapeAgainstReference) {
  Check({64, 96, 768, false, true, DType::kBf16, DType::kBf16, DType::kFp32, 1.0f, 0.0f, 1, false, 0});
}

// Shapes that RunCpuGemm cuts into pieces: by rows of C, and by columns.
TEST_F(CpuGemmTest, PiecewiseShapesAgainstReference) {
  ASSERT_GT(CpuGemmPieces(600, 96, 300), 1);
  ASSERT_GT(CpuGemmPieces(80, 560, 300), 1);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Check({600, 96, 300, ta, tb});
      Check({80, 560, 300, ta, tb, DType::kBf16, DType::kBf16, DType::kBf16, 1.0f, 0.5f});
    }
  }
}

TEST_F(CpuGemmTest, EmptyDimensions) {
  Check({0, 7, 7, false, false});
  Check({7, 0, 7, false, false});
  Check({7, 7, 0, false, false, DType::kBf16, DType::kBf16, DType::kFp32, 1.0f, 0.5f});  // C = beta C
}

// Two compute queues run GEMMs at the same time (OpenBLAS called from two threads at once).
TEST_F(CpuGemmTest, ConcurrentQueuesGiveTheSameResult) {
  constexpr int64_t kM = 48, kN = 40, kK = 96;
  Operand a = Make(DType::kBf16, 1, kM, kK, 0, false);
  Operand b = Make(DType::kBf16, 1, kK, kN, 0, false);
  auto second = backend_->CreateQueue(QueueKind::kCompute, 0);
  ASSERT_TRUE(second.ok());
  std::vector<std::vector<float>> outs(16, std::vector<float>(kM * kN));
  for (size_t i = 0; i < outs.size(); ++i) {
    GemmParams p;
    p.m = kM, p.n = kN, p.k = kK;
    p.a_type = p.b_type = DType::kBf16;
    p.a = a.buffer.data(), p.lda = kK;
    p.b = b.buffer.data(), p.ldb = kN;
    p.c = outs[i].data(), p.ldc = kN;  // CPU backend: host memory is device memory
    ASSERT_TRUE(backend_->Gemm(i % 2 ? **second : *queue_, p).ok());
  }
  ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
  ASSERT_TRUE(backend_->Synchronize(**second).ok());
  for (const auto& out : outs) EXPECT_EQ(out, outs[0]);
}

// The pieces depend on the shape only: 1, 2 and 3 op threads give the same bits.
TEST_F(CpuGemmTest, SameBitsForOneTwoAndThreeThreads) {
  for (bool by_rows : {true, false}) {
    const int64_t m = by_rows ? 600 : 96, n = by_rows ? 200 : 560, k = 300;
    ASSERT_GT(CpuGemmPieces(m, n, k), 1);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message() << "m=" << m << " ta=" << ta << " tb=" << tb);
        Operand a = ta ? Make(DType::kBf16, 1, k, m, 0, false) : Make(DType::kBf16, 1, m, k, 0, false);
        Operand b = tb ? Make(DType::kBf16, 1, n, k, 0, false) : Make(DType::kBf16, 1, k, n, 0, false);
        Operand c0 = Make(DType::kBf16, 1, m, n, 0, false);
        std::vector<std::vector<uint16_t>> outs;
        for (int threads : {1, 2, 3}) {
          auto backend = CpuBackend::Create({.op_threads = threads});
          ASSERT_TRUE(backend.ok());
          auto queue = (*backend)->CreateQueue(QueueKind::kCompute, 0);
          ASSERT_TRUE(queue.ok());
          const auto* bits = static_cast<const uint16_t*>(c0.buffer.data());
          std::vector<uint16_t> out(bits, bits + m * n);
          GemmParams p;
          p.m = m, p.n = n, p.k = k, p.trans_a = ta, p.trans_b = tb, p.beta = 0.5f;
          p.a_type = p.b_type = p.c_type = DType::kBf16;
          p.a = a.buffer.data(), p.lda = a.ld;
          p.b = b.buffer.data(), p.ldb = b.ld;
          p.c = out.data(), p.ldc = n;  // CPU backend: host memory is device memory
          ASSERT_TRUE((*backend)->Gemm(**queue, p).ok());
          ASSERT_TRUE((*backend)->Synchronize(**queue).ok());
          outs.push_back(std::move(out));
        }
        EXPECT_EQ(outs[1], outs[0]);
        EXPECT_EQ(outs[2], outs[0]);
      }
    }
  }
}

// A 16-bit operand whose fp32 copy would exceed 16 MB is converted piece by piece (cpu_gemm.cc):
// the bits of C are those of the same product with that operand given in fp32 (converted whole,
// no cutting), for a weight as B (both layouts) and as A, batched with strides, 16-bit C with beta;
// bf16 and fp16 weights.
TEST_F(CpuGemmTest, LargeBf16OperandIsConvertedInPiecesWithTheSameBits) {
  struct Shape {
    int64_t m, n, k;
    bool ta, tb, big_b;
    int64_t batch;
    DType ct;
    DType big_type = DType::kBf16;  // the format of the large operand
  };
  for (const Shape& sh : {Shape{40, 9000, 1024, false, true, true, 1, DType::kFp32},
                          Shape{40, 9000, 1024, false, false, true, 2, DType::kBf16},
                          Shape{9000, 24, 1024, true, false, false, 1, DType::kFp32},
                          Shape{9000, 24, 1024, false, true, false, 1, DType::kBf16},
                          Shape{40, 9000, 1024, false, true, true, 1, DType::kF16, DType::kF16},
                          Shape{9000, 24, 1024, true, false, false, 1, DType::kF16,
                                DType::kF16}}) {
    SCOPED_TRACE(testing::Message() << "m=" << sh.m << " n=" << sh.n << " ta=" << sh.ta
                                    << " tb=" << sh.tb << " batch=" << sh.batch);
    const int64_t br = sh.tb ? sh.n : sh.k, bc = sh.tb ? sh.k : sh.n;
    const int64_t ar = sh.ta ? sh.k : sh.m, ac = sh.ta ? sh.m : sh.k;
    Operand a = Make(sh.big_b ? DType::kFp32 : sh.big_type, sh.batch, ar, ac, 1, false);
    Operand b = Make(sh.big_b ? sh.big_type : DType::kFp32, sh.batch, br, bc, 1, false);
    const Operand& big = sh.big_b ? b : a;
    ASSERT_GT(4 * (sh.big_b ? sh.n : sh.m) * sh.k, int64_t{16} << 20);
    std::vector<float> big32(big.values);  // the 16-bit values, exactly, as fp32
    Operand c0 = Make(sh.ct, sh.batch, sh.m, sh.n, 0, false);
    const size_t c_bytes = c0.values.size() * DTypeBytes(sh.ct);
    std::vector<std::vector<char>> outs;
    for (bool as_fp32 : {false, true}) {
      std::vector<char> out(static_cast<const char*>(c0.buffer.data()),
                            static_cast<const char*>(c0.buffer.data()) + c_bytes);
      GemmParams p;
      p.m = sh.m, p.n = sh.n, p.k = sh.k, p.trans_a = sh.ta, p.trans_b = sh.tb;
      p.beta = IsHalf(sh.ct) ? 0.5f : 0.0f, p.batch = sh.batch;
      p.a_type = a.type, p.a = a.buffer.data(), p.lda = a.ld, p.stride_a = a.stride;
      p.b_type = b.type, p.b = b.buffer.data(), p.ldb = b.ld, p.stride_b = b.stride;
      if (as_fp32) {
        (sh.big_b ? p.b_type : p.a_type) = DType::kFp32;
        (sh.big_b ? p.b : p.a) = big32.data();
      }
      p.c_type = sh.ct, p.c = out.data(), p.ldc = sh.n, p.stride_c = c0.stride;
      ASSERT_TRUE(backend_->Gemm(*queue_, p).ok());
      ASSERT_TRUE(backend_->Synchronize(*queue_).ok());
      outs.push_back(std::move(out));
    }
    EXPECT_TRUE(outs[0] == outs[1]);
  }
}

TEST_F(CpuGemmTest, InvalidArgumentsAreRejectedAtEnqueue) {
  Operand a = Make(DType::kBf16, 1, 4, 4, 0, false);
  GemmParams p;
  p.m = p.n = p.k = 4;
  p.a_type = p.b_type = DType::kBf16;
  p.a = p.b = a.buffer.data();
  p.c = a.buffer.data();
  p.lda = 4, p.ldb = 3, p.ldc = 4;
  absl::Status s = backend_->Gemm(*queue_, p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), testing::HasSubstr("ldb = 3"));
  p.ldb = 4;
  p.batch = 2;
  p.stride_c = 4;
  EXPECT_THAT(backend_->Gemm(*queue_, p).message(), testing::HasSubstr("stride_c"));
  p.batch = 0;
  EXPECT_EQ(backend_->Gemm(*queue_, p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend_->Synchronize(*queue_).ok());
}

}  // namespace
}  // namespace mobius::backend
