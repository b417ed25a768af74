// CpuBackend's ops in fp16 (training.precision fp16): every op with `dtype` kF16 (or an fp16 type
// field) runs the fp16 kernel overload, bit for bit what worker/kernels/cpu computes for fp16
// (whose own tests hold it to the fp32 reference, test/worker/kernels/); Cast converts between
// every pair of fp32, bf16 and fp16 as common/numeric does; AdamW with out_type kF16 writes
// Fp32ToF16 of the new master weights; a dtype that is not a 16-bit format is refused at enqueue.
// CPU backend: host memory is device memory, so the buffers here are plain vectors.
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/bias.h"
#include "worker/kernels/cpu/cross_entropy.h"
#include "worker/kernels/cpu/dropout.h"
#include "worker/kernels/cpu/embedding.h"
#include "worker/kernels/cpu/gelu.h"
#include "worker/kernels/cpu/layernorm.h"
#include "worker/kernels/cpu/residual.h"
#include "worker/kernels/cpu/rmsnorm.h"
#include "worker/kernels/cpu/rope.h"
#include "worker/kernels/cpu/storage.h"
#include "worker/kernels/cpu/swiglu.h"
#include "worker/optim/adamw.h"

namespace mobius::backend {
namespace {

namespace k = ::mobius::kernels::cpu;
using k::F16;

class CpuOpsF16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = *CpuBackend::Create({.op_threads = 2});
    queue_ = *backend_->CreateQueue(QueueKind::kCompute, 0);
  }

  std::vector<F16> Random(int64_t n, float stddev, float mean = 0.0f) {
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<F16> out(n);
    for (F16& x : out) x.bits = numeric::Fp32ToF16(dist(rng_));
    return out;
  }
  std::vector<float> RandomF32(int64_t n, float stddev) {
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> out(n);
    for (float& x : out) x = dist(rng_);
    return out;
  }

  void Sync() { ASSERT_TRUE(backend_->Synchronize(*queue_).ok()); }

  std::mt19937 rng_{11};
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Queue> queue_;
  k::ThreadPool pool_{2};  // the kernels' side of each comparison
};

// Rows of 70 x 96: several vectors and a tail per row, more than one parallel piece.
constexpr int64_t kN = 70, kC = 96, kSize = kN * kC;

TEST_F(CpuOpsF16Test, ElementwiseOpsRunTheFp16Kernels) {
  const auto a = Random(kSize, 2.0f), b = Random(kSize, 1.0f), dy = Random(kSize, 1.0f);
  const auto d0 = Random(kSize, 0.1f), d1 = Random(kSize, 0.1f), bias = Random(kC, 1.0f);
  std::vector<F16> got(kSize), want(kSize), got2 = d1, want2 = d1;
  auto run = [&](const absl::Status& enqueued) {
    ASSERT_TRUE(enqueued.ok()) << enqueued;
    Sync();
  };

  run(backend_->GeluForward(*queue_, {.dtype = DType::kF16, .n = kSize, .inp = a.data(),
                                      .out = got.data()}));
  k::gelu_fwd(want.data(), a.data(), kSize, &pool_);
  EXPECT_EQ(got, want) << "gelu";
  got = want = d0;
  run(backend_->GeluBackward(*queue_, {.dtype = DType::kF16, .n = kSize, .dout = dy.data(),
                                       .inp = a.data(), .dinp = got.data()}));
  k::gelu_bwd(want.data(), dy.data(), a.data(), kSize, &pool_);
  EXPECT_EQ(got, want) << "gelu_backward";

  run(backend_->SwiGluForward(*queue_, {.dtype = DType::kF16, .n = kSize, .gate = a.data(),
                                        .up = b.data(), .out = got.data()}));
  k::swiglu_fwd(want.data(), a.data(), b.data(), kSize, &pool_);
  EXPECT_EQ(got, want) << "swiglu";
  got = want = d0;
  run(backend_->SwiGluBackward(*queue_, {.dtype = DType::kF16, .n = kSize, .dout = dy.data(),
                                         .gate = a.data(), .up = b.data(), .dgate = got.data(),
                                         .dup = got2.data()}));
  k::swiglu_bwd(want.data(), want2.data(), dy.data(), a.data(), b.data(), kSize, &pool_);
  EXPECT_EQ(got, want) << "swiglu_backward dgate";
  EXPECT_EQ(got2, want2) << "swiglu_backward dup";

  run(backend_->ResidualAdd(*queue_, {.dtype = DType::kF16, .n = kSize, .a = a.data(),
                                      .b = b.data(), .out = got.data()}));
  k::residual_fwd(want.data(), a.data(), b.data(), kSize, &pool_);
  EXPECT_EQ(got, want) << "residual";

  run(backend_->BiasAdd(*queue_, {.dtype = DType::kF16, .n = kN, .c = kC, .inp = a.data(),
                                  .bias = bias.data(), .out = got.data()}));
  k::bias_add_fwd(want.data(), a.data(), bias.data(), kN, kC, &pool_);
  EXPECT_EQ(got, want) << "bias_add";
  std::vector<float> dbias(kC, 0.5f), want_dbias(kC, 0.5f);
  run(backend_->BiasBackward(*queue_, {.n = kN, .c = kC, .dout_type = DType::kF16,
                                       .dout = dy.data(), .dbias = dbias.data()}));
  k::bias_bwd(want_dbias.data(), dy.data(), kN, kC, &pool_);
  EXPECT_EQ(dbias, want_dbias) << "bias_backward";

  std::vector<float> drop(kSize), want_drop(kSize);
  run(backend_->Dropout(*queue_, {.n = kN, .c = kC, .inp_type = DType::kF16, .inp = a.data(),
                                  .out = drop.data(), .p = 0.25f, .key = 99, .row_offset = 3}));
  k::dropout(want_drop.data(), a.data(), kN, kC, 0.25f, 99, 3, false, &pool_);
  EXPECT_EQ(drop, want_drop) << "dropout";
}

TEST_F(CpuOpsF16Test, EmbeddingNormRopeRunTheFp16Kernels) {
  const int64_t vocab = 11, t = kN / 2;
  std::vector<int32_t> tokens(kN);
  for (int64_t i = 0; i < kN; ++i) tokens[i] = static_cast<int32_t>((i * 7) % vocab);
  const auto wte = Random(vocab * kC, 1.0f), wpe = Random(t * kC, 1.0f), dy = Random(kSize, 1.0f);
  std::vector<F16> got(kSize), want(kSize);
  ASSERT_TRUE(backend_->EmbeddingForward(*queue_, {.dtype = DType::kF16, .b = 2, .t = t, .c = kC,
                                                   .vocab = vocab, .positions = t,
                                                   .tokens = tokens.data(), .wte = wte.data(),
                                                   .wpe = wpe.data(), .out = got.data()})
                  .ok());
  Sync();
  k::embedding_fwd(want.data(), tokens.data(), wte.data(), wpe.data(), 2, t, kC, &pool_);
  EXPECT_EQ(got, want) << "embedding";
  std::vector<float> dwte(vocab * kC, 0.0f), dwpe(t * kC, 0.0f), want_dwte = dwte,
                                                                   want_dwpe = dwpe;
  ASSERT_TRUE(backend_->EmbeddingBackward(*queue_, {.dtype = DType::kF16, .b = 2, .t = t,
                                                    .c = kC, .vocab = vocab, .positions = t,
                                                    .tokens = tokens.data(), .dout = dy.data(),
                                                    .dwte = dwte.data(), .dwpe = dwpe.data()})
                  .ok());
  Sync();
  k::embedding_bwd(want_dwte.data(), want_dwpe.data(), dy.data(), tokens.data(), 2, t, kC,
                   &pool_);
  EXPECT_EQ(dwte, want_dwte) << "embedding_backward dwte";
  EXPECT_EQ(dwpe, want_dwpe) << "embedding_backward dwpe";

  const auto x = Random(kSize, 1.5f, 0.7f), w = Random(kC, 0.5f, 1.0f), b = Random(kC, 0.5f);
  const auto d0 = Random(kSize, 0.1f);
  for (NormOp op : {NormOp::kLayerNorm, NormOp::kRmsNorm}) {
    const bool ln = op == NormOp::kLayerNorm;
    SCOPED_TRACE(ln ? "layernorm" : "rmsnorm");
    std::vector<float> mean(kN), rstd(kN), want_mean(kN), want_rstd(kN);
    ASSERT_TRUE(backend_->NormForward(*queue_, {.dtype = DType::kF16, .op = op, .n = kN, .c = kC,
                                                .inp = x.data(), .weight = w.data(),
                                                .bias = ln ? b.data() : nullptr,
                                                .out = got.data(),
                                                .mean = ln ? mean.data() : nullptr,
                                                .rstd = rstd.data()})
                    .ok());
    Sync();
    if (ln) {
      k::layernorm_fwd(want.data(), want_mean.data(), want_rstd.data(), x.data(), w.data(),
                       b.data(), kN, kC, 1e-5f, &pool_);
    } else {
      k::rmsnorm_fwd(want.data(), want_rstd.data(), x.data(), w.data(), kN, kC, 1e-5f, &pool_);
    }
    EXPECT_EQ(got, want) << "forward";
    EXPECT_EQ(rstd, want_rstd) << "forward rstd";
    if (ln) EXPECT_EQ(mean, want_mean) << "forward mean";
    // dinp in fp16 (the op's dtype) and in fp32.
    std::vector<F16> dinp = d0, want_dinp = d0;
    std::vector<float> dinp32(kSize, 0.25f), want_dinp32(kSize, 0.25f);
    std::vector<float> dw(kC, 0.0f), db(kC, 0.0f), want_dw(kC, 0.0f), want_db(kC, 0.0f);
    for (DType dinp_type : {DType::kF16, DType::kFp32}) {
      void* d = dinp_type == DType::kF16 ? static_cast<void*>(dinp.data()) : dinp32.data();
      ASSERT_TRUE(backend_->NormBackward(*queue_, {.dtype = DType::kF16, .op = op, .n = kN,
                                                   .c = kC, .dout = dy.data(), .inp = x.data(),
                                                   .weight = w.data(),
                                                   .mean = ln ? mean.data() : nullptr,
                                                   .rstd = rstd.data(), .dinp_type = dinp_type,
                                                   .dinp = d, .dweight = dw.data(),
                                                   .dbias = ln ? db.data() : nullptr})
                      .ok());
      Sync();
    }
    if (ln) {
      k::layernorm_bwd(want_dinp.data(), want_dw.data(), want_db.data(), dy.data(), x.data(),
                       w.data(), mean.data(), rstd.data(), kN, kC, &pool_);
      k::layernorm_bwd(want_dinp32.data(), want_dw.data(), want_db.data(), dy.data(), x.data(),
                       w.data(), mean.data(), rstd.data(), kN, kC, &pool_);
    } else {
      k::rmsnorm_bwd(want_dinp.data(), want_dw.data(), dy.data(), x.data(), w.data(),
                     rstd.data(), kN, kC, &pool_);
      k::rmsnorm_bwd(want_dinp32.data(), want_dw.data(), dy.data(), x.data(), w.data(),
                     rstd.data(), kN, kC, &pool_);
    }
    EXPECT_EQ(dinp, want_dinp) << "backward dinp fp16";
    EXPECT_EQ(dinp32, want_dinp32) << "backward dinp fp32";
    EXPECT_EQ(dw, want_dw) << "backward dweight";
    EXPECT_EQ(db, want_db) << "backward dbias";
  }

  // RoPE over [1, kN, 3, 32] (kC = 3 x 32).
  const int64_t nh = 3, hd = 32;
  std::vector<float> inv_freq(hd / 2), cos(kN * hd / 2), sin(kN * hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hd);
  k::rope_tables(cos.data(), sin.data(), inv_freq.data(), kN, hd / 2);
  ASSERT_TRUE(backend_->RopeForward(*queue_, {.dtype = DType::kF16, .b = 1, .t = kN, .nh = nh,
                                              .head_dim = hd, .cos = cos.data(),
                                              .sin = sin.data(), .inp = x.data(),
                                              .out = got.data()})
                  .ok());
  Sync();
  k::rope_fwd(want.data(), x.data(), cos.data(), sin.data(), 1, kN, nh, hd, &pool_);
  EXPECT_EQ(got, want) << "rope";
  got = want = d0;
  ASSERT_TRUE(backend_->RopeBackward(*queue_, {.dtype = DType::kF16, .b = 1, .t = kN, .nh = nh,
                                               .head_dim = hd, .cos = cos.data(),
                                               .sin = sin.data(), .dout = dy.data(),
                                               .dinp = got.data()})
                  .ok());
  Sync();
  k::rope_bwd(want.data(), dy.data(), cos.data(), sin.data(), 1, kN, nh, hd, &pool_);
  EXPECT_EQ(got, want) << "rope_backward";
}

TEST_F(CpuOpsF16Test, AttentionAndCrossEntropyRunTheFp16Kernels) {
  const AttentionShapeParams s{.b = 2, .t = 37, .heads = 4, .kv_heads = 2, .head_dim = 16};
  const k::AttentionShape ks{2, 37, 4, 2, 16, 0};
  const int64_t nq = 2 * 37 * 4 * 16, nkv = 2 * 37 * 2 * 16;
  const auto q = Random(nq, 1.0f), kk = Random(nkv, 1.0f), v = Random(nkv, 1.0f);
  const auto dout = Random(nq, 1.0f);
  std::vector<F16> out(nq), want_out(nq);
  std::vector<float> lse(2 * 4 * 37), want_lse(lse.size());
  ASSERT_TRUE(backend_->AttentionForward(*queue_, {.dtype = DType::kF16, .shape = s,
                                                   .q = q.data(), .k = kk.data(), .v = v.data(),
                                                   .out = out.data(), .lse = lse.data()})
                  .ok());
  Sync();
  k::attention_fwd(want_out.data(), want_lse.data(), q.data(), kk.data(), v.data(), ks, &pool_);
  EXPECT_EQ(out, want_out) << "attention";
  EXPECT_EQ(lse, want_lse) << "attention lse";
  std::vector<F16> cached(nq);
  ASSERT_TRUE(backend_->CachedAttentionForward(*queue_, {.dtype = DType::kF16, .shape = s,
                                                         .start = 0, .capacity = 37,
                                                         .q = q.data(), .k = kk.data(),
                                                         .v = v.data(), .out = cached.data()})
                  .ok());
  Sync();
  EXPECT_EQ(cached, want_out) << "cached attention (start 0, capacity T: the full forward)";
  std::vector<F16> dq(nq, F16{0}), dk(nkv, F16{0}), dv(nkv, F16{0});
  std::vector<F16> want_dq = dq, want_dk = dk, want_dv = dv;
  ASSERT_TRUE(backend_->AttentionBackward(*queue_, {.dtype = DType::kF16, .shape = s,
                                                    .dout = dout.data(), .q = q.data(),
                                                    .k = kk.data(), .v = v.data(),
                                                    .out = out.data(), .lse = lse.data(),
                                                    .dq = dq.data(), .dk = dk.data(),
                                                    .dv = dv.data()})
                  .ok());
  Sync();
  k::attention_bwd(want_dq.data(), want_dk.data(), want_dv.data(), dout.data(), q.data(),
                   kk.data(), v.data(), out.data(), lse.data(), ks, &pool_);
  EXPECT_EQ(dq, want_dq) << "attention_backward dq";
  EXPECT_EQ(dk, want_dk) << "attention_backward dk";
  EXPECT_EQ(dv, want_dv) << "attention_backward dv";

  const int64_t n = 9, vocab = 1003;
  const auto logits = Random(n * vocab, 3.0f);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = i == 4 ? kIgnoreIndex : (i * 97) % vocab;
  std::vector<float> losses(n), ce_lse(n), want_losses(n), want_ce_lse(n);
  float mean = -1.0f;
  ASSERT_TRUE(backend_->CrossEntropyForward(*queue_, {.n = n, .v = vocab,
                                                      .logits_type = DType::kF16,
                                                      .logits = logits.data(),
                                                      .targets = targets.data(),
                                                      .losses = losses.data(),
                                                      .lse = ce_lse.data(), .mean_loss = &mean})
                  .ok());
  Sync();
  const float want_mean = k::cross_entropy_fwd(want_losses.data(), want_ce_lse.data(),
                                               logits.data(), targets.data(), n, vocab, &pool_);
  EXPECT_EQ(losses, want_losses) << "cross_entropy losses";
  EXPECT_EQ(ce_lse, want_ce_lse) << "cross_entropy lse";
  EXPECT_EQ(mean, want_mean) << "cross_entropy mean";
  std::vector<F16> dlogits(n * vocab), want_dlogits(n * vocab);
  ASSERT_TRUE(backend_->CrossEntropyBackward(*queue_, {.n = n, .v = vocab,
                                                       .logits_type = DType::kF16,
                                                       .logits = logits.data(),
                                                       .lse = ce_lse.data(),
                                                       .targets = targets.data(), .dloss = 1.5f,
                                                       .dlogits = dlogits.data()})
                  .ok());
  Sync();
  k::cross_entropy_bwd(want_dlogits.data(), logits.data(), ce_lse.data(), targets.data(), n,
                       vocab, 1.5f, &pool_);
  EXPECT_EQ(dlogits, want_dlogits) << "cross_entropy_backward";
}

// Every (src, dst) pair of fp32 / bf16 / fp16: numeric's conversions element by element (one
// rounding; bf16 <-> fp16 through fp32), over values that overflow fp16, underflow into its
// subnormals, and NaNs; a length with a vector tail, cut into several parallel pieces.
TEST_F(CpuOpsF16Test, CastBetweenEveryPairOfTypes) {
  const int64_t n = 3 * (int64_t{1} << 14) + 13;
  std::vector<float> f32 = RandomF32(n, 3000.0f);
  for (int64_t i = 0; i < n; i += 97) f32[i] *= 1e-8f;  // fp16 subnormals
  f32[1] = 65520.0f, f32[2] = -1e6f, f32[3] = NAN, f32[4] = 65519.0f, f32[5] = 3e38f;
  std::vector<uint16_t> bf16(n), f16(n);
  for (int64_t i = 0; i < n; ++i) {
    bf16[i] = numeric::Fp32ToBf16(f32[i]);
    f16[i] = numeric::Fp32ToF16(f32[i]);
  }
  auto widen = [](DType t, const void* p, int64_t i) {
    if (t == DType::kFp32) return static_cast<const float*>(p)[i];
    const uint16_t bits = static_cast<const uint16_t*>(p)[i];
    return t == DType::kBf16 ? numeric::Bf16ToFp32(bits) : numeric::F16ToFp32(bits);
  };
  auto bits_of = [](DType t, float x) -> uint32_t {
    if (t == DType::kFp32) return std::bit_cast<uint32_t>(x);
    return t == DType::kBf16 ? numeric::Fp32ToBf16(x) : numeric::Fp32ToF16(x);
  };
  for (DType src : {DType::kFp32, DType::kBf16, DType::kF16}) {
    const void* src_data = src == DType::kFp32   ? static_cast<const void*>(f32.data())
                           : src == DType::kBf16 ? static_cast<const void*>(bf16.data())
                                                 : static_cast<const void*>(f16.data());
    for (DType dst : {DType::kFp32, DType::kBf16, DType::kF16}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(src) << " -> " << DTypeName(dst));
      std::vector<char> out(n * DTypeBytes(dst));
      ASSERT_TRUE(backend_->Cast(*queue_, {.n = n, .src_type = src, .dst_type = dst,
                                           .src = src_data, .dst = out.data()})
                      .ok());
      Sync();
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t want = bits_of(dst, widen(src, src_data, i));
        const uint32_t got = dst == DType::kFp32 ? reinterpret_cast<const uint32_t*>(out.data())[i]
                                                 : reinterpret_cast<const uint16_t*>(out.data())[i];
        ASSERT_EQ(got, want) << "element " << i << " (" << f32[i] << ")";
      }
    }
  }
  EXPECT_EQ(f16[1], 0x7c00u);  // 65520 is past fp16's range: +inf
  EXPECT_EQ(f16[4], 0x7bffu);  // 65519 rounds to 65504
}

// Cast with `accumulate` (the fp16 backward's weight gradient, worker/model/linear.h): fp32 dst +=
// the source widened exactly, for every source type, bit for bit dst + widen(src) in fp32 (an
// fp16 inf propagates); a 16-bit dst is refused by name before anything runs.
TEST_F(CpuOpsF16Test, CastAccumulatesIntoFp32) {
  const int64_t n = 5 * 1024 + 7;  // several 1024-element rows and a tail
  const std::vector<float> base = RandomF32(n, 10.0f);
  const std::vector<float> f32 = RandomF32(n, 3.0f);
  std::vector<uint16_t> bf16(n), f16(n);
  for (int64_t i = 0; i < n; ++i) {
    bf16[i] = numeric::Fp32ToBf16(f32[i]);
    f16[i] = numeric::Fp32ToF16(f32[i]);
  }
  f16[3] = 0x7c00;  // +inf: the sum overflows as fp16 did
  for (DType src : {DType::kFp32, DType::kBf16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(src));
    const void* data = src == DType::kFp32   ? static_cast<const void*>(f32.data())
                       : src == DType::kBf16 ? static_cast<const void*>(bf16.data())
                                             : static_cast<const void*>(f16.data());
    std::vector<float> dst = base;
    ASSERT_TRUE(backend_->Cast(*queue_, {.n = n, .src_type = src, .dst_type = DType::kFp32,
                                         .src = data, .dst = dst.data(), .accumulate = true})
                    .ok());
    Sync();
    for (int64_t i = 0; i < n; ++i) {
      const float add = src == DType::kFp32   ? f32[i]
                        : src == DType::kBf16 ? numeric::Bf16ToFp32(bf16[i])
                                              : numeric::F16ToFp32(f16[i]);
      ASSERT_EQ(std::bit_cast<uint32_t>(dst[i]), std::bit_cast<uint32_t>(base[i] + add)) << i;
    }
  }
  std::vector<uint16_t> out(n);
  const absl::Status bad = backend_->Cast(*queue_, {.n = n, .src_type = DType::kF16,
                                                    .dst_type = DType::kF16, .src = f16.data(),
                                                    .dst = out.data(), .accumulate = true});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("accumulate needs an fp32 dst_type"), std::string::npos) << bad;
}

// AdamW with out_type kF16: the CPU optimizer's step with out_fp16, bit for bit, and the copy is
// exactly Fp32ToF16 of the new master (which overflows to inf for masters beyond 65504).
TEST_F(CpuOpsF16Test, AdamWWritesFp16Copies) {
  const int64_t n = 3 * (int64_t{1} << 14) + 37;
  std::vector<float> master = RandomF32(n, 1.0f), m = RandomF32(n, 0.01f), v(n),
                     grad = RandomF32(n, 1.0f);
  for (int64_t i = 0; i < n; ++i) v[i] = std::fabs(RandomF32(1, 1e-3f)[0]);
  master[0] = 1e5f, master[1] = -70000.0f, master[2] = 3e-6f;  // inf, -inf, an fp16 subnormal
  m[2] = grad[2] = 0.0f;  // no update: master[2] only decays
  std::vector<float> ref_master = master, ref_m = m, ref_v = v;
  std::vector<uint16_t> ref_out(n);
  const optim::AdamWConfig config{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                                  .weight_decay = 0.1};
  ASSERT_TRUE(optim::AdamWStep(config, 7, 0.5f,
                               {.master = ref_master.data(), .m = ref_m.data(),
                                .v = ref_v.data(), .grad = grad.data(),
                                .bf16_out = ref_out.data(), .n = static_cast<size_t>(n),
                                .out_fp16 = true})
                  .ok());
  std::vector<uint16_t> out(n);
  ASSERT_TRUE(backend_->AdamW(*queue_, {.n = n, .step = 7, .lr = 3e-3, .beta1 = 0.9,
                                        .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                                        .grad_scale = 0.5f, .master = master.data(),
                                        .m = m.data(), .v = v.data(), .grad = grad.data(),
                                        .bf16_out = out.data(), .out_type = DType::kF16})
                  .ok());
  Sync();
  EXPECT_EQ(master, ref_master);
  EXPECT_EQ(m, ref_m);
  EXPECT_EQ(v, ref_v);
  EXPECT_EQ(out, ref_out);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], numeric::Fp32ToF16(master[i])) << i;
  EXPECT_EQ(out[0], 0x7c00u);
  EXPECT_EQ(out[1], 0xfc00u);
  EXPECT_LT(out[2], 0x0400u);  // subnormal
}

// The 16-bit format fields accept bf16 and fp16 only (op_params.cc), on every op that has one.
TEST_F(CpuOpsF16Test, NonHalfDtypeIsRefusedAtEnqueue) {
  std::vector<float> buf(4096, 0.0f);
  std::vector<int32_t> ids(64, 0);
  float* f = buf.data();
  const DType bad = DType::kFp32;
  auto refused = [](const absl::Status& s) { return s.code() == absl::StatusCode::kInvalidArgument; };
  Queue& q = *queue_;
  EXPECT_TRUE(refused(backend_->EmbeddingForward(q, {.dtype = bad, .b = 1, .t = 2, .c = 4,
                                                     .vocab = 4, .tokens = ids.data(), .wte = f,
                                                     .out = f + 64})));
  EXPECT_TRUE(refused(backend_->EmbeddingBackward(q, {.dtype = bad, .b = 1, .t = 2, .c = 4,
                                                      .vocab = 4, .tokens = ids.data(),
                                                      .dout = f, .dwte = f + 64})));
  EXPECT_TRUE(refused(backend_->NormForward(q, {.dtype = bad, .op = NormOp::kRmsNorm, .n = 2,
                                                .c = 4, .inp = f, .weight = f + 64,
                                                .out = f + 128, .rstd = f + 192})));
  NormBackwardParams nb{.dtype = bad, .op = NormOp::kRmsNorm, .n = 2, .c = 4, .dout = f,
                        .inp = f + 64, .weight = f + 128, .rstd = f + 192,
                        .dinp_type = DType::kFp32, .dinp = f + 256, .dweight = f + 320};
  EXPECT_TRUE(refused(backend_->NormBackward(q, nb)));
  nb.dtype = DType::kF16;
  nb.dinp_type = DType::kBf16;  // dinp is fp32 or the op's dtype
  EXPECT_TRUE(refused(backend_->NormBackward(q, nb)));
  EXPECT_TRUE(refused(backend_->GeluForward(q, {.dtype = bad, .n = 8, .inp = f, .out = f + 64})));
  EXPECT_TRUE(refused(backend_->GeluBackward(q, {.dtype = bad, .n = 8, .dout = f, .inp = f + 64,
                                                 .dinp = f + 128})));
  EXPECT_TRUE(refused(backend_->SwiGluForward(q, {.dtype = bad, .n = 8, .gate = f, .up = f + 64,
                                                  .out = f + 128})));
  EXPECT_TRUE(refused(backend_->SwiGluBackward(q, {.dtype = bad, .n = 8, .dout = f,
                                                   .gate = f + 64, .up = f + 128,
                                                   .dgate = f + 192, .dup = f + 256})));
  EXPECT_TRUE(refused(backend_->RopeForward(q, {.dtype = bad, .b = 1, .t = 1, .nh = 1,
                                                .head_dim = 4, .cos = f, .sin = f + 64,
                                                .inp = f + 128, .out = f + 192})));
  EXPECT_TRUE(refused(backend_->RopeBackward(q, {.dtype = bad, .b = 1, .t = 1, .nh = 1,
                                                 .head_dim = 4, .cos = f, .sin = f + 64,
                                                 .dout = f + 128, .dinp = f + 192})));
  const AttentionShapeParams s{.b = 1, .t = 2, .heads = 2, .kv_heads = 1, .head_dim = 8};
  EXPECT_TRUE(refused(backend_->AttentionForward(q, {.dtype = bad, .shape = s, .q = f,
                                                     .k = f + 64, .v = f + 128, .out = f + 192,
                                                     .lse = f + 256})));
  EXPECT_TRUE(refused(backend_->CachedAttentionForward(q, {.dtype = bad, .shape = s,
                                                           .capacity = 2, .q = f, .k = f + 64,
                                                           .v = f + 128, .out = f + 192})));
  EXPECT_TRUE(refused(backend_->AttentionBackward(q, {.dtype = bad, .shape = s, .dout = f,
                                                      .q = f + 64, .k = f + 128, .v = f + 192,
                                                      .out = f + 256, .lse = f + 320,
                                                      .dq = f + 384, .dk = f + 448,
                                                      .dv = f + 512})));
  EXPECT_TRUE(refused(backend_->ResidualAdd(q, {.dtype = bad, .n = 8, .a = f, .b = f + 64,
                                                .out = f + 128})));
  EXPECT_TRUE(refused(backend_->BiasAdd(q, {.dtype = bad, .n = 2, .c = 4, .inp = f,
                                            .bias = f + 64, .out = f + 128})));
  EXPECT_TRUE(refused(backend_->AdamW(q, {.n = 4, .master = f, .m = f + 4, .v = f + 8,
                                          .grad = f + 12, .bf16_out = f + 16,
                                          .out_type = bad})));
  EXPECT_TRUE(backend_->Synchronize(q).ok());  // nothing was enqueued
}

}  // namespace
}  // namespace mobius::backend
