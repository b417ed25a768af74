// AttentionMmaFwdChecked, AttentionFlashBwdChecked (attention.cuh): the mma.sync kernels against
// the reference kernels on the device itself, once per (device, type, head_dim) and process,
// before attention_fwd / attention_bwd trust them. Inputs are multiples of 1/64 in [-1, 1] (exact
// in bf16 and fp16); the backward is given the reference forward's out and lse; both backwards
// start from zeroed gradients.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "worker/kernels/cuda/attention.cuh"

namespace mobius::kernels::cuda {
namespace {

// k / 64 (|k| <= 64) as the bits of `type`: exact in both formats.
uint16_t ExactBits(HalfType type, int k) {
  const float v = static_cast<float>(k) / 64.0f;
  uint32_t f;
  std::memcpy(&f, &v, 4);
  if (type == HalfType::kBf16) return static_cast<uint16_t>(f >> 16);
  if (k == 0) return 0;
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t exponent = ((f >> 23) & 0xffu) - 127 + 15;
  return static_cast<uint16_t>(sign | (exponent << 10) | ((f >> 13) & 0x3ffu));
}

float Widen(HalfType type, uint16_t bits) {
  uint32_t f;
  if (type == HalfType::kBf16) {
    f = static_cast<uint32_t>(bits) << 16;
  } else {  // fp16: normal numbers, zeros and subnormals (the gradients may be tiny)
    const uint32_t sign = (bits & 0x8000u) << 16, exponent = (bits >> 10) & 0x1fu,
                   mantissa = bits & 0x3ffu;
    if (exponent == 0) {
      const float m = std::ldexp(static_cast<float>(mantissa), -24);
      return sign ? -m : m;
    }
    if (exponent == 31) return mantissa ? NAN : (sign ? -INFINITY : INFINITY);
    f = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float v;
  std::memcpy(&v, &f, 4);
  return v;
}

// Device buffers from the check's own stream (stream-ordered: nothing here synchronises the
// device or waits for the backend's streams), freed on every path.
struct Buffers {
  cudaStream_t stream;
  std::vector<void*> ptrs;
  ~Buffers() {
    for (void* p : ptrs) cudaFreeAsync(p, stream);
    cudaStreamSynchronize(stream);
  }
  template <typename T>
  T* Get(size_t n, cudaError_t* e) {
    void* p = nullptr;
    if (*e == cudaSuccess) *e = cudaMallocAsync(&p, n * sizeof(T) + 16, stream);
    if (*e == cudaSuccess) ptrs.push_back(p);
    return static_cast<T*>(p);
  }
};

enum class Kernel { kMmaForward, kFlashBackward };

// Why the 16-bit tensors (or, with `type` unset, the fp32 ones) at ref and got differ by more than
// `tol` times the reference's largest magnitude; empty when they do not.
std::string Compare(const char* name, HalfType type, bool half, const void* ref, const void* got,
                    size_t n, double tol, cudaStream_t stream) {
  const size_t bytes = n * (half ? 2 : 4);
  std::vector<uint8_t> r(bytes), g(bytes);
  cudaError_t e = cudaMemcpyAsync(r.data(), ref, bytes, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(g.data(), got, bytes, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return std::string("copying the results: ") + cudaGetErrorString(e);
  auto value = [&](const std::vector<uint8_t>& v, size_t i) -> double {
    if (half) {
      uint16_t bits;
      std::memcpy(&bits, v.data() + 2 * i, 2);
      return Widen(type, bits);
    }
    float f;
    std::memcpy(&f, v.data() + 4 * i, 4);
    return f;
  };
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = value(r, i), b = value(g, i);
    max_ref = std::fmax(max_ref, std::fabs(a));
    const double d = std::fabs(a - b);
    max_diff = std::isnan(d) ? INFINITY : std::fmax(max_diff, d);
  }
  if (max_diff <= tol * max_ref && max_ref > 0) return "";
  char line[160];
  std::snprintf(line, sizeof(line), "%s differs by %.3g where the reference's largest is %.3g",
                name, max_diff, max_ref);
  return line;
}

// An empty string when `kernel` agrees with the reference kernels on `s`, else why not.
std::string CheckShape(Kernel kernel, HalfType type, const AttentionShape& s,
                       cudaStream_t stream) {
  const size_t nq = s.b * s.t * s.heads * s.head_dim, nk = s.b * s.t * s.kv_heads * s.head_dim;
  const size_t nl = s.b * s.heads * s.t;
  cudaError_t e = cudaSuccess;
  Buffers buf{stream, {}};
  uint16_t *q = buf.Get<uint16_t>(nq, &e), *k = buf.Get<uint16_t>(nk, &e),
           *v = buf.Get<uint16_t>(nk, &e), *dout = buf.Get<uint16_t>(nq, &e),
           *out = buf.Get<uint16_t>(nq, &e), *out2 = buf.Get<uint16_t>(nq, &e);
  float *lse = buf.Get<float>(nl, &e), *lse2 = buf.Get<float>(nl, &e);
  uint16_t* grads[2][3];
  for (auto& side : grads) {
    side[0] = buf.Get<uint16_t>(nq, &e);
    side[1] = buf.Get<uint16_t>(nk, &e);
    side[2] = buf.Get<uint16_t>(nk, &e);
  }
  if (e != cudaSuccess) return std::string("cudaMallocAsync: ") + cudaGetErrorString(e);
  uint32_t state = 12345;
  auto fill = [&](uint16_t* dst, size_t n) {
    std::vector<uint16_t> host(n);
    for (uint16_t& x : host) {
      state = state * 1664525u + 1013904223u;
      x = ExactBits(type, static_cast<int>(state >> 25) - 64);
    }
    const cudaError_t copied =
        cudaMemcpyAsync(dst, host.data(), n * 2, cudaMemcpyHostToDevice, stream);
    return copied == cudaSuccess ? cudaStreamSynchronize(stream) : copied;  // `host` goes now
  };
  for (auto [p, n] : {std::pair{q, nq}, {k, nk}, {v, nk}, {dout, nq}}) {
    if (e == cudaSuccess) e = fill(p, n);
  }
  for (auto& side : grads) {
    for (int i = 0; i < 3 && e == cudaSuccess; ++i) {
      e = cudaMemsetAsync(side[i], 0, (i == 0 ? nq : nk) * 2, stream);
    }
  }
  if (e != cudaSuccess) return std::string("copying the inputs: ") + cudaGetErrorString(e);
  const KernelStatus st = [&]() -> KernelStatus {
    MOBIUS_KERNEL_RETURN_IF_ERROR(attention_fwd_reference(type, out, lse, q, k, v, s, stream));
    if (kernel == Kernel::kMmaForward) {
      return attention_mma_fwd(type, out2, lse2, q, k, v, s, stream);
    }
    MOBIUS_KERNEL_RETURN_IF_ERROR(attention_bwd_reference(
        type, grads[0][0], grads[0][1], grads[0][2], dout, q, k, v, out, lse, s, stream));
    return attention_flash_bwd(type, grads[1][0], grads[1][1], grads[1][2], dout, q, k, v, out,
                               lse, s, stream);
  }();
  if (!st.ok()) return st.message();
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return std::string("running the kernels: ") + cudaGetErrorString(e);
  if (kernel == Kernel::kMmaForward) {
    std::string why = Compare("out", type, true, out, out2, nq, 2e-2, stream);
    if (why.empty()) why = Compare("lse", type, false, lse, lse2, nl, 1e-4, stream);
    return why;
  }
  const char* names[3] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    const std::string why =
        Compare(names[i], type, true, grads[0][i], grads[1][i], i == 0 ? nq : nk, 2e-2, stream);
    if (!why.empty()) return why;
  }
  return "";
}

std::string Check(Kernel kernel, HalfType type, int64_t head_dim) {
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return std::string("cudaStreamCreate: ") + cudaGetErrorString(e);
  std::string why;
  // Several tiles both ways, GQA, a window across tiles, a partial last tile.
  for (const AttentionShape& s :
       {AttentionShape{.b = 1, .t = 96, .heads = 2, .kv_heads = 1, .head_dim = head_dim},
        AttentionShape{.b = 2, .t = 150, .heads = 4, .kv_heads = 2, .head_dim = head_dim,
                       .window = 70}}) {
    why = CheckShape(kernel, type, s, stream);
    if (!why.empty()) break;
  }
  cudaStreamDestroy(stream);
  return why;
}

// Check(kernel, type, head_dim) once per device and process; a failure is written to stderr.
bool Checked(Kernel kernel, HalfType type, int64_t head_dim) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, int, int64_t>, bool> checked;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  std::lock_guard<std::mutex> lock(mu);
  const auto key =
      std::make_tuple(static_cast<int>(kernel), device, static_cast<int>(type), head_dim);
  if (auto it = checked.find(key); it != checked.end()) return it->second;
  const std::string why = Check(kernel, type, head_dim);
  if (!why.empty()) {
    std::fprintf(stderr,
                 "mobius: attention: the tiled %s (%s, head_dim %lld) disagrees with the "
                 "reference on device %d (%s); using the %s\n",
                 kernel == Kernel::kMmaForward ? "forward" : "backward", HalfTypeName(type),
                 static_cast<long long>(head_dim), device, why.c_str(),
                 kernel == Kernel::kMmaForward ? "WMMA forward" : "reference backward");
  }
  checked[key] = why.empty();
  return why.empty();
}

}  // namespace

bool AttentionFlashBwdChecked(HalfType type, int64_t head_dim) {
  return Checked(Kernel::kFlashBackward, type, head_dim);
}

bool AttentionMmaFwdChecked(HalfType type, int64_t head_dim) {
  return Checked(Kernel::kMmaForward, type, head_dim);
}

}  // namespace mobius::kernels::cuda
