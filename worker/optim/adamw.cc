#include "worker/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/optim/adamw_kernels.h"
#include "worker/optim/thread_pool.h"

namespace mobius::optim {
namespace {

using internal::AdamWScalars;

bool CpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

bool CpuHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

internal::AdamWKernelFn AdamWKernelFor(Kernel kernel) {
  switch (kernel) {
    case Kernel::kAvx512: return internal::AdamWAvx512Kernel;
    case Kernel::kAvx2: return internal::AdamWAvx2Kernel;
    default: return internal::AdamWScalarKernel;
  }
}

internal::SumSquaresFn SumSquaresFor(Kernel kernel) {
  switch (kernel) {
    case Kernel::kAvx512: return internal::SumSquaresAvx512;
    case Kernel::kAvx2: return internal::SumSquaresAvx2;
    default: return internal::SumSquaresScalar;
  }
}

// The per-step constants, computed in double like PyTorch's Python floats, rounded once to float.
AdamWScalars ScalarsFor(const AdamWConfig& c, int64_t step, float grad_scale, bool decay) {
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(c.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(c.beta2, t);
  AdamWScalars s;
  s.grad_scale = grad_scale;
  s.decay = decay ? static_cast<float>(1.0 - c.lr * c.weight_decay) : 1.0f;
  s.beta1 = static_cast<float>(c.beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - c.beta1);
  s.beta2 = static_cast<float>(c.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - c.beta2);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.neg_step_size = static_cast<float>(-(c.lr / bias_correction1));
  s.eps = static_cast<float>(c.eps);
  return s;
}

internal::HalfOut OutFormat(const ParamBuffers& b) {
  return b.out_fp16 ? internal::HalfOut::kF16 : internal::HalfOut::kBf16;
}

absl::Status ValidateStepArgs(int64_t step, float grad_scale, const ParamBuffers& b,
                              size_t index) {
  if (step < 1) return absl::InvalidArgumentError(absl::StrCat("AdamW step ", step, " < 1"));
  if (!std::isfinite(grad_scale)) {
    return absl::InvalidArgumentError(absl::StrCat("AdamW grad_scale ", grad_scale,
                                                   " is not finite"));
  }
  if (b.n > 0 && (b.master == nullptr || b.m == nullptr || b.v == nullptr || b.grad == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW tensor ", index, " (", b.n, " elements) has a null buffer"));
  }
  return absl::OkStatus();
}

absl::Status CheckKernel(Kernel kernel) {
  if (KernelAvailable(kernel)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("optimizer kernel ", KernelName(kernel), " is not supported by this CPU"));
}

}  // namespace

const char* KernelName(Kernel kernel) {
  switch (kernel) {
    case Kernel::kAuto: return "auto";
    case Kernel::kScalar: return "scalar";
    case Kernel::kAvx2: return "avx2";
    case Kernel::kAvx512: return "avx512";
  }
  return "unknown";
}

bool KernelAvailable(Kernel kernel) {
  switch (kernel) {
    case Kernel::kAuto:
    case Kernel::kScalar: return true;
    case Kernel::kAvx2: return CpuHasAvx2();
    case Kernel::kAvx512: return CpuHasAvx512();
  }
  return false;
}

Kernel ResolveKernel(Kernel kernel) {
  if (kernel != Kernel::kAuto) return kernel;
  if (CpuHasAvx512()) return Kernel::kAvx512;
  if (CpuHasAvx2()) return Kernel::kAvx2;
  return Kernel::kScalar;
}

absl::Status ValidateAdamWConfig(const AdamWConfig& c) {
  const bool ok = std::isfinite(c.lr) && c.lr >= 0 && std::isfinite(c.beta1) && c.beta1 >= 0 &&
                  c.beta1 < 1 && std::isfinite(c.beta2) && c.beta2 >= 0 && c.beta2 < 1 &&
                  std::isfinite(c.eps) && c.eps > 0 && std::isfinite(c.weight_decay) &&
                  c.weight_decay >= 0;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid AdamW config: lr=", c.lr, " beta1=", c.beta1, " beta2=", c.beta2, " eps=", c.eps,
      " weight_decay=", c.weight_decay,
      " (need lr >= 0, 0 <= beta < 1, eps > 0, weight_decay >= 0, all finite)"));
}

absl::Status AdamWStep(const AdamWConfig& config, int64_t step, float grad_scale,
                       const ParamBuffers& b, Kernel kernel) {
  if (absl::Status s = ValidateAdamWConfig(config); !s.ok()) return s;
  if (absl::Status s = ValidateStepArgs(step, grad_scale, b, 0); !s.ok()) return s;
  if (absl::Status s = CheckKernel(kernel); !s.ok()) return s;
  const AdamWScalars scalars = ScalarsFor(config, step, grad_scale, b.decay);
  AdamWKernelFor(ResolveKernel(kernel))(scalars, b.master, b.m, b.v, b.grad, b.bf16_out,
                                        OutFormat(b), b.n);
  return absl::OkStatus();
}

double SumOfSquares(const float* x, size_t n, Kernel kernel) {
  if (n == 0) return 0.0;
  if (!KernelAvailable(kernel)) kernel = Kernel::kAuto;
  return SumSquaresFor(ResolveKernel(kernel))(x, n);
}

float ClipScale(double global_norm, double max_norm) {
  const double coef = max_norm / (global_norm + 1e-6);
  if (std::isnan(coef)) return static_cast<float>(coef);
  return static_cast<float>(std::min(1.0, coef));
}

// ---------------------------------------------------------------------------------------------
// CpuAdamW

namespace {

struct Chunk {
  size_t tensor;
  size_t begin;
  size_t end;
};

// Fixed-size pieces of every tensor, in tensor order: the split depends only on the sizes.
template <typename SizeOf>
std::vector<Chunk> SplitIntoChunks(size_t num_tensors, SizeOf size_of) {
  std::vector<Chunk> chunks;
  for (size_t t = 0; t < num_tensors; ++t) {
    const size_t n = size_of(t);
    for (size_t begin = 0; begin < n; begin += CpuAdamW::kChunkElements) {
      chunks.push_back({t, begin, std::min(n, begin + CpuAdamW::kChunkElements)});
    }
  }
  return chunks;
}

}  // namespace

CpuAdamW::CpuAdamW(const AdamWConfig& config, Kernel kernel, int num_threads)
    : config_(config), kernel_(kernel), pool_(std::make_unique<ThreadPool>(num_threads)) {}

CpuAdamW::~CpuAdamW() = default;

absl::StatusOr<std::unique_ptr<CpuAdamW>> CpuAdamW::Create(const Options& options) {
  if (absl::Status s = ValidateAdamWConfig(options.config); !s.ok()) return s;
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CpuAdamW num_threads ", options.num_threads, " < 0"));
  }
  if (absl::Status s = CheckKernel(options.kernel); !s.ok()) return s;
  int threads = options.num_threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  return std::unique_ptr<CpuAdamW>(
      new CpuAdamW(options.config, ResolveKernel(options.kernel), threads));
}

int CpuAdamW::num_threads() const { return pool_->num_threads(); }

absl::Status CpuAdamW::SetLearningRate(double lr) {
  AdamWConfig next = config_;
  next.lr = lr;
  if (absl::Status s = ValidateAdamWConfig(next); !s.ok()) return s;
  config_ = next;
  return absl::OkStatus();
}

absl::Status CpuAdamW::Step(int64_t step, float grad_scale, std::span<const ParamBuffers> params) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (absl::Status s = ValidateStepArgs(step, grad_scale, params[i], i); !s.ok()) return s;
  }
  const AdamWScalars with_decay = ScalarsFor(config_, step, grad_scale, true);
  const AdamWScalars without_decay = ScalarsFor(config_, step, grad_scale, false);
  const internal::AdamWKernelFn kernel = AdamWKernelFor(kernel_);
  const std::vector<Chunk> chunks =
      SplitIntoChunks(params.size(), [&](size_t t) { return params[t].n; });
  pool_->ParallelFor(chunks.size(), [&](size_t c) {
    const Chunk& chunk = chunks[c];
    const ParamBuffers& b = params[chunk.tensor];
    const size_t at = chunk.begin;
    kernel(b.decay ? with_decay : without_decay, b.master + at, b.m + at, b.v + at, b.grad + at,
           b.bf16_out != nullptr ? b.bf16_out + at : nullptr, OutFormat(b),
           chunk.end - chunk.begin);
  });
  return absl::OkStatus();
}

void CpuAdamW::ChunkSquares(std::span<const float> grad, double* partials) {
  const size_t chunks = (grad.size() + kChunkElements - 1) / kChunkElements;
  const internal::SumSquaresFn sum_squares = SumSquaresFor(kernel_);
  pool_->ParallelFor(chunks, [&](size_t c) {
    const size_t begin = c * kChunkElements;
    partials[c] = sum_squares(grad.data() + begin, std::min(grad.size(), begin + kChunkElements) - begin);
  });
}

double CpuAdamW::GlobalGradNorm(std::span<const std::span<const float>> grads) {
  const std::vector<Chunk> chunks =
      SplitIntoChunks(grads.size(), [&](size_t t) { return grads[t].size(); });
  std::vector<double> partial(chunks.size(), 0.0);
  const internal::SumSquaresFn sum_squares = SumSquaresFor(kernel_);
  pool_->ParallelFor(chunks.size(), [&](size_t c) {
    const Chunk& chunk = chunks[c];
    partial[c] = sum_squares(grads[chunk.tensor].data() + chunk.begin, chunk.end - chunk.begin);
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return std::sqrt(total);
}

}  // namespace mobius::optim
