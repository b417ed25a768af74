// A minimal device round trip used by the GPU smoke test: proves that the kernels were compiled for
// this device's architecture and that H2D, launch and D2H work. Plain C++ interface.
#ifndef MOBIUS_WORKER_BACKEND_CUDA_SMOKE_KERNEL_CUH_
#define MOBIUS_WORKER_BACKEND_CUDA_SMOKE_KERNEL_CUH_

#include <string>
#include <vector>

namespace mobius::cuda {

// out[i] = a * x[i] + y[i] computed on device `ordinal`. Returns "" on success, else the CUDA
// error name and message.
std::string SaxpyOnDevice(int ordinal, float a, const std::vector<float>& x,
                          const std::vector<float>& y, std::vector<float>* out);

}  // namespace mobius::cuda

#endif  // MOBIUS_WORKER_BACKEND_CUDA_SMOKE_KERNEL_CUH_
