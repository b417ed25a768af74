#include "worker/backend/cuda/smoke_kernel.cuh"

#include <cuda_runtime.h>

namespace mobius::cuda {
namespace {

__global__ void saxpy_fwd_kernel(float a, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

std::string Err(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

}  // namespace

std::string SaxpyOnDevice(int ordinal, float a, const std::vector<float>& x,
                          const std::vector<float>& y, std::vector<float>* out) {
  const int n = static_cast<int>(x.size());
  if (y.size() != x.size()) return "x and y differ in length";
  cudaError_t e = cudaSetDevice(ordinal);
  if (e != cudaSuccess) return Err(e);
  float *dx = nullptr, *dy = nullptr, *dout = nullptr;
  const size_t bytes = sizeof(float) * static_cast<size_t>(n);
  std::string result;
  if ((e = cudaMalloc(&dx, bytes)) != cudaSuccess || (e = cudaMalloc(&dy, bytes)) != cudaSuccess ||
      (e = cudaMalloc(&dout, bytes)) != cudaSuccess ||
      (e = cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice)) != cudaSuccess ||
      (e = cudaMemcpy(dy, y.data(), bytes, cudaMemcpyHostToDevice)) != cudaSuccess) {
    result = Err(e);
  } else {
    saxpy_fwd_kernel<<<(n + 255) / 256, 256>>>(a, dx, dy, dout, n);
    out->resize(x.size());
    if ((e = cudaGetLastError()) != cudaSuccess ||
        (e = cudaMemcpy(out->data(), dout, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess) {
      result = Err(e);
    }
  }
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dout);
  return result;
}

}  // namespace mobius::cuda
