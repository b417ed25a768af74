// bench_kernels [threads] [batch]: times every CPU op kernel, forward and backward, on a
// GPT-2-small shape (T 1024, C 768, 12 heads of 64, MLP 3072, V 50257; cross-entropy on 512 rows
// to bound memory). Prints milliseconds per call (best of 3). Not a test.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "common/numeric/bf16.h"
#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/bias.h"
#include "worker/kernels/cpu/cross_entropy.h"
#include "worker/kernels/cpu/embedding.h"
#include "worker/kernels/cpu/gelu.h"
#include "worker/kernels/cpu/layernorm.h"
#include "worker/kernels/cpu/residual.h"
#include "worker/kernels/cpu/rmsnorm.h"
#include "worker/kernels/cpu/rope.h"
#include "worker/kernels/cpu/swiglu.h"

namespace kc = mobius::kernels::cpu;

namespace {

std::vector<uint16_t> RandomBf16(int64_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = mobius::numeric::Fp32ToBf16(dist(rng));
  return out;
}

void Time(const char* name, const std::function<void()>& fn) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    best = std::min(best, ms.count());
  }
  std::printf("%-22s %10.3f ms\n", name, best);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1])
                               : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t B = argc > 2 ? std::atoi(argv[2]) : 4;
  const int64_t T = 1024, C = 768, H = 12, hd = 64, I = 3072, V = 50257, N = B * T, CE_N = 512;
  std::printf("threads %d, B %lld, T %lld, C %lld, H %lld, hd %lld, I %lld, V %lld\n", threads,
              static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(C),
              static_cast<long long>(H), static_cast<long long>(hd), static_cast<long long>(I),
              static_cast<long long>(V));
  kc::ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::vector<int32_t> tokens(N), targets(CE_N);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % V);
  for (auto& t : targets) t = static_cast<int32_t>(rng() % V);
  auto wte = RandomBf16(V * C, 0.02f, rng), wpe = RandomBf16(T * C, 0.02f, rng);
  auto x = RandomBf16(N * C, 1.0f, rng), y = RandomBf16(N * C, 1.0f, rng);
  auto dy = RandomBf16(N * C, 1.0f, rng), w = RandomBf16(C, 1.0f, rng);
  auto hx = RandomBf16(N * I, 1.0f, rng), hy = RandomBf16(N * I, 1.0f, rng);
  auto hdy = RandomBf16(N * I, 1.0f, rng), hdx = RandomBf16(N * I, 0.0f, rng);
  auto hdx2 = hdx, bias = RandomBf16(I, 1.0f, rng);
  std::vector<float> dwte(V * C), dwpe(T * C), mean(N), rstd(N), dw(C), db(I), dxf(N * C);
  std::vector<uint16_t> dx(N * C);

  Time("embedding_fwd", [&] { kc::embedding_fwd(y.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, &pool); });
  Time("embedding_bwd", [&] { kc::embedding_bwd(dwte.data(), dwpe.data(), dy.data(), tokens.data(), B, T, C, &pool); });
  Time("layernorm_fwd", [&] { kc::layernorm_fwd(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), N, C, 1e-5f, &pool); });
  Time("layernorm_bwd(fp32 dx)", [&] { kc::layernorm_bwd(dxf.data(), dw.data(), dw.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C, &pool); });
  Time("rmsnorm_fwd", [&] { kc::rmsnorm_fwd(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f, &pool); });
  Time("rmsnorm_bwd", [&] { kc::rmsnorm_bwd(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C, &pool); });
  Time("gelu_fwd", [&] { kc::gelu_fwd(hy.data(), hx.data(), N * I, &pool); });
  Time("gelu_bwd", [&] { kc::gelu_bwd(hdx.data(), hdy.data(), hx.data(), N * I, &pool); });
  Time("swiglu_fwd", [&] { kc::swiglu_fwd(hy.data(), hx.data(), hdy.data(), N * I, &pool); });
  Time("swiglu_bwd", [&] { kc::swiglu_bwd(hdx.data(), hdx2.data(), hdy.data(), hx.data(), hy.data(), N * I, &pool); });
  std::vector<float> inv_freq(hd / 2), cs(T * hd / 2), sn(T * hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hd);
  kc::rope_tables(cs.data(), sn.data(), inv_freq.data(), T, hd / 2);
  Time("rope_fwd", [&] { kc::rope_fwd(y.data(), x.data(), cs.data(), sn.data(), B, T, H, hd, &pool); });
  Time("rope_bwd", [&] { kc::rope_bwd(dx.data(), dy.data(), cs.data(), sn.data(), B, T, H, hd, &pool); });
  const kc::AttentionShape shape{B, T, H, H, hd, 0};
  auto q = RandomBf16(N * C, 1.0f, rng), k = RandomBf16(N * C, 1.0f, rng);
  auto v = RandomBf16(N * C, 1.0f, rng), o = RandomBf16(N * C, 1.0f, rng);
  std::vector<uint16_t> dq(N * C), dk(N * C), dv(N * C);
  std::vector<float> lse(B * H * T);
  Time("attention_fwd", [&] { kc::attention_fwd(o.data(), lse.data(), q.data(), k.data(), v.data(), shape, &pool); });
  Time("attention_bwd", [&] { kc::attention_bwd(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(), o.data(), lse.data(), shape, &pool); });
  auto logits = RandomBf16(CE_N * V, 2.0f, rng);
  std::vector<float> losses(CE_N), ce_lse(CE_N);
  std::vector<uint16_t> dlogits(CE_N * V);
  Time("cross_entropy_fwd", [&] { kc::cross_entropy_fwd(losses.data(), ce_lse.data(), logits.data(), targets.data(), CE_N, V, &pool); });
  Time("cross_entropy_bwd", [&] { kc::cross_entropy_bwd(dlogits.data(), logits.data(), ce_lse.data(), targets.data(), CE_N, V, 1.0f, &pool); });
  Time("residual_fwd", [&] { kc::residual_fwd(y.data(), x.data(), dy.data(), N * C, &pool); });
  Time("bias_add_fwd", [&] { kc::bias_add_fwd(hy.data(), hx.data(), bias.data(), N, I, &pool); });
  Time("bias_bwd", [&] { kc::bias_bwd(db.data(), hdy.data(), N, I, &pool); });
  return 0;
}
