// CudaBackend's ops: validate with the shared op_params.h / gemm_params.h functions, then launch
// the worker/kernels/cuda/ kernel on the queue's stream (CudaBackend::Launch keeps the queue's
// first error), in the 16-bit format each op's type fields name (bf16 or fp16: the kernels'
// HalfType). Data errors (token ids, targets) are counted into the queue's device counters and
// reported by Synchronize.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/numeric/nf4.h"

#include "worker/backend/cuda/cuda_backend_impl.h"
#include "worker/kernels/cuda/adamw.cuh"
#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/attention_sink.cuh"
#include "worker/kernels/cuda/attention_cached.cuh"
#include "worker/kernels/cuda/bias.cuh"
#include "worker/kernels/cuda/cast.cuh"
#include "worker/kernels/cuda/cross_entropy.cuh"
#include "worker/kernels/cuda/dropout.cuh"
#include "worker/kernels/cuda/embedding.cuh"
#include "worker/kernels/cuda/gelu.cuh"
#include "worker/kernels/cuda/layernorm.cuh"
#include "worker/kernels/cuda/moe.cuh"
#include "worker/kernels/cuda/nf4.cuh"
#include "worker/kernels/cuda/residual.cuh"
#include "worker/kernels/cuda/rmsnorm.cuh"
#include "worker/kernels/cuda/rope.cuh"
#include "worker/kernels/cuda/sum_squares.cuh"
#include "worker/kernels/cuda/swiglu.cuh"

namespace mobius::backend {
namespace {

namespace kc = ::mobius::kernels::cuda;
using kc::KernelStatus;

// Raw 16-bit bits (bf16 or fp16, as the op's dtype says) and fp32 views of the ops' void pointers.
uint16_t* Bits(void* p) { return static_cast<uint16_t*>(p); }
const uint16_t* Bits(const void* p) { return static_cast<const uint16_t*>(p); }
float* F32(void* p) { return static_cast<float*>(p); }
const float* F32(const void* p) { return static_cast<const float*>(p); }

// The kernels' format of a 16-bit DType. REQUIRES IsHalf(t) (the shared Validate* functions check
// every dtype field an op reads this way).
kc::HalfType Half(DType t) { return t == DType::kF16 ? kc::HalfType::kF16 : kc::HalfType::kBf16; }

kc::GemmType Type(DType t) {
  switch (t) {
    case DType::kBf16: return kc::GemmType::kBf16;
    case DType::kF16: return kc::GemmType::kF16;
    case DType::kFp32: break;
  }
  return kc::GemmType::kFp32;
}

kc::AttentionShape Shape(const AttentionShapeParams& s) {
  kc::AttentionShape out;
  out.b = s.b;
  out.t = s.t;
  out.heads = s.heads;
  out.kv_heads = s.kv_heads;
  out.head_dim = s.head_dim;
  out.window = s.window;
  return out;
}

// The GEMM type combinations this backend runs (cuda_ops.cc Gemm: cuBLASLt's own, plus an fp32
// operand rounded to the other operand's 16-bit type, plus fp32 x fp32 into a 16-bit C through
// fp32 scratch). The rest has no cuBLASLt type set and is refused at enqueue rather than
// converted lossily: two different 16-bit inputs, or 16-bit inputs into the other 16-bit C.
absl::Status CheckGemmTypes(const GemmParams& p) {
  const bool a32 = p.a_type == DType::kFp32, b32 = p.b_type == DType::kFp32;
  if (a32 && b32) return absl::OkStatus();
  const DType in = a32 ? p.b_type : p.a_type;
  if ((!a32 && !b32 && p.a_type != p.b_type) || (IsHalf(p.c_type) && p.c_type != in)) {
    return absl::UnimplementedError(absl::StrCat(
        "gemm on CUDA: a ", DTypeName(p.a_type), ", b ", DTypeName(p.b_type), ", c ",
        DTypeName(p.c_type),
        " has no cuBLASLt type set (16-bit inputs must share one type, and a 16-bit C must be "
        "that type); cast an operand first"));
  }
  return absl::OkStatus();
}

}  // namespace

#define MOBIUS_VALIDATE(expr) \
  if (absl::Status s = (expr); !s.ok()) return s

absl::Status CudaBackend::Gemm(Queue& queue, const GemmParams& p) {
  MOBIUS_VALIDATE(ValidateGemm(p));
  MOBIUS_VALIDATE(CheckGemmTypes(p));
  kc::GemmArgs a;
  a.m = p.m;
  a.n = p.n;
  a.k = p.k;
  a.trans_a = p.trans_a;
  a.trans_b = p.trans_b;
  a.alpha = p.alpha;
  a.beta = p.beta;
  a.a_type = Type(p.a_type);
  a.a = p.a;
  a.lda = p.lda;
  a.stride_a = p.stride_a;
  a.b_type = Type(p.b_type);
  a.b = p.b;
  a.ldb = p.ldb;
  a.stride_b = p.stride_b;
  a.c_type = Type(p.c_type);
  a.c = p.c;
  a.ldc = p.ldc;
  a.stride_c = p.stride_c;
  a.batch = p.batch;
  // fp16 A, B and C (ValidateGemm): CUBLAS_COMPUTE_16F with fp16 alpha and beta.
  a.half_accumulate = p.half_accumulate;
  if (p.a_type == DType::kFp32 && p.b_type == DType::kFp32 && IsHalf(p.c_type)) {
    // fp32 x fp32 into a 16-bit C (the LoRA term added to a 16-bit output): cuBLASLt has no such
    // type set, so C goes through fp32 scratch (stream-ordered, outside the cap like the mixed
    // case's operand): widened, accumulated into by an fp32 GEMM, rounded back once. Elements
    // between rows (ldc > n) are widened and rounded back unchanged.
    const kc::HalfType c_half = Half(p.c_type);
    const int64_t span =
        p.m == 0 || p.n == 0 ? 0 : (p.m - 1) * p.ldc + p.n + (p.batch - 1) * p.stride_c;
    return Launch(queue, [&](CudaQueue& q) -> KernelStatus {
      if (span == 0) return kc::OkStatus();
      void* scratch = nullptr;
      const cudaError_t e = cudaMallocAsync(&scratch, static_cast<size_t>(span) * 4, q.stream());
      if (e != cudaSuccess) {
        cudaGetLastError();
        return kc::FromCudaError(e, "cudaMallocAsync (gemm fp32 C)", __FILE__, __LINE__);
      }
      KernelStatus st = kc::cast_half_to_fp32(c_half, F32(scratch), Bits(p.c), span, q.stream());
      if (st.ok()) {
        kc::GemmArgs f = a;
        f.c_type = kc::GemmType::kFp32;
        f.c = scratch;
        std::lock_guard<std::mutex> lock(gemm_mu_);
        st = gemm_->Run(f, q.stream());
      }
      if (st.ok()) st = kc::cast_fp32_to_half(c_half, Bits(p.c), F32(scratch), span, q.stream());
      cudaFreeAsync(scratch, q.stream());
      return st;
    });
  }
  if (p.a_type == p.b_type) {
    // Argument errors the shared validation cannot see (alpha/beta beyond fp16 with
    // half_accumulate) are returned here, at enqueue, not as the queue's error.
    if (KernelStatus st = kc::CheckGemmArgs(a); !st.ok()) return FromKernel(st);
    return Launch(queue, [&](CudaQueue& q) {
      std::lock_guard<std::mutex> lock(gemm_mu_);  // the plan cache is not thread-safe
      return gemm_->Run(a, q.stream());
    });
  }
  // Mixed fp32 x 16-bit (the runtime's backward: an fp32 activation gradient times 16-bit weights
  // or activations): the fp32 operand is rounded to the other operand's type into stream-ordered
  // scratch memory (cudaMallocAsync, outside the cap: at most one operand's size, covered by
  // kCudaReserveBytes) and the GEMM runs on tensor cores with fp32 accumulation. The CPU backend
  // multiplies the fp32 operand unrounded: the two differ by one rounding of that operand
  // (relative 2^-9 in bf16, 2^-12 in fp16), which cuda_backend_test bounds; in fp16 an element
  // beyond 65504 also becomes +-inf here (the loss scaler of a fp16 job sees it; the CPU's result
  // stays finite) and one below 2^-25 becomes 0.
  const bool a_is_fp32 = p.a_type == DType::kFp32;
  const DType half = a_is_fp32 ? p.b_type : p.a_type;
  const int64_t rows = a_is_fp32 ? (p.trans_a ? p.k : p.m) : (p.trans_b ? p.n : p.k);
  const int64_t cols = a_is_fp32 ? (p.trans_a ? p.m : p.k) : (p.trans_b ? p.k : p.n);
  const int64_t ld = a_is_fp32 ? p.lda : p.ldb;
  const int64_t stride = a_is_fp32 ? p.stride_a : p.stride_b;
  const int64_t span = rows == 0 || cols == 0 || p.k == 0
                           ? 0
                           : (rows - 1) * ld + cols + (p.batch - 1) * stride;
  return Launch(queue, [&](CudaQueue& q) -> KernelStatus {
    void* scratch = nullptr;
    if (span > 0) {
      const cudaError_t e = cudaMallocAsync(&scratch, static_cast<size_t>(span) * 2, q.stream());
      if (e != cudaSuccess) {
        cudaGetLastError();
        return kc::FromCudaError(e, "cudaMallocAsync (gemm operand)", __FILE__, __LINE__);
      }
      const float* src = static_cast<const float*>(a_is_fp32 ? p.a : p.b);
      KernelStatus st = kc::cast_fp32_to_half(Half(half), Bits(scratch), src, span, q.stream());
      if (!st.ok()) {
        cudaFreeAsync(scratch, q.stream());
        return st;
      }
      (a_is_fp32 ? a.a : a.b) = scratch;
    }
    (a_is_fp32 ? a.a_type : a.b_type) = Type(half);
    KernelStatus st;
    {
      std::lock_guard<std::mutex> lock(gemm_mu_);
      st = gemm_->Run(a, q.stream());
    }
    if (scratch != nullptr) cudaFreeAsync(scratch, q.stream());
    return st;
  });
}

absl::Status CudaBackend::Zero(Queue& queue, const ZeroParams& p) {
  MOBIUS_VALIDATE(ValidateZero(p));
  if (p.bytes == 0) return absl::OkStatus();
  return Launch(queue, [&](CudaQueue& q) -> KernelStatus {
    const cudaError_t e = cudaMemsetAsync(p.dst, 0, p.bytes, q.stream());
    if (e != cudaSuccess) {
      cudaGetLastError();
      return kc::FromCudaError(e, "cudaMemsetAsync", __FILE__, __LINE__);
    }
    return kc::OkStatus();
  });
}

absl::Status CudaBackend::Cast(Queue& queue, const CastParams& p) {
  MOBIUS_VALIDATE(ValidateCast(p));
  return Launch(queue, [&](CudaQueue& q) -> KernelStatus {
    if (p.accumulate) {  // dst fp32 (validated)
      return p.src_type == DType::kFp32
                 ? kc::add_fp32_to_fp32(F32(p.dst), F32(p.src), p.n, q.stream())
                 : kc::add_half_to_fp32(Half(p.src_type), F32(p.dst), Bits(p.src), p.n,
                                        q.stream());
    }
    if (p.src_type == p.dst_type) {
      const size_t bytes = static_cast<size_t>(p.n) * DTypeBytes(p.src_type);
      if (bytes == 0) return kc::OkStatus();
      const cudaError_t e =
          cudaMemcpyAsync(p.dst, p.src, bytes, cudaMemcpyDeviceToDevice, q.stream());
      if (e != cudaSuccess) {
        cudaGetLastError();
        return kc::FromCudaError(e, "cudaMemcpyAsync", __FILE__, __LINE__);
      }
      return kc::OkStatus();
    }
    if (p.src_type == DType::kFp32) {
      return kc::cast_fp32_to_half(Half(p.dst_type), Bits(p.dst), F32(p.src), p.n, q.stream());
    }
    if (p.dst_type == DType::kFp32) {
      return kc::cast_half_to_fp32(Half(p.src_type), F32(p.dst), Bits(p.src), p.n, q.stream());
    }
    return kc::cast_half_to_half(Half(p.dst_type), Half(p.src_type), Bits(p.dst), Bits(p.src),
                                 p.n, q.stream());
  });
}

absl::Status CudaBackend::EmbeddingForward(Queue& queue, const EmbeddingParams& p) {
  MOBIUS_VALIDATE(ValidateEmbedding(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::embedding_fwd(Half(p.dtype), Bits(p.out), p.tokens, Bits(p.wte), Bits(p.wpe), p.b,
                             p.t, p.c, p.vocab, q.counter(kBadTokenIds), q.stream());
  });
}

absl::Status CudaBackend::EmbeddingBackward(Queue& queue, const EmbeddingBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateEmbeddingBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::embedding_bwd(Half(p.dtype), p.dwte, p.dwpe, Bits(p.dout), p.tokens, p.b, p.t, p.c,
                             p.vocab, q.counter(kBadTokenIds), q.stream());
  });
}

absl::Status CudaBackend::NormForward(Queue& queue, const NormParams& p) {
  MOBIUS_VALIDATE(ValidateNorm(p));
  return Launch(queue, [&](CudaQueue& q) {
    if (p.op == NormOp::kLayerNorm) {
      return kc::layernorm_fwd(Half(p.dtype), Bits(p.out), p.mean, p.rstd, Bits(p.inp),
                               Bits(p.weight), Bits(p.bias), p.n, p.c, p.eps, q.stream());
    }
    return kc::rmsnorm_fwd(Half(p.dtype), Bits(p.out), p.rstd, Bits(p.inp), Bits(p.weight), p.n,
                           p.c, p.eps, q.stream());
  });
}

absl::Status CudaBackend::NormBackward(Queue& queue, const NormBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateNormBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    const kc::HalfType t = Half(p.dtype);
    const bool f32 = p.dinp_type == DType::kFp32;  // else dinp has the op's dtype (validated)
    if (p.op == NormOp::kLayerNorm) {
      return f32 ? kc::layernorm_bwd(t, F32(p.dinp), p.dweight, p.dbias, Bits(p.dout),
                                     Bits(p.inp), Bits(p.weight), p.mean, p.rstd, p.n, p.c,
                                     q.stream())
                 : kc::layernorm_bwd(t, Bits(p.dinp), p.dweight, p.dbias, Bits(p.dout),
                                     Bits(p.inp), Bits(p.weight), p.mean, p.rstd, p.n, p.c,
                                     q.stream());
    }
    return f32 ? kc::rmsnorm_bwd(t, F32(p.dinp), p.dweight, Bits(p.dout), Bits(p.inp),
                                 Bits(p.weight), p.rstd, p.n, p.c, q.stream())
               : kc::rmsnorm_bwd(t, Bits(p.dinp), p.dweight, Bits(p.dout), Bits(p.inp),
                                 Bits(p.weight), p.rstd, p.n, p.c, q.stream());
  });
}

absl::Status CudaBackend::GeluForward(Queue& queue, const GeluParams& p) {
  MOBIUS_VALIDATE(ValidateGelu(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::gelu_fwd(Half(p.dtype), Bits(p.out), Bits(p.inp), p.n, q.stream());
  });
}

absl::Status CudaBackend::GeluBackward(Queue& queue, const GeluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateGeluBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::gelu_bwd(Half(p.dtype), Bits(p.dinp), Bits(p.dout), Bits(p.inp), p.n, q.stream());
  });
}

absl::Status CudaBackend::SwiGluForward(Queue& queue, const SwiGluParams& p) {
  MOBIUS_VALIDATE(ValidateSwiGlu(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::swiglu_fwd(Half(p.dtype), Bits(p.out), Bits(p.gate), Bits(p.up), p.n, q.stream());
  });
}

absl::Status CudaBackend::SwiGluBackward(Queue& queue, const SwiGluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateSwiGluBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::swiglu_bwd(Half(p.dtype), Bits(p.dgate), Bits(p.dup), Bits(p.dout), Bits(p.gate),
                          Bits(p.up), p.n, q.stream());
  });
}

absl::Status CudaBackend::ClampedSwiGluForward(Queue& queue, const ClampedSwiGluParams& p) {
  MOBIUS_VALIDATE(ValidateClampedSwiGlu(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::clamped_swiglu_fwd(Half(p.dtype), Bits(p.out), Bits(p.gate_up), p.n, p.width,
                                  p.alpha, p.limit, q.stream());
  });
}

absl::Status CudaBackend::ClampedSwiGluBackward(Queue& queue,
                                                const ClampedSwiGluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateClampedSwiGluBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::clamped_swiglu_bwd(Half(p.dtype), Bits(p.dgate_up), Bits(p.dout), Bits(p.gate_up),
                                  p.n, p.width, p.alpha, p.limit, q.stream());
  });
}

absl::Status CudaBackend::AttentionSinkForward(Queue& queue, const AttentionSinkParams& p) {
  MOBIUS_VALIDATE(ValidateAttentionSink(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::attention_sink_fwd(Half(p.dtype), Bits(p.out), p.lse, Bits(p.sinks), p.b, p.t,
                                  p.heads, p.head_dim, q.stream());
  });
}

absl::Status CudaBackend::AttentionSinkBackward(Queue& queue,
                                                const AttentionSinkBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateAttentionSinkBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::attention_sink_bwd(Half(p.dtype), p.dsinks, Bits(p.out), Bits(p.dout), p.lse,
                                  Bits(p.sinks), p.b, p.t, p.heads, p.head_dim, q.stream());
  });
}

absl::Status CudaBackend::RopeTables(Queue& queue, const RopeTablesParams& p) {
  MOBIUS_VALIDATE(ValidateRopeTables(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::rope_tables(p.cos, p.sin, p.inv_freq, p.t, p.half, p.scale, q.stream());
  });
}

absl::Status CudaBackend::RopeForward(Queue& queue, const RopeParams& p) {
  MOBIUS_VALIDATE(ValidateRope(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::rope_fwd(Half(p.dtype), Bits(p.out), Bits(p.inp), p.cos, p.sin, p.b, p.t, p.nh,
                        p.head_dim, q.stream());
  });
}

absl::Status CudaBackend::RopeBackward(Queue& queue, const RopeBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateRopeBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::rope_bwd(Half(p.dtype), Bits(p.dinp), Bits(p.dout), p.cos, p.sin, p.b, p.t, p.nh,
                        p.head_dim, q.stream());
  });
}

absl::Status CudaBackend::AttentionForward(Queue& queue, const AttentionParams& p) {
  MOBIUS_VALIDATE(ValidateAttention(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::attention_fwd(Half(p.dtype), Bits(p.out), p.lse, Bits(p.q), Bits(p.k), Bits(p.v),
                             Shape(p.shape), q.stream());
  });
}

absl::Status CudaBackend::CachedAttentionForward(Queue& queue, const CachedAttentionParams& p) {
  MOBIUS_VALIDATE(ValidateCachedAttention(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::attention_cached_fwd(Half(p.dtype), Bits(p.out), p.lse, Bits(p.q), Bits(p.k),
                                    Bits(p.v), Shape(p.shape), p.start, p.capacity, q.stream());
  });
}

absl::Status CudaBackend::AttentionBackward(Queue& queue, const AttentionBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateAttentionBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::attention_bwd(Half(p.dtype), Bits(p.dq), Bits(p.dk), Bits(p.dv), Bits(p.dout),
                             Bits(p.q), Bits(p.k), Bits(p.v), Bits(p.out), p.lse, Shape(p.shape),
                             q.stream());
  });
}

absl::Status CudaBackend::CrossEntropyForward(Queue& queue, const CrossEntropyParams& p) {
  MOBIUS_VALIDATE(ValidateCrossEntropy(p));
  return Launch(queue, [&](CudaQueue& q) {
    int32_t* bad = q.counter(kBadTargets);
    return p.logits_type == DType::kFp32
               ? kc::cross_entropy_fwd(p.losses, p.lse, p.mean_loss, F32(p.logits), p.targets,
                                       p.n, p.v, bad, q.stream(), p.rows.row0, p.rows.total_rows)
               : kc::cross_entropy_fwd(Half(p.logits_type), p.losses, p.lse, p.mean_loss,
                                       Bits(p.logits), p.targets, p.n, p.v, bad, q.stream(),
                                       p.rows.row0, p.rows.total_rows);
  });
}

absl::Status CudaBackend::CrossEntropyBackward(Queue& queue, const CrossEntropyBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateCrossEntropyBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return p.logits_type == DType::kFp32
               ? kc::cross_entropy_bwd(F32(p.dlogits), F32(p.logits), p.lse, p.targets, p.n,
                                       p.v, p.dloss, q.stream(), p.rows.row0, p.rows.total_rows)
               : kc::cross_entropy_bwd(Half(p.logits_type), Bits(p.dlogits), Bits(p.logits),
                                       p.lse, p.targets, p.n, p.v, p.dloss, q.stream(),
                                       p.rows.row0, p.rows.total_rows);
  });
}

absl::Status CudaBackend::ResidualAdd(Queue& queue, const ResidualParams& p) {
  MOBIUS_VALIDATE(ValidateResidual(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::residual_fwd(Half(p.dtype), Bits(p.out), Bits(p.a), Bits(p.b), p.n, q.stream());
  });
}

absl::Status CudaBackend::BiasAdd(Queue& queue, const BiasAddParams& p) {
  MOBIUS_VALIDATE(ValidateBiasAdd(p));
  return Launch(queue, [&](CudaQueue& q) {
    if (p.fp32_rows) {
      return kc::bias_add_fwd_f32(Half(p.dtype), static_cast<float*>(p.out),
                                  static_cast<const float*>(p.inp), Bits(p.bias), p.n, p.c,
                                  q.stream());
    }
    return kc::bias_add_fwd(Half(p.dtype), Bits(p.out), Bits(p.inp), Bits(p.bias), p.n, p.c,
                            q.stream());
  });
}

absl::Status CudaBackend::BiasBackward(Queue& queue, const BiasBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateBiasBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return p.dout_type == DType::kFp32
               ? kc::bias_bwd(p.dbias, F32(p.dout), p.n, p.c, q.stream())
               : kc::bias_bwd(Half(p.dout_type), p.dbias, Bits(p.dout), p.n, p.c, q.stream());
  });
}

absl::Status CudaBackend::AdamW(Queue& queue, const AdamWParams& p) {
  MOBIUS_VALIDATE(ValidateAdamW(p));
  const kc::AdamWStepScalars scalars = kc::MakeAdamWStepScalars(
      p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step, p.grad_scale, p.decay);
  return Launch(queue, [&](CudaQueue& q) {
    return kc::adamw_step(Half(p.out_type), scalars, p.master, p.m, p.v, p.grad,
                          Bits(p.bf16_out), p.n, q.stream());
  });
}

absl::Status CudaBackend::SumSquares(Queue& queue, const SumSquaresParams& p) {
  MOBIUS_VALIDATE(ValidateSumSquares(p));
  return Launch(queue, [&](CudaQueue& q) {
    return p.chunk == 0 ? kc::sum_squares(p.out, p.x, p.n, q.stream())
                        : kc::sum_squares_chunks(p.out, p.x, p.n, p.chunk, q.stream());
  });
}

absl::Status CudaBackend::Dropout(Queue& queue, const DropoutParams& p) {
  MOBIUS_VALIDATE(ValidateDropout(p));
  return Launch(queue, [&](CudaQueue& q) {
    return p.inp_type == DType::kFp32
               ? kc::dropout(p.out, F32(p.inp), p.n, p.c, p.p, p.key, p.row_offset, p.accumulate,
                             q.stream())
               : kc::dropout(Half(p.inp_type), p.out, Bits(p.inp), p.n, p.c, p.p, p.key,
                             p.row_offset, p.accumulate, q.stream());
  });
}

absl::Status CudaBackend::DequantizeNf4(Queue& queue, const DequantizeNf4Params& p) {
  MOBIUS_VALIDATE(ValidateDequantizeNf4(p));
  const numeric::Nf4BlobLayout l = numeric::MakeNf4BlobLayout(p.n);
  const kc::Nf4BlobFormat format{.n = p.n, .block = numeric::kNf4BlockSize,
                                 .group = numeric::kNf4ScaleBlockSize, .scales = l.scales,
                                 .codes = l.codes, .packed = l.packed};
  kc::Nf4Tables tables;
  std::copy(numeric::Nf4Code().begin(), numeric::Nf4Code().end(), tables.level);
  std::copy(numeric::DynamicCode().begin(), numeric::DynamicCode().end(), tables.dynamic);
  return Launch(queue, [&](CudaQueue& q) {
    return kc::dequantize_nf4(Half(p.dst_type), Bits(p.out), static_cast<const uint8_t*>(p.src),
                              format, tables, q.stream());
  });
}

absl::Status CudaBackend::MoeRoute(Queue& queue, const MoeRouteParams& p) {
  MOBIUS_VALIDATE(ValidateMoeRoute(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::moe_route(p.probs, p.ids, p.weights, p.order, p.pos, p.offsets, p.logits, p.n,
                         p.experts, p.k, p.renormalize, q.stream());
  });
}

absl::Status CudaBackend::MoeRouteBackward(Queue& queue, const MoeRouteBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateMoeRouteBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::moe_route_bwd(p.dlogits, p.dweights, p.aux_grad, p.probs, p.ids, p.weights, p.n,
                             p.experts, p.k, p.renormalize, q.stream());
  });
}

absl::Status CudaBackend::MoeGather(Queue& queue, const MoeGatherParams& p) {
  MOBIUS_VALIDATE(ValidateMoeGather(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::moe_gather(Half(p.dtype), Bits(p.dst), Bits(p.src), p.order, p.n, p.k, p.c,
                          q.stream());
  });
}

absl::Status CudaBackend::MoeCombine(Queue& queue, const MoeCombineParams& p) {
  MOBIUS_VALIDATE(ValidateMoeCombine(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::moe_combine(Half(p.dtype), Bits(p.out), Bits(p.y), p.pos, p.weights, p.n, p.k, p.c,
                           q.stream());
  });
}

absl::Status CudaBackend::MoeCombineBackward(Queue& queue, const MoeCombineBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateMoeCombineBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::moe_combine_bwd(Half(p.dtype), p.dy, p.dweights, p.dout, Bits(p.y), p.pos,
                               p.weights, p.n, p.k, p.c, q.stream());
  });
}

absl::Status CudaBackend::MoeScatterAdd(Queue& queue, const MoeScatterAddParams& p) {
  MOBIUS_VALIDATE(ValidateMoeScatterAdd(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::moe_scatter_add(p.dst, p.src, p.pos, p.n, p.k, p.c, q.stream());
  });
}

#undef MOBIUS_VALIDATE

}  // namespace mobius::backend
