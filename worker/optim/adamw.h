// Host-side AdamW: the optimizer step over fp32 master weights that live in host DRAM.
//
// One fused pass per tensor reads the fp32 gradient, master weight and both moments, updates them in
// place and writes the 16-bit copy that is uploaded to the GPUs (bf16, or fp16 for
// training.precision fp16): 4 fp32 reads + 3 fp32 writes + 1 16-bit write = 30 bytes per parameter,
// so the step is memory-bandwidth bound (mobius.md section 3).
//
// Semantics are PyTorch's torch.optim.AdamW (1.13, foreach or not), per element, step t (1-based):
//   g  = grad * grad_scale                       (grad_scale: clipping factor, 1 for none)
//   p  = p * (1 - lr * weight_decay)             (decoupled decay; weight_decay 0 when !decay)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   p  = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)      (eps outside sqrt)
//   bf16_out = round_to_nearest_even_bf16(p)    (out_fp16: round_to_nearest_even_fp16(p))
// The per-step scalars (bias corrections, step size, decay factor) are computed in double and rounded
// to float once, as PyTorch does with its Python-float hyperparameters.
//
// Kernels: a scalar reference and AVX2+FMA / AVX-512 versions picked at run time. They perform the
// same operations in the same order; the only difference is that the SIMD kernels fuse three
// multiply-adds (the m, v and p updates) into FMAs. After one step from identical state the SIMD result
// differs from the scalar one by about 1 ulp of the operands of each fused multiply-add; the tests
// bound it per tensor by |a - b| <= 1e-6 * |b| + 2^-21 * max|b| (the absolute term covers
// cancellation where m or p pass near 0) and check that the SIMD kernels are bit-identical to the
// scalar formula written with std::fma at those three places (test/worker/optim/adamw_kernel_test.cc).
// The 16-bit copy is always exactly Fp32ToBf16(new master) (common/numeric/bf16.h), or with
// out_fp16 exactly Fp32ToF16(new master) (common/numeric/f16.h: values from 65520 up become +-inf),
// written in the same pass by every kernel.
//
// Thread-safety: AdamWStep, SumOfSquares, ClipScale and the kernel queries are pure functions of
// their arguments; concurrent calls on disjoint buffers are safe. A CpuAdamW object runs one call at a
// time: Step/GlobalGradNorm must not be called concurrently on the same object (they use its pool).
// No buffer may be touched by anyone else while a call that uses it runs.
#ifndef MOBIUS_WORKER_OPTIM_ADAMW_H_
#define MOBIUS_WORKER_OPTIM_ADAMW_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::optim {

class ThreadPool;

// Which implementation runs the element-wise passes.
enum class Kernel {
  kAuto,    // the fastest one this CPU supports: AVX-512 > AVX2 > scalar
  kScalar,  // portable reference, no FMA
  kAvx2,    // AVX2 + FMA, 8 floats per vector
  kAvx512,  // AVX-512 F + BW, 16 floats per vector
};

const char* KernelName(Kernel kernel);
// True if the CPU (and OS) can run `kernel`; kAuto and kScalar are always available.
bool KernelAvailable(Kernel kernel);
// kAuto -> the concrete kernel it selects; other values unchanged.
Kernel ResolveKernel(Kernel kernel);

// Hyperparameters, PyTorch names and defaults except weight_decay (PyTorch: 0.01).
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// OK if every field is finite, lr >= 0, 0 <= beta < 1, eps > 0, weight_decay >= 0.
absl::Status ValidateAdamWConfig(const AdamWConfig& config);

// One tensor's host buffers, each of `n` elements, updated in place. Not owned.
struct ParamBuffers {
  float* master = nullptr;        // [n] fp32 master weights, read and written
  float* m = nullptr;             // [n] fp32 first moment, read and written
  float* v = nullptr;             // [n] fp32 second moment, read and written
  const float* grad = nullptr;    // [n] fp32 gradient (unscaled), read only
  uint16_t* bf16_out = nullptr;   // [n] bf16 bits of the new master; nullptr: not written
  size_t n = 0;
  bool decay = true;              // false: no weight decay (biases, norms)
  bool out_fp16 = false;          // bf16_out receives fp16 bits instead of bf16
};

// One fused AdamW step over one tensor on the calling thread.
// `step` is the 1-based index of this step (bias correction uses it); `grad_scale` multiplies the
// gradient first (a clipping factor from ClipScale, or 1).
// Errors: InvalidArgument for a bad config, step < 1, a non-finite grad_scale, null buffers with
// n > 0; FailedPrecondition if `kernel` is not available on this CPU.
absl::Status AdamWStep(const AdamWConfig& config, int64_t step, float grad_scale,
                       const ParamBuffers& buffers, Kernel kernel = Kernel::kAuto);

// Sum of squares of x[0..n) accumulated in double (the SIMD kernels keep several double
// accumulators, so the result differs from the scalar loop only by double rounding).
double SumOfSquares(const float* x, size_t n, Kernel kernel = Kernel::kAuto);

// PyTorch's clip_grad_norm_ factor: min(1, max_norm / (norm + 1e-6)), returned as the float that
// multiplies the gradients. A +inf norm gives 0 and a NaN norm gives NaN (as PyTorch); callers that
// see a non-finite norm should skip the step rather than apply it.
float ClipScale(double global_norm, double max_norm);

// Multithreaded AdamW over many tensors with its own thread pool.
class CpuAdamW {
 public:
  struct Options {
    AdamWConfig config;
    int num_threads = 0;  // threads doing the work, the caller's included; 0: hardware_concurrency
    Kernel kernel = Kernel::kAuto;
  };

  // Errors: InvalidArgument for a bad config or num_threads < 0; FailedPrecondition if the kernel
  // is not available on this CPU.
  static absl::StatusOr<std::unique_ptr<CpuAdamW>> Create(const Options& options);
  ~CpuAdamW();

  CpuAdamW(const CpuAdamW&) = delete;
  CpuAdamW& operator=(const CpuAdamW&) = delete;

  // Updates every tensor in `params` (step is 1-based and the same for all). Work is split into
  // chunks of kChunkElements spread over the pool; the result does not depend on the thread count.
  // Errors as AdamWStep; on an error nothing has been modified.
  absl::Status Step(int64_t step, float grad_scale, std::span<const ParamBuffers> params);

  // sqrt(sum of squares of all `grads`), accumulated in double; per-chunk partial sums are added in a
  // fixed order, so the result is the same for every thread count. Null data with size 0 is allowed.
  double GlobalGradNorm(std::span<const std::span<const float>> grads);

  // The per-chunk partial sums GlobalGradNorm adds, for one tensor: partials[c] = sum of squares
  // of grad[c * kChunkElements, ...) (ceil(size / kChunkElements) of them), spread over the pool.
  // Adding every tensor's partials in order gives exactly GlobalGradNorm's sum, so a caller can
  // compute the norm one tensor at a time (without all gradients in memory at once).
  void ChunkSquares(std::span<const float> grad, double* partials);

  // Changes the learning rate for later steps (an LR schedule calls this before each Step).
  // Errors: InvalidArgument if lr is negative or not finite.
  absl::Status SetLearningRate(double lr);

  const AdamWConfig& config() const { return config_; }
  Kernel kernel() const { return kernel_; }  // never kAuto
  int num_threads() const;

  // Elements per unit of work: 64 Ki floats (~2 MB of traffic), a multiple of every vector width.
  static constexpr size_t kChunkElements = size_t{1} << 16;

 private:
  CpuAdamW(const AdamWConfig& config, Kernel kernel, int num_threads);

  AdamWConfig config_;
  Kernel kernel_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace mobius::optim

#endif  // MOBIUS_WORKER_OPTIM_ADAMW_H_
