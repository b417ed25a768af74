// GPU benchmark of the CUDA kernels and the cuBLASLt GEMM (bench/gpu/README.md), one process per
// repetition, alternating with bench/gpu/torch_bench.py, which times the PyTorch equivalent of
// every case on the same GPU (test/gpu/run_all.sh runs both and bench/gpu/compare.py puts them side
// by side). Not a test.
//
//   gpu_bench --list     the cases, one JSON object per line (torch_bench.py reads them)
//   gpu_bench [--quick]  runs them; one JSON line per case:
//     {"impl":"mobius","key":...,"op":...,"params":{...},"ms":median,"ms_min":..,"ms_max":..,
//      "flops":..,"bytes":..}
//   Each case: 3 warm-up calls, then 7 windows of `iters` calls timed with CUDA events; ms is the
//   per-call median over the windows, ms_min/ms_max the spread.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "worker/kernels/cuda/adamw.cuh"
#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/cross_entropy.cuh"
#include "worker/kernels/cuda/gelu.cuh"
#include "worker/kernels/cuda/gemm.h"
#include "worker/kernels/cuda/layernorm.cuh"
#include "worker/kernels/cuda/rmsnorm.cuh"
#include "worker/kernels/cuda/swiglu.cuh"

namespace mobius::bench {
namespace {

using kernels::cuda::KernelStatus;

struct Case {
  std::string op;
  std::vector<std::pair<std::string, int64_t>> params;  // in a fixed order
  int64_t Get(const std::string& name) const {
    for (const auto& [k, v] : params) {
      if (k == name) return v;
    }
    return 0;
  }
  std::string Key() const {
    std::string key = op;
    for (const auto& [k, v] : params) key += " " + k + "=" + std::to_string(v);
    return key;
  }
  std::string ParamsJson() const {
    std::string s = "{";
    for (size_t i = 0; i < params.size(); ++i) {
      if (i > 0) s += ",";
      s += "\"" + params[i].first + "\":" + std::to_string(params[i].second);
    }
    s += "}";
    return s;
  }
};

// Transformer shapes: GPT-2 124M (C 768, B*T = 8192), a Llama-3.2-1B-like layer (C 2048,
// MLP 8192, GQA 32/8), a Llama-2-7B layer (C 4096, MLP 11008), and the GPT-2 LM head.
std::vector<Case> Cases(bool quick) {
  std::vector<Case> c;
  auto gemm = [&](int64_t m, int64_t n, int64_t k) {
    c.push_back({"gemm_bf16_nt", {{"m", m}, {"n", n}, {"k", k}}});
  };
  gemm(8192, 2304, 768);               // GPT-2 qkv
  gemm(8192, 3072, 768);               // GPT-2 fc
  gemm(8192, 768, 3072);               // GPT-2 proj
  gemm(8192, 8192, 2048);              // 1B MLP up
  gemm(8192, 2048, 8192);              // 1B MLP down
  gemm(4096, 11008, 4096);             // 7B MLP up
  gemm(4096, 4096, 4096);              // 7B attention out
  if (!quick) gemm(8192, 50257, 768);  // GPT-2 LM head (odd N: unaligned rows)
  // fp16 (training.precision fp16), with fp32 accumulation and with half_accumulate
  // (CUBLAS_COMPUTE_16F: twice the fp32-accumulate tensor rate on GeForce GPUs; on datacenter
  // GPUs the same rate), next to torch's fp16 matmul with and without allow_fp16_accumulation.
  for (const char* op : {"gemm_fp16_nt", "gemm_fp16_nt_hacc"}) {
    c.push_back({op, {{"m", 8192}, {"n", 3072}, {"k", 768}}});   // GPT-2 fc
    c.push_back({op, {{"m", 8192}, {"n", 8192}, {"k", 2048}}});  // 1B MLP up
    c.push_back({op, {{"m", 4096}, {"n", 4096}, {"k", 4096}}});  // 7B attention out
  }
  auto attn = [&](int64_t b, int64_t t, int64_t h, int64_t kv, int64_t hd) {
    c.push_back({"attention_fwd", {{"b", b}, {"t", t}, {"h", h}, {"kv", kv}, {"hd", hd}}});
    c.push_back({"attention_fwd_bwd", {{"b", b}, {"t", t}, {"h", h}, {"kv", kv}, {"hd", hd}}});
  };
  attn(8, 1024, 12, 12, 64);  // GPT-2
  c.push_back(
      {"attention_fwd_reference", {{"b", 8}, {"t", 1024}, {"h", 12}, {"kv", 12}, {"hd", 64}}});
  // The WMMA forward and the reference backward next to the mma.sync kernels that attention_fwd
  // and attention_bwd pick (attention_fwd, attention_fwd_bwd), same shape.
  c.push_back({"attention_fwd_wmma", {{"b", 8}, {"t", 1024}, {"h", 12}, {"kv", 12}, {"hd", 64}}});
  c.push_back({"attention_fwd_bwd_reference",
               {{"b", 8}, {"t", 1024}, {"h", 12}, {"kv", 12}, {"hd", 64}}});
  attn(2, 2048, 32, 8, 64);  // 1B-like GQA
  c.push_back({"layernorm_fwd", {{"n", 8192}, {"c", 768}}});
  c.push_back({"rmsnorm_fwd", {{"n", 8192}, {"c", 2048}}});
  c.push_back({"gelu_fwd", {{"n", 8192 * 3072}}});
  c.push_back({"swiglu_fwd", {{"n", 8192 * 8192}}});
  c.push_back({"cross_entropy_fwd_bwd", {{"n", 8192}, {"v", 50257}}});
  c.push_back({"adamw_step", {{"n", 124439808}}});           // GPT-2 124M parameters
  c.push_back({"copy_d2d", {{"bytes", int64_t{1} << 30}}});  // the memory-bandwidth bound
  c.push_back({"copy_h2d_pinned", {{"bytes", int64_t{1} << 28}}});
  c.push_back({"copy_d2h_pinned", {{"bytes", int64_t{1} << 28}}});
  // Both directions at once on two streams (what a streaming schedule does: upload the next
  // stage while offloading the last one's gradients): bytes per direction; GB/s counts both.
  c.push_back({"copy_duplex_pinned", {{"bytes", int64_t{1} << 28}}});
  return c;
}

#define BENCH_CUDA(expr)                                                              \
  do {                                                                                \
    const cudaError_t e_ = (expr);                                                    \
    if (e_ != cudaSuccess) return std::string(#expr) + ": " + cudaGetErrorString(e_); \
  } while (0)

// Device memory released at the end of a case.
class Arena {
 public:
  ~Arena() {
    for (void* p : device_) cudaFree(p);
    for (void* p : host_) cudaFreeHost(p);
  }
  // bytes of device memory filled with small random bf16 values (or fp32 when fp32 is set, fp16
  // when f16 is).
  void* Device(size_t bytes, bool fp32 = false, bool f16 = false) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    device_.push_back(p);
    // A 1 Mi-element random block, tiled: cheap to make, not all-zero (no data-dependent shortcut).
    const size_t block = size_t{1} << 20;
    std::vector<uint16_t> b16(block), h16(block);
    std::vector<float> b32(block);
    uint32_t x = 12345;
    for (size_t i = 0; i < block; ++i) {
      x = x * 1664525u + 1013904223u;
      b32[i] = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 2.0f;
      b16[i] = numeric::Fp32ToBf16(b32[i]);
      h16[i] = numeric::Fp32ToF16(b32[i]);
    }
    const void* src = fp32  ? static_cast<const void*>(b32.data())
                      : f16 ? static_cast<const void*>(h16.data())
                            : b16.data();
    const size_t src_bytes = block * (fp32 ? 4 : 2);
    for (size_t off = 0; off < bytes; off += src_bytes) {
      cudaMemcpy(static_cast<char*>(p) + off, src, std::min(src_bytes, bytes - off),
                 cudaMemcpyHostToDevice);
    }
    return p;
  }
  void* Pinned(size_t bytes) {
    void* p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) return nullptr;
    std::memset(p, 1, bytes);
    host_.push_back(p);
    return p;
  }

 private:
  std::vector<void*> device_, host_;
};

struct Timing {
  double ms = 0, ms_min = 0, ms_max = 0;
};

// fn enqueues one call on `stream` and returns "" or an error.
std::string TimeIt(const std::function<std::string()>& fn, int iters, cudaStream_t stream,
                   Timing* out) {
  for (int i = 0; i < 3; ++i) {
    const std::string err = fn();
    if (!err.empty()) return err;
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  std::vector<double> per_call;
  for (int w = 0; w < 7; ++w) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) fn();
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    per_call.push_back(ms / iters);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(per_call.begin(), per_call.end());
  out->ms = per_call[per_call.size() / 2];
  out->ms_min = per_call.front();
  out->ms_max = per_call.back();
  return "";
}

std::string Status(const KernelStatus& st) { return st.ok() ? "" : st.ToString(); }

struct Work {
  double flops = 0, bytes = 0;
};

// Sets up one case and times it.
std::string RunCase(const Case& c, kernels::cuda::CublasLtGemm* gemm, cudaStream_t stream,
                    Timing* t, Work* work) {
  Arena arena;
  namespace k = kernels::cuda;
  constexpr k::HalfType kBf16 = k::HalfType::kBf16;  // the bf16 cases' storage
  const std::string op = c.op;
  if (op == "gemm_bf16_nt") {  // y [m, n] = x [m, k] W [n, k]^T, bf16 in and out, fp32 compute
    const int64_t m = c.Get("m"), n = c.Get("n"), kk = c.Get("k");
    k::GemmArgs g;
    g.m = m, g.n = n, g.k = kk, g.trans_b = true;
    g.a = arena.Device(m * kk * 2), g.lda = kk;
    g.b = arena.Device(n * kk * 2), g.ldb = kk;
    g.c = arena.Device(m * n * 2), g.ldc = n;
    if (!g.a || !g.b || !g.c) return "out of device memory";
    work->flops = 2.0 * m * n * kk;
    return TimeIt([&] { return Status(gemm->Run(g, stream)); }, 20, stream, t);
  }
  if (op == "gemm_fp16_nt" || op == "gemm_fp16_nt_hacc") {  // as gemm_bf16_nt, fp16
    const int64_t m = c.Get("m"), n = c.Get("n"), kk = c.Get("k");
    k::GemmArgs g;
    g.m = m, g.n = n, g.k = kk, g.trans_b = true;
    g.a_type = g.b_type = g.c_type = k::GemmType::kF16;
    g.half_accumulate = op == "gemm_fp16_nt_hacc";
    g.a = arena.Device(m * kk * 2, false, true), g.lda = kk;
    g.b = arena.Device(n * kk * 2, false, true), g.ldb = kk;
    g.c = arena.Device(m * n * 2, false, true), g.ldc = n;
    if (!g.a || !g.b || !g.c) return "out of device memory";
    work->flops = 2.0 * m * n * kk;
    return TimeIt([&] { return Status(gemm->Run(g, stream)); }, 20, stream, t);
  }
  if (op == "attention_fwd" || op == "attention_fwd_reference" || op == "attention_fwd_wmma" ||
      op == "attention_fwd_bwd" || op == "attention_fwd_bwd_reference") {
    k::AttentionShape s{c.Get("b"), c.Get("t"), c.Get("h"), c.Get("kv"), c.Get("hd"), 0};
    const size_t nq = s.b * s.t * s.heads * s.head_dim * 2,
                 nk = s.b * s.t * s.kv_heads * s.head_dim * 2;
    auto* q = static_cast<uint16_t*>(arena.Device(nq));
    auto* kp = static_cast<uint16_t*>(arena.Device(nk));
    auto* v = static_cast<uint16_t*>(arena.Device(nk));
    auto* o = static_cast<uint16_t*>(arena.Device(nq));
    auto* lse = static_cast<float*>(arena.Device(s.b * s.heads * s.t * 4, true));
    if (!q || !kp || !v || !o || !lse) return "out of device memory";
    // Causal: half of the T x T scores; 2 matmuls (QK^T, PV) forward, 5 in the backward
    // (as FlashAttention-2 counts them, recompute included).
    const double fwd = 2.0 * 2.0 * s.b * s.heads * s.t * s.t * s.head_dim / 2.0;
    if (op == "attention_fwd") {
      work->flops = fwd;
      return TimeIt([&] { return Status(k::attention_fwd(kBf16, o, lse, q, kp, v, s, stream)); }, 3,
                    stream, t);
    }
    if (op == "attention_fwd_wmma") {
      work->flops = fwd;
      return TimeIt(
          [&] { return Status(k::attention_flash_fwd(kBf16, o, lse, q, kp, v, s, stream)); }, 3,
          stream, t);
    }
    if (op == "attention_fwd_reference") {
      work->flops = fwd;
      return TimeIt(
          [&] { return Status(k::attention_fwd_reference(kBf16, o, lse, q, kp, v, s, stream)); }, 2,
          stream, t);
    }
    auto* dout = static_cast<uint16_t*>(arena.Device(nq));
    auto* dq = static_cast<uint16_t*>(arena.Device(nq));
    auto* dk = static_cast<uint16_t*>(arena.Device(nk));
    auto* dv = static_cast<uint16_t*>(arena.Device(nk));
    if (!dout || !dq || !dk || !dv) return "out of device memory";
    work->flops = fwd * 3.5;
    return TimeIt(
        [&] {
          const std::string e = Status(k::attention_fwd(kBf16, o, lse, q, kp, v, s, stream));
          if (!e.empty()) return e;
          return Status(op == "attention_fwd_bwd"
                            ? k::attention_bwd(kBf16, dq, dk, dv, dout, q, kp, v, o, lse, s, stream)
                            : k::attention_bwd_reference(kBf16, dq, dk, dv, dout, q, kp, v, o,
                                                         lse, s, stream));
        },
        2, stream, t);
  }
  if (op == "layernorm_fwd" || op == "rmsnorm_fwd") {
    const int64_t n = c.Get("n"), cc = c.Get("c");
    auto* x = static_cast<uint16_t*>(arena.Device(n * cc * 2));
    auto* y = static_cast<uint16_t*>(arena.Device(n * cc * 2));
    auto* w = static_cast<uint16_t*>(arena.Device(cc * 2));
    auto* b = static_cast<uint16_t*>(arena.Device(cc * 2));
    auto* mean = static_cast<float*>(arena.Device(n * 4, true));
    auto* rstd = static_cast<float*>(arena.Device(n * 4, true));
    if (!x || !y || !w || !b || !mean || !rstd) return "out of device memory";
    work->bytes = 2.0 * n * cc * 2;
    if (op == "layernorm_fwd") {
      return TimeIt(
          [&] {
            return Status(k::layernorm_fwd(kBf16, y, mean, rstd, x, w, b, n, cc, 1e-5f, stream));
          },
          50, stream, t);
    }
    return TimeIt(
        [&] { return Status(k::rmsnorm_fwd(kBf16, y, rstd, x, w, n, cc, 1e-5f, stream)); }, 50,
        stream, t);
  }
  if (op == "gelu_fwd" || op == "swiglu_fwd") {
    const int64_t n = c.Get("n");
    auto* a = static_cast<uint16_t*>(arena.Device(n * 2));
    auto* b = static_cast<uint16_t*>(arena.Device(n * 2));
    auto* y = static_cast<uint16_t*>(arena.Device(n * 2));
    if (!a || !b || !y) return "out of device memory";
    if (op == "gelu_fwd") {
      work->bytes = 2.0 * n * 2;
      return TimeIt([&] { return Status(k::gelu_fwd(kBf16, y, a, n, stream)); }, 50, stream, t);
    }
    work->bytes = 3.0 * n * 2;
    return TimeIt([&] { return Status(k::swiglu_fwd(kBf16, y, a, b, n, stream)); }, 50, stream, t);
  }
  if (op == "cross_entropy_fwd_bwd") {  // bf16 logits, gradient written in place
    const int64_t n = c.Get("n"), v = c.Get("v");
    auto* z = static_cast<uint16_t*>(arena.Device(n * v * 2));
    auto* losses = static_cast<float*>(arena.Device(n * 4, true));
    auto* lse = static_cast<float*>(arena.Device(n * 4, true));
    auto* mean = static_cast<float*>(arena.Device(4, true));
    std::vector<int32_t> targets(n);
    for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 7919) % v);
    auto* tg = static_cast<int32_t*>(arena.Device(n * 4));
    if (!z || !losses || !lse || !mean || !tg) return "out of device memory";
    BENCH_CUDA(cudaMemcpy(tg, targets.data(), n * 4, cudaMemcpyHostToDevice));
    work->bytes = 3.0 * n * v * 2;  // read (fwd), read + write (bwd)
    // The in-place backward overwrites the logits with gradients (small values): the next
    // iteration reads those, which costs the same.
    return TimeIt(
        [&] {
          const std::string e =
              Status(k::cross_entropy_fwd(kBf16, losses, lse, mean, z, tg, n, v, nullptr, stream));
          if (!e.empty()) return e;
          return Status(k::cross_entropy_bwd(kBf16, z, z, lse, tg, n, v, 1.0f, stream));
        },
        5, stream, t);
  }
  if (op == "adamw_step") {
    const int64_t n = c.Get("n");
    auto* p = static_cast<float*>(arena.Device(n * 4, true));
    auto* m = static_cast<float*>(arena.Device(n * 4, true));
    auto* v = static_cast<float*>(arena.Device(n * 4, true));
    auto* g = static_cast<float*>(arena.Device(n * 4, true));
    auto* out = static_cast<uint16_t*>(arena.Device(n * 2));
    if (!p || !m || !v || !g || !out) return "out of device memory";
    BENCH_CUDA(cudaMemset(v, 0, n * 4));
    const auto s = k::MakeAdamWStepScalars(1e-4, 0.9, 0.999, 1e-8, 0.1, 10, 1.0f, true);
    work->bytes = n * (4.0 * 4 + 3 * 4 + 2);  // 4 fp32 reads, 3 fp32 writes, 1 bf16 write
    return TimeIt([&] { return Status(k::adamw_step(kBf16, s, p, m, v, g, out, n, stream)); }, 10,
                  stream, t);
  }
  if (op == "copy_d2d") {
    const int64_t bytes = c.Get("bytes");
    void* a = arena.Device(bytes);
    void* b = arena.Device(bytes);
    if (!a || !b) return "out of device memory";
    work->bytes = 2.0 * bytes;  // read + write
    return TimeIt(
        [&] {
          const cudaError_t e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream);
          return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
        },
        10, stream, t);
  }
  if (op == "copy_h2d_pinned" || op == "copy_d2h_pinned") {
    const int64_t bytes = c.Get("bytes");
    void* d = arena.Device(bytes);
    void* h = arena.Pinned(bytes);
    if (!d || !h) return "out of memory";
    const bool h2d = op == "copy_h2d_pinned";
    work->bytes = static_cast<double>(bytes);
    return TimeIt(
        [&] {
          const cudaError_t e = h2d ? cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream)
                                    : cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, stream);
          return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
        },
        5, stream, t);
  }
  if (op == "copy_duplex_pinned") {
    const int64_t bytes = c.Get("bytes");
    void* d_in = arena.Device(bytes);
    void* d_out = arena.Device(bytes);
    void* h_in = arena.Pinned(bytes);
    void* h_out = arena.Pinned(bytes);
    if (!d_in || !d_out || !h_in || !h_out) return "out of memory";
    cudaStream_t other = nullptr;
    cudaEvent_t fork = nullptr, join = nullptr;
    BENCH_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    BENCH_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    BENCH_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    work->bytes = 2.0 * static_cast<double>(bytes);
    // The D2H copy runs on `other`, forked from and joined back into the timed stream, so the
    // timed window covers both copies overlapping.
    const std::string err = TimeIt(
        [&] {
          cudaError_t e = cudaEventRecord(fork, stream);
          if (e == cudaSuccess) e = cudaStreamWaitEvent(other, fork, 0);
          if (e == cudaSuccess) {
            e = cudaMemcpyAsync(d_in, h_in, bytes, cudaMemcpyHostToDevice, stream);
          }
          if (e == cudaSuccess) {
            e = cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, other);
          }
          if (e == cudaSuccess) e = cudaEventRecord(join, other);
          if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, join, 0);
          return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
        },
        5, stream, t);
    cudaStreamSynchronize(other);
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    cudaStreamDestroy(other);
    return err;
  }
  return "unknown op " + op;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}

int Main(int argc, char** argv) {
  bool list = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list") == 0)
      list = true;
    else if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else {
      std::fprintf(stderr, "usage: gpu_bench [--list] [--quick]\n");
      return 2;
    }
  }
  const std::vector<Case> cases = Cases(quick);
  if (list) {
    for (const Case& c : cases) {
      std::printf("{\"key\":\"%s\",\"op\":\"%s\",\"params\":%s}\n", c.Key().c_str(), c.op.c_str(),
                  c.ParamsJson().c_str());
    }
    return 0;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "gpu_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf(
      "{\"impl\":\"mobius\",\"device\":\"%s\",\"sm\":%d%d,\"sms\":%d,\"memory_bytes\":%zu,"
      "\"driver\":%d,\"runtime\":%d}\n",
      JsonEscape(prop.name).c_str(), prop.major, prop.minor, prop.multiProcessorCount,
      prop.totalGlobalMem, driver, runtime);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  std::unique_ptr<kernels::cuda::CublasLtGemm> gemm;
  const KernelStatus st = kernels::cuda::CublasLtGemm::Create(
      kernels::cuda::CublasLtGemm::kDefaultWorkspaceBytes, &gemm);
  if (!st.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  for (const Case& c : cases) {
    Timing t;
    Work w;
    const std::string err = RunCase(c, gemm.get(), stream, &t, &w);
    if (!err.empty()) {
      cudaGetLastError();
      std::printf(
          "{\"impl\":\"mobius\",\"key\":\"%s\",\"op\":\"%s\",\"params\":%s,\"error\":\"%s\"}\n",
          c.Key().c_str(), c.op.c_str(), c.ParamsJson().c_str(), JsonEscape(err).c_str());
    } else {
      std::printf(
          "{\"impl\":\"mobius\",\"key\":\"%s\",\"op\":\"%s\",\"params\":%s,\"ms\":%.6f,"
          "\"ms_min\":%.6f,\"ms_max\":%.6f,\"flops\":%.6g,\"bytes\":%.6g}\n",
          c.Key().c_str(), c.op.c_str(), c.ParamsJson().c_str(), t.ms, t.ms_min, t.ms_max, w.flops,
          w.bytes);
    }
    std::fflush(stdout);
  }
  gemm.reset();
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace
}  // namespace mobius::bench

int main(int argc, char** argv) { return mobius::bench::Main(argc, argv); }
