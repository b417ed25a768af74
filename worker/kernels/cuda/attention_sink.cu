#include "worker/kernels/cuda/attention_sink.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::BlockSum;
using internal::GridFor;
using internal::kWarp;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;      // forward: 8 warps, one (b, t, h) row each
constexpr int kBwdThreads = 1024;  // backward: one block per head
constexpr int kWarpsPerBlock = kThreads / kWarp;

// Row r = (b * T + t) * H + h of out [B, T, H, hd] (a warp each, grid-stride over rows). Lane 0
// reads lse and the sink and broadcasts the factor; no other lane touches lse, so the update is
// race-free.
template <typename T>
__global__ void attention_sink_fwd_kernel(T* out, float* lse, const T* sinks, int64_t rows,
                                          int64_t t, int64_t heads, int64_t hd) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = warp; r < rows; r += warps) {
    const int64_t h = r % heads, bt = r / heads;
    const int64_t at = (bt / t * heads + h) * t + bt % t;  // lse [B, H, T]
    float f = 0.0f;
    if (lane == 0) {
      const float l = lse[at], z = Load(sinks, h);
      const float m = l < z ? z : l;  // std::max(l, z), as the CPU
      const float l2 = m + logf(expf(l - m) + expf(z - m));
      f = expf(l - l2);
      lse[at] = l2;
    }
    f = __shfl_sync(0xffffffffu, f, 0);
    T* o = out + r * hd;
    for (int64_t d = lane; d < hd; d += kWarp) Store(o, d, Load(o, d) * f);
  }
}

// Block h walks rows (b, t) = warp, warp + warps, ...; each lane sums its dimensions of
// dout * out, weighted by the row's exp(z - lse), then one fixed-order block sum.
template <typename T>
__global__ void attention_sink_bwd_kernel(float* dsinks, const T* out, const T* dout,
                                          const float* lse, const T* sinks, int64_t bt_rows,
                                          int64_t t, int64_t heads, int64_t hd) {
  __shared__ float scratch[kWarp];
  const int64_t h = blockIdx.x;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  const float z = Load(sinks, h);
  float acc = 0.0f;
  for (int64_t bt = warp; bt < bt_rows; bt += warps) {
    const float w = expf(z - lse[(bt / t * heads + h) * t + bt % t]);
    const int64_t at = (bt * heads + h) * hd;
    float dot = 0.0f;
    for (int64_t d = lane; d < hd; d += kWarp) dot += Load(dout, at + d) * Load(out, at + d);
    acc += w * dot;
  }
  const float sum = BlockSum(acc, scratch);
  if (threadIdx.x == 0) dsinks[h] -= sum;
}

}  // namespace

KernelStatus attention_sink_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* sinks,
                                int64_t b, int64_t t, int64_t heads, int64_t head_dim,
                                cudaStream_t stream) {
  const int64_t rows = b * t * heads;
  if (rows == 0 || head_dim == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    attention_sink_fwd_kernel<T><<<GridFor(rows, kWarpsPerBlock), kThreads, 0, stream>>>(
        As<T>(out), lse, As<T>(sinks), rows, t, heads, head_dim);
    return MOBIUS_KERNEL_LAUNCH_STATUS("attention_sink_fwd_kernel");
  });
}

KernelStatus attention_sink_bwd(HalfType type, float* dsinks, const uint16_t* out,
                                const uint16_t* dout, const float* lse, const uint16_t* sinks,
                                int64_t b, int64_t t, int64_t heads, int64_t head_dim,
                                cudaStream_t stream) {
  if (b * t * heads == 0 || head_dim == 0) return OkStatus();
  if (heads > 0x7fffffff) return InvalidArgument("attention_sink_bwd: too many heads");
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    attention_sink_bwd_kernel<T><<<static_cast<unsigned int>(heads), kBwdThreads, 0, stream>>>(
        dsinks, As<T>(out), As<T>(dout), lse, As<T>(sinks), b * t, t, heads, head_dim);
    return MOBIUS_KERNEL_LAUNCH_STATUS("attention_sink_bwd_kernel");
  });
}

}  // namespace mobius::kernels::cuda
