// The CPU backend's GEMM: convert bf16 / fp16 operands to fp32 scratch, then OpenBLAS cblas_sgemm.
//
// Why this path (measured by bench/gemm, numbers in docs/benchmarks.md "CPU GEMM"): Debian's
// OpenBLAS 0.3.21 declares cblas_sbgemm in cblas.h but is built without BUILD_BFLOAT16, so the
// symbol is not exported; oneDNN 2.6 (libdnnl-dev) has no bf16 matmul without AVX512-capable
// CPUs and its f32 matmul (after the same conversion) was within run-to-run noise of OpenBLAS
// sgemm, so OpenBLAS (already a dependency, no OpenMP runtime next to our queue threads) is kept.
// No run-time dispatch: with Debian's libraries there is one usable path on every x86-64 CPU.
// Accumulation is fp32 (sgemm); a bf16 or fp16 C is computed in fp32 and rounded once (nearest
// even; fp16 values from 65520 up become +-inf). fp16 is emulated as a storage format, not as an
// arithmetic: GemmParams::half_accumulate (fp16 A, B and C) is accepted and computed exactly like
// the same product without it, fp32 accumulation and one rounding at the end. A device that sums
// in fp16 rounds every partial sum, so its results differ from these by the fp16 accumulation
// error (within the fp16 tolerances of the tests).
//
// Threads: the work runs on the calling thread plus `pool` (the backend's op pool): the 16-bit
// conversions by rows, and the product cut into pieces along the longer of C's two dimensions,
// each piece one single-threaded sgemm call. The cut depends on the shape only (never on the pool
// size), and a piece's elements are the same sgemm arithmetic as in one whole call, so results are
// identical for any number of threads. OpenBLAS's own threads stay off (SetBlasThreads(1), which
// CpuBackend::Create does): they would spin (sched_yield) on the cores our op threads need between
// GEMMs (measured: ~20% of training samples in the kernel's scheduler; docs/benchmarks.md).
//
// Scratch: fp32 copies of 16-bit operands live in thread-local buffers of the calling thread that
// are reused across calls (one set per queue thread); they are workspace, not counted against the
// device memory cap.
//
// Thread-safety: RunCpuGemm may run concurrently on several threads with distinct pools (or none).
#ifndef MOBIUS_WORKER_BACKEND_CPU_CPU_GEMM_H_
#define MOBIUS_WORKER_BACKEND_CPU_CPU_GEMM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "worker/backend/gemm_params.h"

namespace mobius::optim {
class ThreadPool;
}  // namespace mobius::optim

namespace mobius::backend {

// Runs the GEMM now, on the calling thread and `pool` (nullptr: the calling thread alone).
// REQUIRES: ValidateGemm(params).ok().
absl::Status RunCpuGemm(const GemmParams& params, optim::ThreadPool* pool = nullptr);

// How many pieces RunCpuGemm cuts an m x n x k product into (1 for small products); a function of
// the shape only. Exposed for tests.
int64_t CpuGemmPieces(int64_t m, int64_t n, int64_t k);

// OpenBLAS's process-wide thread count (openblas_set_num_threads).
void SetBlasThreads(int threads);

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_CPU_CPU_GEMM_H_
