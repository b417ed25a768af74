// Internal to worker/kernels/cuda/: device helpers shared by the .cu files (never included by host
// C++). bf16 is handled as raw bits (uint16_t), exactly as common/numeric/bf16.h does on the host,
// so a value rounded on the GPU has the same bits as one rounded by the CPU kernels (NaN included).
// fp16 is __half in device code (the same bits as common/numeric/f16.h's uint16_t): a type distinct
// from bf16's uint16_t, so that one kernel template serves bf16, fp16 (and fp32) buffers through
// the Load/Store overloads below; DispatchHalf picks the instantiation from a HalfType.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_DEVICE_UTILS_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_DEVICE_UTILS_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"

namespace mobius::kernels::cuda::internal {

inline constexpr int kWarp = 32;

__device__ __forceinline__ float Bf16ToF32(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// Round to nearest even; NaN -> quiet NaN with the same sign (numeric::Fp32ToBf16).
__device__ __forceinline__ uint16_t F32ToBf16(float value) {
  uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__device__ __forceinline__ float F16ToF32(__half h) { return __half2float(h); }

// Round to nearest even (__float2half_rn: subnormals kept, 65520 and up -> inf); NaN -> quiet NaN
// with the same sign and top payload bits, as numeric::Fp32ToF16 (CUDA's own NaN is canonical).
__device__ __forceinline__ __half F32ToF16(float value) {
  const uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return __ushort_as_half(
        static_cast<unsigned short>(((bits >> 16) & 0x8000u) | 0x7e00u | ((bits >> 13) & 0x3ffu)));
  }
  return __float2half_rn(value);
}

// Typed loads/stores so that one template serves bf16 (uint16_t bits), fp16 (__half) and fp32
// buffers.
__device__ __forceinline__ float Load(const uint16_t* p, int64_t i) { return Bf16ToF32(p[i]); }
__device__ __forceinline__ float Load(const __half* p, int64_t i) { return F16ToF32(p[i]); }
__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ void Store(uint16_t* p, int64_t i, float x) { p[i] = F32ToBf16(x); }
__device__ __forceinline__ void Store(__half* p, int64_t i, float x) { p[i] = F32ToF16(x); }
__device__ __forceinline__ void Store(float* p, int64_t i, float x) { p[i] = x; }

// The device storage type of each 16-bit format, and the host-side dispatch on a HalfType:
//   return DispatchHalf(type, [&](auto tag) {
//     using T = typename decltype(tag)::type;  // uint16_t (bf16) or __half (fp16)
//     kernel<T><<<...>>>(As<T>(out), As<T>(inp), ...);
//     ...
//   });
template <typename T>
struct StorageTag {
  using type = T;
};
template <typename F>
auto DispatchHalf(HalfType type, F&& fn) {
  return type == HalfType::kF16 ? fn(StorageTag<__half>{}) : fn(StorageTag<uint16_t>{});
}
// The API's uint16_t bits as the storage type T (same size and representation).
template <typename T>
T* As(uint16_t* p) {
  return reinterpret_cast<T*>(p);
}
template <typename T>
const T* As(const uint16_t* p) {
  return reinterpret_cast<const T*>(p);
}

__device__ __forceinline__ float WarpSum(float x) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

__device__ __forceinline__ float WarpMax(float x) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}

// Sum over the block; every thread gets the result. REQUIRES: blockDim.x a multiple of 32 and
// <= 1024, all threads call it; `scratch` holds 32 floats in shared memory.
__device__ __forceinline__ float BlockSum(float x, float* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  x = WarpSum(x);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(x);
}

__device__ __forceinline__ float BlockMax(float x, float* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  x = WarpMax(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(x);
}

// Grid size for a grid-stride loop over n items with `threads` per block: enough blocks to fill
// any current GPU several times over, never more than the items need.
inline unsigned int GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  const int64_t cap = 65536;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

// Column sums of a per-element term over the rows of an [N, C] matrix, for parameter gradients
// (norm weights, biases): out_k[j] += sum_n term_k(n, j). A block owns 32 columns (one warp-wide,
// coalesced row segment) and a chunk of kColumnRowChunk rows (more when N needs more than 65535
// chunks), read by 8 row lanes; the 8 lane partials are added
// in a fixed order and the block's sum goes to global memory with one atomicAdd per column. The
// order of those atomics (one per row chunk) is not fixed, so results can differ in the last bits
// from run to run (the CPU kernels are bitwise deterministic; a two-pass reduction with a workspace
// would be).
//
// Term is a functor: static constexpr int kOuts; __device__ void operator()(int64_t row, int64_t
// col, float* acc) adding its kOuts terms to acc; float* out[kOuts] (null entries are skipped).
inline constexpr int kColumnRowLanes = 8;
inline constexpr int64_t kColumnRowChunk = 256;

template <typename Term>
__global__ void column_sums_kernel(Term term, int64_t n, int64_t c, int64_t rows_per_chunk) {
  __shared__ float part[Term::kOuts][kColumnRowLanes][kWarp + 1];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarp + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < n ? r0 + rows_per_chunk : n;
  float acc[Term::kOuts];
#pragma unroll
  for (int k = 0; k < Term::kOuts; ++k) acc[k] = 0.0f;
  if (j < c) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kColumnRowLanes) term(r, j, acc);
  }
#pragma unroll
  for (int k = 0; k < Term::kOuts; ++k) part[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || j >= c) return;
#pragma unroll
  for (int k = 0; k < Term::kOuts; ++k) {
    if (term.out[k] == nullptr) continue;
    float s = 0.0f;
    for (int y = 0; y < kColumnRowLanes; ++y) s += part[k][y][threadIdx.x];
    atomicAdd(term.out[k] + j, s);
  }
}

template <typename Term>
void LaunchColumnSums(const Term& term, int64_t n, int64_t c, cudaStream_t stream) {
  if (n <= 0 || c <= 0) return;
  int64_t rows_per_chunk = kColumnRowChunk;
  while ((n + rows_per_chunk - 1) / rows_per_chunk > 65535) rows_per_chunk *= 2;
  const dim3 grid(static_cast<unsigned int>((c + kWarp - 1) / kWarp),
                  static_cast<unsigned int>((n + rows_per_chunk - 1) / rows_per_chunk));
  column_sums_kernel<Term>
      <<<grid, dim3(kWarp, kColumnRowLanes), 0, stream>>>(term, n, c, rows_per_chunk);
}

}  // namespace mobius::kernels::cuda::internal

#endif  // MOBIUS_WORKER_KERNELS_CUDA_DEVICE_UTILS_CUH_
