#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/embedding.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::Bf16ToF32;
using internal::F32ToBf16;
using internal::GridFor;

constexpr int kThreads = 256;

__global__ void embedding_fwd_kernel(uint16_t* out, const int32_t* tokens, const uint16_t* wte,
                                     const uint16_t* wpe, int64_t n, int64_t t, int64_t c,
                                     int64_t vocab, int32_t* invalid_count) {
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / c, col = i % c;
    const int32_t tok = tokens[row];
    if (tok < 0 || tok >= vocab) {
      out[i] = 0;
      if (col == 0 && invalid_count != nullptr) atomicAdd(invalid_count, 1);
      continue;
    }
    const uint16_t e = wte[static_cast<int64_t>(tok) * c + col];
    out[i] = wpe == nullptr ? e : F32ToBf16(Bf16ToF32(e) + Bf16ToF32(wpe[(row % t) * c + col]));
  }
}

__global__ void embedding_bwd_kernel(float* dwte, const uint16_t* dout, const int32_t* tokens,
                                     int64_t n, int64_t c, int64_t vocab, int32_t* invalid_count) {
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / c, col = i % c;
    const int32_t tok = tokens[row];
    if (tok < 0 || tok >= vocab) {
      if (col == 0 && invalid_count != nullptr) atomicAdd(invalid_count, 1);
      continue;
    }
    atomicAdd(dwte + static_cast<int64_t>(tok) * c + col, Bf16ToF32(dout[i]));
  }
}

// dwpe[p, col] += sum over the batch, in batch order.
__global__ void embedding_pos_bwd_kernel(float* dwpe, const uint16_t* dout, int64_t b, int64_t t,
                                         int64_t c) {
  const int64_t total = t * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = dwpe[i];
    for (int64_t bi = 0; bi < b; ++bi) sum += Bf16ToF32(dout[bi * total + i]);
    dwpe[i] = sum;
  }
}

}  // namespace

KernelStatus embedding_fwd(uint16_t* out, const int32_t* tokens, const uint16_t* wte,
                           const uint16_t* wpe, int64_t b, int64_t t, int64_t c, int64_t vocab,
                           int32_t* invalid_count, cudaStream_t stream) {
  const int64_t n = b * t;
  if (n * c == 0) return OkStatus();
  embedding_fwd_kernel<<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(
      out, tokens, wte, wpe, n, t, c, vocab, invalid_count);
  return MOBIUS_KERNEL_LAUNCH_STATUS("embedding_fwd_kernel");
}

KernelStatus embedding_bwd(float* dwte, float* dwpe, const uint16_t* dout, const int32_t* tokens,
                           int64_t b, int64_t t, int64_t c, int64_t vocab, int32_t* invalid_count,
                           cudaStream_t stream) {
  const int64_t n = b * t;
  if (n * c == 0) return OkStatus();
  embedding_bwd_kernel<<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(dwte, dout, tokens, n, c,
                                                                          vocab, invalid_count);
  MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("embedding_bwd_kernel"));
  if (dwpe == nullptr) return OkStatus();
  embedding_pos_bwd_kernel<<<GridFor(t * c, kThreads), kThreads, 0, stream>>>(dwpe, dout, b, t, c);
  return MOBIUS_KERNEL_LAUNCH_STATUS("embedding_pos_bwd_kernel");
}

}  // namespace mobius::kernels::cuda
