// CudaBackend's ops: validate with the shared op_params.h / gemm_params.h functions, then launch
// the worker/kernels/cuda/ kernel on the queue's stream (CudaBackend::Launch keeps the queue's
// first error). Data errors (token ids, targets) are counted into the queue's device counters and
// reported by Synchronize.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/backend/cuda/cuda_backend_impl.h"
#include "worker/kernels/cuda/adamw.cuh"
#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/attention_cached.cuh"
#include "worker/kernels/cuda/bias.cuh"
#include "worker/kernels/cuda/cast.cuh"
#include "worker/kernels/cuda/cross_entropy.cuh"
#include "worker/kernels/cuda/dropout.cuh"
#include "worker/kernels/cuda/embedding.cuh"
#include "worker/kernels/cuda/gelu.cuh"
#include "worker/kernels/cuda/layernorm.cuh"
#include "worker/kernels/cuda/residual.cuh"
#include "worker/kernels/cuda/rmsnorm.cuh"
#include "worker/kernels/cuda/rope.cuh"
#include "worker/kernels/cuda/sum_squares.cuh"
#include "worker/kernels/cuda/swiglu.cuh"

namespace mobius::backend {
namespace {

namespace kc = ::mobius::kernels::cuda;
using kc::KernelStatus;

uint16_t* Bf(void* p) { return static_cast<uint16_t*>(p); }
const uint16_t* Bf(const void* p) { return static_cast<const uint16_t*>(p); }
float* F32(void* p) { return static_cast<float*>(p); }
const float* F32(const void* p) { return static_cast<const float*>(p); }

kc::GemmType Type(DType t) { return t == DType::kFp32 ? kc::GemmType::kFp32 : kc::GemmType::kBf16; }

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

}  // namespace

#define MOBIUS_VALIDATE(expr) \
  if (absl::Status s = (expr); !s.ok()) return s

absl::Status CudaBackend::Gemm(Queue& queue, const GemmParams& p) {
  MOBIUS_VALIDATE(ValidateGemm(p));
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
  if (p.a_type == DType::kFp32 && p.b_type == DType::kFp32 && p.c_type == DType::kBf16) {
    // fp32 x fp32 into a bf16 C (the LoRA term added to a bf16 output): cuBLASLt has no such
    // type set, so C goes through fp32 scratch (stream-ordered, outside the cap like the mixed
    // case's operand): widened, accumulated into by an fp32 GEMM, rounded back once. Elements
    // between rows (ldc > n) are widened and rounded back unchanged.
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
      KernelStatus st = kc::cast_bf16_to_fp32(F32(scratch), Bf(p.c), span, q.stream());
      if (st.ok()) {
        kc::GemmArgs f = a;
        f.c_type = kc::GemmType::kFp32;
        f.c = scratch;
        std::lock_guard<std::mutex> lock(gemm_mu_);
        st = gemm_->Run(f, q.stream());
      }
      if (st.ok()) st = kc::cast_fp32_to_bf16(Bf(p.c), F32(scratch), span, q.stream());
      cudaFreeAsync(scratch, q.stream());
      return st;
    });
  }
  if (p.a_type == p.b_type) {
    return Launch(queue, [&](CudaQueue& q) {
      std::lock_guard<std::mutex> lock(gemm_mu_);  // the plan cache is not thread-safe
      return gemm_->Run(a, q.stream());
    });
  }
  // Mixed fp32 x bf16 (the runtime's backward: an fp32 activation gradient times bf16 weights or
  // activations): the fp32 operand is rounded to bf16 into stream-ordered scratch memory
  // (cudaMallocAsync, outside the cap: at most one operand's size, covered by kCudaReserveBytes)
  // and the GEMM runs on tensor cores with fp32 accumulation. The CPU backend multiplies the fp32
  // operand unrounded: the two differ by one bf16 rounding of that operand (relative 2^-9 per
  // element), which cuda_backend_test bounds.
  const bool a_is_fp32 = p.a_type == DType::kFp32;
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
      KernelStatus st = kc::cast_fp32_to_bf16(Bf(scratch), src, span, q.stream());
      if (!st.ok()) {
        cudaFreeAsync(scratch, q.stream());
        return st;
      }
      (a_is_fp32 ? a.a : a.b) = scratch;
    }
    (a_is_fp32 ? a.a_type : a.b_type) = kc::GemmType::kBf16;
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
    if (p.src_type == DType::kFp32) return kc::cast_fp32_to_bf16(Bf(p.dst), F32(p.src), p.n, q.stream());
    return kc::cast_bf16_to_fp32(F32(p.dst), Bf(p.src), p.n, q.stream());
  });
}

absl::Status CudaBackend::EmbeddingForward(Queue& queue, const EmbeddingParams& p) {
  MOBIUS_VALIDATE(ValidateEmbedding(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::embedding_fwd(Bf(p.out), p.tokens, Bf(p.wte), Bf(p.wpe), p.b, p.t, p.c, p.vocab,
                             q.counter(kBadTokenIds), q.stream());
  });
}

absl::Status CudaBackend::EmbeddingBackward(Queue& queue, const EmbeddingBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateEmbeddingBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::embedding_bwd(p.dwte, p.dwpe, Bf(p.dout), p.tokens, p.b, p.t, p.c, p.vocab,
                             q.counter(kBadTokenIds), q.stream());
  });
}

absl::Status CudaBackend::NormForward(Queue& queue, const NormParams& p) {
  MOBIUS_VALIDATE(ValidateNorm(p));
  return Launch(queue, [&](CudaQueue& q) {
    if (p.op == NormOp::kLayerNorm) {
      return kc::layernorm_fwd(Bf(p.out), p.mean, p.rstd, Bf(p.inp), Bf(p.weight), Bf(p.bias),
                               p.n, p.c, p.eps, q.stream());
    }
    return kc::rmsnorm_fwd(Bf(p.out), p.rstd, Bf(p.inp), Bf(p.weight), p.n, p.c, p.eps,
                           q.stream());
  });
}

absl::Status CudaBackend::NormBackward(Queue& queue, const NormBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateNormBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    const bool f32 = p.dinp_type == DType::kFp32;
    if (p.op == NormOp::kLayerNorm) {
      return f32 ? kc::layernorm_bwd(F32(p.dinp), p.dweight, p.dbias, Bf(p.dout), Bf(p.inp),
                                     Bf(p.weight), p.mean, p.rstd, p.n, p.c, q.stream())
                 : kc::layernorm_bwd(Bf(p.dinp), p.dweight, p.dbias, Bf(p.dout), Bf(p.inp),
                                     Bf(p.weight), p.mean, p.rstd, p.n, p.c, q.stream());
    }
    return f32 ? kc::rmsnorm_bwd(F32(p.dinp), p.dweight, Bf(p.dout), Bf(p.inp), Bf(p.weight),
                                 p.rstd, p.n, p.c, q.stream())
               : kc::rmsnorm_bwd(Bf(p.dinp), p.dweight, Bf(p.dout), Bf(p.inp), Bf(p.weight),
                                 p.rstd, p.n, p.c, q.stream());
  });
}

absl::Status CudaBackend::GeluForward(Queue& queue, const GeluParams& p) {
  MOBIUS_VALIDATE(ValidateGelu(p));
  return Launch(queue,
                [&](CudaQueue& q) { return kc::gelu_fwd(Bf(p.out), Bf(p.inp), p.n, q.stream()); });
}

absl::Status CudaBackend::GeluBackward(Queue& queue, const GeluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateGeluBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::gelu_bwd(Bf(p.dinp), Bf(p.dout), Bf(p.inp), p.n, q.stream());
  });
}

absl::Status CudaBackend::SwiGluForward(Queue& queue, const SwiGluParams& p) {
  MOBIUS_VALIDATE(ValidateSwiGlu(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::swiglu_fwd(Bf(p.out), Bf(p.gate), Bf(p.up), p.n, q.stream());
  });
}

absl::Status CudaBackend::SwiGluBackward(Queue& queue, const SwiGluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateSwiGluBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::swiglu_bwd(Bf(p.dgate), Bf(p.dup), Bf(p.dout), Bf(p.gate), Bf(p.up), p.n,
                          q.stream());
  });
}

absl::Status CudaBackend::RopeTables(Queue& queue, const RopeTablesParams& p) {
  MOBIUS_VALIDATE(ValidateRopeTables(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::rope_tables(p.cos, p.sin, p.inv_freq, p.t, p.half, q.stream());
  });
}

absl::Status CudaBackend::RopeForward(Queue& queue, const RopeParams& p) {
  MOBIUS_VALIDATE(ValidateRope(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::rope_fwd(Bf(p.out), Bf(p.inp), p.cos, p.sin, p.b, p.t, p.nh, p.head_dim,
                        q.stream());
  });
}

absl::Status CudaBackend::RopeBackward(Queue& queue, const RopeBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateRopeBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::rope_bwd(Bf(p.dinp), Bf(p.dout), p.cos, p.sin, p.b, p.t, p.nh, p.head_dim,
                        q.stream());
  });
}

absl::Status CudaBackend::AttentionForward(Queue& queue, const AttentionParams& p) {
  MOBIUS_VALIDATE(ValidateAttention(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::attention_fwd(Bf(p.out), p.lse, Bf(p.q), Bf(p.k), Bf(p.v), Shape(p.shape),
                             q.stream());
  });
}

absl::Status CudaBackend::CachedAttentionForward(Queue& queue, const CachedAttentionParams& p) {
  MOBIUS_VALIDATE(ValidateCachedAttention(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::attention_cached_fwd(Bf(p.out), p.lse, Bf(p.q), Bf(p.k), Bf(p.v), Shape(p.shape),
                                    p.start, p.capacity, q.stream());
  });
}

absl::Status CudaBackend::AttentionBackward(Queue& queue, const AttentionBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateAttentionBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::attention_bwd(Bf(p.dq), Bf(p.dk), Bf(p.dv), Bf(p.dout), Bf(p.q), Bf(p.k),
                             Bf(p.v), Bf(p.out), p.lse, Shape(p.shape), q.stream());
  });
}

absl::Status CudaBackend::CrossEntropyForward(Queue& queue, const CrossEntropyParams& p) {
  MOBIUS_VALIDATE(ValidateCrossEntropy(p));
  return Launch(queue, [&](CudaQueue& q) {
    int32_t* bad = q.counter(kBadTargets);
    return p.logits_type == DType::kFp32
               ? kc::cross_entropy_fwd(p.losses, p.lse, p.mean_loss, F32(p.logits), p.targets,
                                       p.n, p.v, bad, q.stream(), p.rows.row0, p.rows.total_rows)
               : kc::cross_entropy_fwd(p.losses, p.lse, p.mean_loss, Bf(p.logits), p.targets,
                                       p.n, p.v, bad, q.stream(), p.rows.row0, p.rows.total_rows);
  });
}

absl::Status CudaBackend::CrossEntropyBackward(Queue& queue, const CrossEntropyBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateCrossEntropyBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return p.logits_type == DType::kFp32
               ? kc::cross_entropy_bwd(F32(p.dlogits), F32(p.logits), p.lse, p.targets, p.n,
                                       p.v, p.dloss, q.stream(), p.rows.row0, p.rows.total_rows)
               : kc::cross_entropy_bwd(Bf(p.dlogits), Bf(p.logits), p.lse, p.targets, p.n, p.v,
                                       p.dloss, q.stream(), p.rows.row0, p.rows.total_rows);
  });
}

absl::Status CudaBackend::ResidualAdd(Queue& queue, const ResidualParams& p) {
  MOBIUS_VALIDATE(ValidateResidual(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::residual_fwd(Bf(p.out), Bf(p.a), Bf(p.b), p.n, q.stream());
  });
}

absl::Status CudaBackend::BiasAdd(Queue& queue, const BiasAddParams& p) {
  MOBIUS_VALIDATE(ValidateBiasAdd(p));
  return Launch(queue, [&](CudaQueue& q) {
    return kc::bias_add_fwd(Bf(p.out), Bf(p.inp), Bf(p.bias), p.n, p.c, q.stream());
  });
}

absl::Status CudaBackend::BiasBackward(Queue& queue, const BiasBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateBiasBackward(p));
  return Launch(queue, [&](CudaQueue& q) {
    return p.dout_type == DType::kFp32 ? kc::bias_bwd(p.dbias, F32(p.dout), p.n, p.c, q.stream())
                                       : kc::bias_bwd(p.dbias, Bf(p.dout), p.n, p.c, q.stream());
  });
}

absl::Status CudaBackend::AdamW(Queue& queue, const AdamWParams& p) {
  MOBIUS_VALIDATE(ValidateAdamW(p));
  const kc::AdamWStepScalars scalars = kc::MakeAdamWStepScalars(
      p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step, p.grad_scale, p.decay);
  return Launch(queue, [&](CudaQueue& q) {
    return kc::adamw_step(scalars, p.master, p.m, p.v, p.grad, Bf(p.bf16_out), p.n, q.stream());
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
               : kc::dropout(p.out, Bf(p.inp), p.n, p.c, p.p, p.key, p.row_offset, p.accumulate,
                             q.stream());
  });
}

#undef MOBIUS_VALIDATE

}  // namespace mobius::backend
