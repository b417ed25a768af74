#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/nf4.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Store;

constexpr int kThreads = 256;

// One thread per packed byte (two values).
template <typename T>
__global__ void dequantize_nf4_kernel(T* out, const uint8_t* blob, Nf4BlobFormat f, Nf4Tables t) {
  const float offset = *reinterpret_cast<const float*>(blob);
  const float* group_scales = reinterpret_cast<const float*>(blob + f.scales);
  const uint8_t* codes = blob + f.codes;
  const uint8_t* packed = blob + f.packed;
  const int64_t bytes = (f.n + 1) / 2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < bytes;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = 2 * i;  // an even index: both values are in the same block of 64
    const int64_t blk = v / f.block;
    const float absmax =
        __fadd_rn(__fmul_rn(t.dynamic[codes[blk]], group_scales[blk / f.group]), offset);
    const uint8_t byte = packed[i];
    Store(out, v, __fmul_rn(t.level[byte >> 4], absmax));
    if (v + 1 < f.n) Store(out, v + 1, __fmul_rn(t.level[byte & 0xF], absmax));
  }
}

}  // namespace

KernelStatus dequantize_nf4(HalfType out_type, uint16_t* out, const uint8_t* blob,
                            const Nf4BlobFormat& format, const Nf4Tables& tables,
                            cudaStream_t stream) {
  if (format.n == 0) return OkStatus();
  return internal::DispatchHalf(out_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t bytes = (format.n + 1) / 2;
    dequantize_nf4_kernel<<<GridFor(bytes, kThreads), kThreads, 0, stream>>>(As<T>(out), blob,
                                                                           format, tables);
    return MOBIUS_KERNEL_LAUNCH_STATUS("dequantize_nf4_kernel");
  });
}

}  // namespace mobius::kernels::cuda
