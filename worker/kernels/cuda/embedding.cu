#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/embedding.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Load;
using internal::Store;

constexpr int kThreads = 256;

template <typename T>
__global__ void embedding_fwd_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe,
                                     int64_t n, int64_t t, int64_t c, int64_t vocab,
                                     int32_t* invalid_count) {
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / c, col = i % c;
    const int32_t tok = tokens[row];
    if (tok < 0 || tok >= vocab) {
      Store(out, i, 0.0f);  // +0: all-zero bits in both formats
      if (col == 0 && invalid_count != nullptr) atomicAdd(invalid_count, 1);
      continue;
    }
    const int64_t e = static_cast<int64_t>(tok) * c + col;
    if (wpe == nullptr) {
      out[i] = wte[e];  // a copy of the bits
    } else {
      Store(out, i, Load(wte, e) + Load(wpe, (row % t) * c + col));
    }
  }
}

template <typename T>
__global__ void embedding_bwd_kernel(float* dwte, const T* dout, const int32_t* tokens, int64_t n,
                                     int64_t c, int64_t vocab, int32_t* invalid_count) {
  const int64_t total = n * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / c, col = i % c;
    const int32_t tok = tokens[row];
    if (tok < 0 || tok >= vocab) {
      if (col == 0 && invalid_count != nullptr) atomicAdd(invalid_count, 1);
      continue;
    }
    atomicAdd(dwte + static_cast<int64_t>(tok) * c + col, Load(dout, i));
  }
}

// dwpe[p, col] += sum over the batch, in batch order.
template <typename T>
__global__ void embedding_pos_bwd_kernel(float* dwpe, const T* dout, int64_t b, int64_t t,
                                         int64_t c) {
  const int64_t total = t * c;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = dwpe[i];
    for (int64_t bi = 0; bi < b; ++bi) sum += Load(dout, bi * total + i);
    dwpe[i] = sum;
  }
}

}  // namespace

KernelStatus embedding_fwd(HalfType type, uint16_t* out, const int32_t* tokens, const uint16_t* wte,
                           const uint16_t* wpe, int64_t b, int64_t t, int64_t c, int64_t vocab,
                           int32_t* invalid_count, cudaStream_t stream) {
  const int64_t n = b * t;
  if (n * c == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    embedding_fwd_kernel<T><<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(
        As<T>(out), tokens, As<T>(wte), As<T>(wpe), n, t, c, vocab, invalid_count);
    return MOBIUS_KERNEL_LAUNCH_STATUS("embedding_fwd_kernel");
  });
}

KernelStatus embedding_bwd(HalfType type, float* dwte, float* dwpe, const uint16_t* dout,
                           const int32_t* tokens, int64_t b, int64_t t, int64_t c, int64_t vocab,
                           int32_t* invalid_count, cudaStream_t stream) {
  const int64_t n = b * t;
  if (n * c == 0) return OkStatus();
  return internal::DispatchHalf(type, [&](auto tag) -> KernelStatus {
    using T = typename decltype(tag)::type;
    embedding_bwd_kernel<T><<<GridFor(n * c, kThreads), kThreads, 0, stream>>>(
        dwte, As<T>(dout), tokens, n, c, vocab, invalid_count);
    MOBIUS_KERNEL_RETURN_IF_ERROR(MOBIUS_KERNEL_LAUNCH_STATUS("embedding_bwd_kernel"));
    if (dwpe == nullptr) return OkStatus();
    embedding_pos_bwd_kernel<T>
        <<<GridFor(t * c, kThreads), kThreads, 0, stream>>>(dwpe, As<T>(dout), b, t, c);
    return MOBIUS_KERNEL_LAUNCH_STATUS("embedding_pos_bwd_kernel");
  });
}

}  // namespace mobius::kernels::cuda
