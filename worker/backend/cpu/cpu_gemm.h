// The CPU backend's GEMM: convert bf16 operands to fp32 scratch, then OpenBLAS cblas_sgemm.
//
// Why this path (measured by bench/gemm, numbers in docs/benchmarks.md "CPU GEMM"): Debian's
// OpenBLAS 0.3.21 declares cblas_sbgemm in cblas.h but is built without BUILD_BFLOAT16, so the
// symbol is not exported; oneDNN 2.6 (libdnnl-dev) has no bf16 matmul without AVX512-capable
// CPUs and its f32 matmul (after the same conversion) was within run-to-run noise of OpenBLAS
// sgemm, so OpenBLAS (already a dependency, no OpenMP runtime next to our queue threads) is kept.
// No run-time dispatch: with Debian's libraries there is one usable path on every x86-64 CPU.
// The single-threaded conversion costs ~10-15% of a transformer-shape GEMM (bench "sgemm only");
// converting weights once per stage upload, or inside the packing, is the known next step.
// Accumulation is fp32 (sgemm); a bf16 C is computed in fp32 and rounded once (nearest even).
//
// Threads: OpenBLAS's thread count is process-wide (openblas_set_num_threads); CpuBackend sets it
// once from CpuBackendOptions::blas_threads. Each GEMM runs on the calling (queue) thread plus up
// to blas_threads - 1 OpenBLAS threads.
//
// Scratch: fp32 copies of bf16 operands live in thread-local buffers that are reused across calls
// (one set per queue thread); they are workspace, not counted against the device memory cap.
//
// Thread-safety: RunCpuGemm may run concurrently on several threads.
#ifndef MOBIUS_WORKER_BACKEND_CPU_CPU_GEMM_H_
#define MOBIUS_WORKER_BACKEND_CPU_CPU_GEMM_H_

#include "absl/status/status.h"
#include "worker/backend/gemm_params.h"

namespace mobius::backend {

// Runs the GEMM now. REQUIRES: ValidateGemm(params).ok().
absl::Status RunCpuGemm(const GemmParams& params);

// OpenBLAS's process-wide thread count (openblas_set_num_threads / openblas_get_num_threads).
void SetBlasThreads(int threads);
int BlasThreads();
// "OpenBLAS <config> core=<corename>" for logs.
const char* BlasDescription();

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_CPU_CPU_GEMM_H_
