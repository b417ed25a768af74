// CpuBackend's transformer ops: validate, then enqueue the worker/kernels/cpu function on the queue
// thread with the backend's op pool. Data-dependent checks (token and target ids) run inside the
// task and become the queue's error, so a bad id never reads out of bounds.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/numeric/bf16.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/bias.h"
#include "worker/kernels/cpu/convert.h"
#include "worker/kernels/cpu/cross_entropy.h"
#include "worker/kernels/cpu/dropout.h"
#include "worker/kernels/cpu/embedding.h"
#include "worker/kernels/cpu/gelu.h"
#include "worker/kernels/cpu/layernorm.h"
#include "worker/kernels/cpu/residual.h"
#include "worker/kernels/cpu/rmsnorm.h"
#include "worker/kernels/cpu/rope.h"
#include "worker/kernels/cpu/swiglu.h"
#include "worker/optim/adamw.h"
#include "worker/optim/thread_pool.h"

namespace mobius::backend {
namespace {

namespace k = ::mobius::kernels::cpu;
using optim::ThreadPool;

uint16_t* Bf(void* p) { return static_cast<uint16_t*>(p); }
const uint16_t* Bf(const void* p) { return static_cast<const uint16_t*>(p); }
float* F32(void* p) { return static_cast<float*>(p); }
const float* F32(const void* p) { return static_cast<const float*>(p); }

absl::Status CheckIds(absl::string_view op, const int32_t* ids, int64_t n, int64_t limit,
                      bool allow_ignore) {
  for (int64_t i = 0; i < n; ++i) {
    if (allow_ignore && ids[i] == kIgnoreIndex) continue;
    if (ids[i] < 0 || ids[i] >= limit) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": id ", ids[i], " at position ", i,
                                                     " outside [0, ", limit, ")"));
    }
  }
  return absl::OkStatus();
}

k::AttentionShape Shape(const AttentionShapeParams& s) {
  return k::AttentionShape{s.b, s.t, s.heads, s.kv_heads, s.head_dim, s.window};
}

}  // namespace

absl::Status CpuBackend::EnqueueOp(Queue& queue, std::function<absl::Status(ThreadPool*)> op) {
  return Enqueue(queue, [this, op = std::move(op)]() {
    std::lock_guard<std::mutex> lock(pool_mu_);
    return op(pool_.get());
  });
}

#define MOBIUS_VALIDATE(expr) \
  if (absl::Status s = (expr); !s.ok()) return s

absl::Status CpuBackend::Zero(Queue& queue, const ZeroParams& p) {
  MOBIUS_VALIDATE(ValidateZero(p));
  return Enqueue(queue, [p]() {
    if (p.bytes > 0) std::memset(p.dst, 0, p.bytes);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::Cast(Queue& queue, const CastParams& p) {
  MOBIUS_VALIDATE(ValidateCast(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    const size_t bytes = static_cast<size_t>(p.n) * DTypeBytes(p.src_type);
    if (p.src_type == p.dst_type) {
      std::memmove(p.dst, p.src, bytes);
    } else if (p.src_type == DType::kFp32) {
      k::ParallelForRange(pool, p.n, k::kElementwiseGrain, [&](int64_t b, int64_t e) {
        k::Fp32RowToBf16(Bf(p.dst) + b, F32(p.src) + b, e - b);
      });
    } else {
      k::ParallelForRange(pool, p.n, k::kElementwiseGrain, [&](int64_t b, int64_t e) {
        k::Bf16RowToFp32(F32(p.dst) + b, Bf(p.src) + b, e - b);
      });
    }
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::EmbeddingForward(Queue& queue, const EmbeddingParams& p) {
  MOBIUS_VALIDATE(ValidateEmbedding(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (absl::Status s = CheckIds("embedding", p.tokens, p.b * p.t, p.vocab, false); !s.ok()) {
      return s;
    }
    k::embedding_fwd(Bf(p.out), p.tokens, Bf(p.wte), Bf(p.wpe), p.b, p.t, p.c, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::EmbeddingBackward(Queue& queue, const EmbeddingBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateEmbeddingBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (absl::Status s = CheckIds("embedding_backward", p.tokens, p.b * p.t, p.vocab, false);
        !s.ok()) {
      return s;
    }
    k::embedding_bwd(p.dwte, p.dwpe, Bf(p.dout), p.tokens, p.b, p.t, p.c, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::NormForward(Queue& queue, const NormParams& p) {
  MOBIUS_VALIDATE(ValidateNorm(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (p.op == NormOp::kLayerNorm) {
      k::layernorm_fwd(Bf(p.out), p.mean, p.rstd, Bf(p.inp), Bf(p.weight), Bf(p.bias), p.n, p.c,
                       p.eps, pool);
    } else {
      k::rmsnorm_fwd(Bf(p.out), p.rstd, Bf(p.inp), Bf(p.weight), p.n, p.c, p.eps, pool);
    }
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::NormBackward(Queue& queue, const NormBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateNormBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    const bool f32 = p.dinp_type == DType::kFp32;
    if (p.op == NormOp::kLayerNorm) {
      if (f32) {
        k::layernorm_bwd(F32(p.dinp), p.dweight, p.dbias, Bf(p.dout), Bf(p.inp), Bf(p.weight),
                         p.mean, p.rstd, p.n, p.c, pool);
      } else {
        k::layernorm_bwd(Bf(p.dinp), p.dweight, p.dbias, Bf(p.dout), Bf(p.inp), Bf(p.weight),
                         p.mean, p.rstd, p.n, p.c, pool);
      }
    } else if (f32) {
      k::rmsnorm_bwd(F32(p.dinp), p.dweight, Bf(p.dout), Bf(p.inp), Bf(p.weight), p.rstd, p.n,
                     p.c, pool);
    } else {
      k::rmsnorm_bwd(Bf(p.dinp), p.dweight, Bf(p.dout), Bf(p.inp), Bf(p.weight), p.rstd, p.n, p.c,
                     pool);
    }
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::GeluForward(Queue& queue, const GeluParams& p) {
  MOBIUS_VALIDATE(ValidateGelu(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::gelu_fwd(Bf(p.out), Bf(p.inp), p.n, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::GeluBackward(Queue& queue, const GeluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateGeluBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::gelu_bwd(Bf(p.dinp), Bf(p.dout), Bf(p.inp), p.n, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::SwiGluForward(Queue& queue, const SwiGluParams& p) {
  MOBIUS_VALIDATE(ValidateSwiGlu(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::swiglu_fwd(Bf(p.out), Bf(p.gate), Bf(p.up), p.n, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::SwiGluBackward(Queue& queue, const SwiGluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateSwiGluBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::swiglu_bwd(Bf(p.dgate), Bf(p.dup), Bf(p.dout), Bf(p.gate), Bf(p.up), p.n, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::RopeTables(Queue& queue, const RopeTablesParams& p) {
  MOBIUS_VALIDATE(ValidateRopeTables(p));
  return Enqueue(queue, [p]() {
    k::rope_tables(p.cos, p.sin, p.inv_freq, p.t, p.half);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::RopeForward(Queue& queue, const RopeParams& p) {
  MOBIUS_VALIDATE(ValidateRope(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::rope_fwd(Bf(p.out), Bf(p.inp), p.cos, p.sin, p.b, p.t, p.nh, p.head_dim, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::RopeBackward(Queue& queue, const RopeBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateRopeBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::rope_bwd(Bf(p.dinp), Bf(p.dout), p.cos, p.sin, p.b, p.t, p.nh, p.head_dim, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::AttentionForward(Queue& queue, const AttentionParams& p) {
  MOBIUS_VALIDATE(ValidateAttention(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::attention_fwd(Bf(p.out), p.lse, Bf(p.q), Bf(p.k), Bf(p.v), Shape(p.shape), pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::CachedAttentionForward(Queue& queue, const CachedAttentionParams& p) {
  MOBIUS_VALIDATE(ValidateCachedAttention(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::attention_cached_fwd(Bf(p.out), p.lse, Bf(p.q), Bf(p.k), Bf(p.v), Shape(p.shape), p.start,
                            p.capacity, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::AttentionBackward(Queue& queue, const AttentionBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateAttentionBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::attention_bwd(Bf(p.dq), Bf(p.dk), Bf(p.dv), Bf(p.dout), Bf(p.q), Bf(p.k), Bf(p.v),
                     Bf(p.out), p.lse, Shape(p.shape), pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::CrossEntropyForward(Queue& queue, const CrossEntropyParams& p) {
  MOBIUS_VALIDATE(ValidateCrossEntropy(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (absl::Status s = CheckIds("cross_entropy", p.targets, p.n, p.v, true); !s.ok()) return s;
    const int64_t row0 = p.rows.row0, total = p.rows.total_rows;
    const float mean =
        p.logits_type == DType::kFp32
            ? k::cross_entropy_fwd(p.losses, p.lse, F32(p.logits), p.targets, p.n, p.v, pool,
                                   row0, total)
            : k::cross_entropy_fwd(p.losses, p.lse, Bf(p.logits), p.targets, p.n, p.v, pool,
                                   row0, total);
    if (p.mean_loss != nullptr) *p.mean_loss = mean;
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::CrossEntropyBackward(Queue& queue, const CrossEntropyBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateCrossEntropyBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (absl::Status s = CheckIds("cross_entropy_backward", p.targets, p.n, p.v, true); !s.ok()) {
      return s;
    }
    if (p.logits_type == DType::kFp32) {
      k::cross_entropy_bwd(F32(p.dlogits), F32(p.logits), p.lse, p.targets, p.n, p.v, p.dloss,
                           pool, p.rows.row0, p.rows.total_rows);
    } else {
      k::cross_entropy_bwd(Bf(p.dlogits), Bf(p.logits), p.lse, p.targets, p.n, p.v, p.dloss,
                           pool, p.rows.row0, p.rows.total_rows);
    }
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::ResidualAdd(Queue& queue, const ResidualParams& p) {
  MOBIUS_VALIDATE(ValidateResidual(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::residual_fwd(Bf(p.out), Bf(p.a), Bf(p.b), p.n, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::BiasAdd(Queue& queue, const BiasAddParams& p) {
  MOBIUS_VALIDATE(ValidateBiasAdd(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::bias_add_fwd(Bf(p.out), Bf(p.inp), Bf(p.bias), p.n, p.c, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::BiasBackward(Queue& queue, const BiasBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateBiasBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (p.dout_type == DType::kFp32) {
      k::bias_bwd(p.dbias, F32(p.dout), p.n, p.c, pool);
    } else {
      k::bias_bwd(p.dbias, Bf(p.dout), p.n, p.c, pool);
    }
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::AdamW(Queue& queue, const AdamWParams& p) {
  MOBIUS_VALIDATE(ValidateAdamW(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    const optim::AdamWConfig config{.lr = p.lr, .beta1 = p.beta1, .beta2 = p.beta2, .eps = p.eps,
                                    .weight_decay = p.weight_decay};
    // Chunks of the tensor in parallel: the element update is independent per element.
    absl::Status first;
    std::mutex mu;
    k::ParallelForRange(pool, p.n, k::kElementwiseGrain, [&](int64_t b, int64_t e) {
      optim::ParamBuffers buffers{.master = p.master + b, .m = p.m + b, .v = p.v + b,
                                  .grad = p.grad + b,
                                  .bf16_out = p.bf16_out ? Bf(p.bf16_out) + b : nullptr,
                                  .n = static_cast<size_t>(e - b), .decay = p.decay};
      absl::Status s = optim::AdamWStep(config, p.step, p.grad_scale, buffers);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = s;
      }
    });
    return first;
  });
}

absl::Status CpuBackend::Dropout(Queue& queue, const DropoutParams& p) {
  MOBIUS_VALIDATE(ValidateDropout(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (p.inp_type == DType::kFp32) {
      k::dropout(p.out, F32(p.inp), p.n, p.c, p.p, p.key, p.row_offset, p.accumulate, pool);
    } else {
      k::dropout(p.out, Bf(p.inp), p.n, p.c, p.p, p.key, p.row_offset, p.accumulate, pool);
    }
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::SumSquares(Queue& queue, const SumSquaresParams& p) {
  MOBIUS_VALIDATE(ValidateSumSquares(p));
  return EnqueueOp(queue, [p](ThreadPool*) {
    if (p.chunk == 0) {
      *p.out += optim::SumOfSquares(p.x, static_cast<size_t>(p.n));
      return absl::OkStatus();
    }
    for (int64_t j = 0, begin = 0; begin < p.n; ++j, begin += p.chunk) {
      p.out[j] += optim::SumOfSquares(p.x + begin, static_cast<size_t>(std::min(p.chunk, p.n - begin)));
    }
    return absl::OkStatus();
  });
}

#undef MOBIUS_VALIDATE

}  // namespace mobius::backend
