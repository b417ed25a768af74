// CpuBackend's transformer ops: validate, then enqueue the worker/kernels/cpu function on the queue
// thread with the backend's op pool. Data-dependent checks (token and target ids) run inside the
// task and become the queue's error, so a bad id never reads out of bounds. The 16-bit format of an
// op (its `dtype`, or a type field) picks the kernel overload once per call (storage.h: bf16 is
// uint16_t, fp16 is F16); validation has already refused any other type.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/attention_sink.h"
#include "worker/kernels/cpu/bias.h"
#include "worker/kernels/cpu/convert.h"
#include "worker/kernels/cpu/cross_entropy.h"
#include "worker/kernels/cpu/dropout.h"
#include "worker/kernels/cpu/embedding.h"
#include "worker/kernels/cpu/gelu.h"
#include "worker/kernels/cpu/layernorm.h"
#include "worker/kernels/cpu/moe.h"
#include "worker/kernels/cpu/nf4.h"
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

template <typename T>
T* As(void* p) {
  return static_cast<T*>(p);
}
template <typename T>
const T* As(const void* p) {
  return static_cast<const T*>(p);
}

// Calls fn(T{}) with T the storage type of `type`: uint16_t (bf16), k::F16 or, where the op takes
// it, float (fp32). A generic lambda then names its buffers As<T>(ptr) and calls the kernel
// overload of that format.
template <typename Fn>
void WithHalf(DType type, Fn&& fn) {
  if (type == DType::kF16) {
    fn(k::F16{});
  } else {
    fn(uint16_t{});
  }
}
template <typename Fn>
void WithType(DType type, Fn&& fn) {
  if (type == DType::kFp32) {
    fn(float{});
  } else {
    WithHalf(type, fn);
  }
}

// dst [n] = src [n] converted, for each pair of fp32 / bf16 / fp16 (convert.h; same type: a copy).
void CastRow(DType src_type, const void* src, DType dst_type, void* dst, int64_t n) {
  const auto* s16 = static_cast<const uint16_t*>(src);
  auto* d16 = static_cast<uint16_t*>(dst);
  if (src_type == dst_type) {
    std::memmove(dst, src, static_cast<size_t>(n) * DTypeBytes(src_type));
  } else if (src_type == DType::kFp32) {
    const auto* s32 = static_cast<const float*>(src);
    dst_type == DType::kBf16 ? k::Fp32RowToBf16(d16, s32, n) : k::Fp32RowToF16(d16, s32, n);
  } else if (dst_type == DType::kFp32) {
    auto* d32 = static_cast<float*>(dst);
    src_type == DType::kBf16 ? k::Bf16RowToFp32(d32, s16, n) : k::F16RowToFp32(d32, s16, n);
  } else {
    src_type == DType::kBf16 ? k::Bf16RowToF16(d16, s16, n) : k::F16RowToBf16(d16, s16, n);
  }
}

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
    const int64_t src_bytes = DTypeBytes(p.src_type), dst_bytes = DTypeBytes(p.dst_type);
    k::ParallelForRange(pool, p.n, k::kElementwiseGrain, [&](int64_t b, int64_t e) {
      const char* src = static_cast<const char*>(p.src) + b * src_bytes;
      char* dst = static_cast<char*>(p.dst) + b * dst_bytes;
      if (!p.accumulate) return CastRow(p.src_type, src, p.dst_type, dst, e - b);
      // dst += src, through an fp32 row of at most 1024 elements at a time.
      float row[1024];
      for (int64_t i = 0; i < e - b; i += 1024) {
        const int64_t len = std::min<int64_t>(1024, e - b - i);
        CastRow(p.src_type, src + i * src_bytes, DType::kFp32, row, len);
        float* d = reinterpret_cast<float*>(dst) + i;
        for (int64_t j = 0; j < len; ++j) d[j] += row[j];
      }
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::EmbeddingForward(Queue& queue, const EmbeddingParams& p) {
  MOBIUS_VALIDATE(ValidateEmbedding(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (absl::Status s = CheckIds("embedding", p.tokens, p.b * p.t, p.vocab, false); !s.ok()) {
      return s;
    }
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::embedding_fwd(As<T>(p.out), p.tokens, As<T>(p.wte), As<T>(p.wpe), p.b, p.t, p.c, pool);
    });
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
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::embedding_bwd(p.dwte, p.dwpe, As<T>(p.dout), p.tokens, p.b, p.t, p.c, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::NormForward(Queue& queue, const NormParams& p) {
  MOBIUS_VALIDATE(ValidateNorm(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      if (p.op == NormOp::kLayerNorm) {
        k::layernorm_fwd(As<T>(p.out), p.mean, p.rstd, As<T>(p.inp), As<T>(p.weight),
                         As<T>(p.bias), p.n, p.c, p.eps, pool);
      } else {
        k::rmsnorm_fwd(As<T>(p.out), p.rstd, As<T>(p.inp), As<T>(p.weight), p.n, p.c, p.eps,
                       pool);
      }
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::NormBackward(Queue& queue, const NormBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateNormBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    // dinp_type is fp32 or dtype (validated).
    WithHalf(p.dtype, [&]<typename T>(T) {
      WithType(p.dinp_type, [&]<typename DInp>(DInp) {
        if constexpr (std::is_same_v<DInp, float> || std::is_same_v<DInp, T>) {
          if (p.op == NormOp::kLayerNorm) {
            k::layernorm_bwd(As<DInp>(p.dinp), p.dweight, p.dbias, As<T>(p.dout), As<T>(p.inp),
                             As<T>(p.weight), p.mean, p.rstd, p.n, p.c, pool);
          } else {
            k::rmsnorm_bwd(As<DInp>(p.dinp), p.dweight, As<T>(p.dout), As<T>(p.inp),
                           As<T>(p.weight), p.rstd, p.n, p.c, pool);
          }
        }
      });
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::GeluForward(Queue& queue, const GeluParams& p) {
  MOBIUS_VALIDATE(ValidateGelu(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) { k::gelu_fwd(As<T>(p.out), As<T>(p.inp), p.n, pool); });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::GeluBackward(Queue& queue, const GeluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateGeluBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::gelu_bwd(As<T>(p.dinp), As<T>(p.dout), As<T>(p.inp), p.n, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::SwiGluForward(Queue& queue, const SwiGluParams& p) {
  MOBIUS_VALIDATE(ValidateSwiGlu(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::swiglu_fwd(As<T>(p.out), As<T>(p.gate), As<T>(p.up), p.n, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::SwiGluBackward(Queue& queue, const SwiGluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateSwiGluBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::swiglu_bwd(As<T>(p.dgate), As<T>(p.dup), As<T>(p.dout), As<T>(p.gate), As<T>(p.up), p.n,
                    pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::ClampedSwiGluForward(Queue& queue, const ClampedSwiGluParams& p) {
  MOBIUS_VALIDATE(ValidateClampedSwiGlu(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::clamped_swiglu_fwd(As<T>(p.out), As<T>(p.gate_up), p.n, p.width, p.alpha, p.limit, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::ClampedSwiGluBackward(Queue& queue, const ClampedSwiGluBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateClampedSwiGluBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::clamped_swiglu_bwd(As<T>(p.dgate_up), As<T>(p.dout), As<T>(p.gate_up), p.n, p.width,
                            p.alpha, p.limit, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::AttentionSinkForward(Queue& queue, const AttentionSinkParams& p) {
  MOBIUS_VALIDATE(ValidateAttentionSink(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::attention_sink_fwd(As<T>(p.out), p.lse, As<T>(p.sinks), p.b, p.t, p.heads, p.head_dim,
                            pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::AttentionSinkBackward(Queue& queue, const AttentionSinkBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateAttentionSinkBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::attention_sink_bwd(p.dsinks, As<T>(p.out), As<T>(p.dout), p.lse, As<T>(p.sinks), p.b,
                            p.t, p.heads, p.head_dim, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::RopeTables(Queue& queue, const RopeTablesParams& p) {
  MOBIUS_VALIDATE(ValidateRopeTables(p));
  return Enqueue(queue, [p]() {
    k::rope_tables(p.cos, p.sin, p.inv_freq, p.t, p.half, p.scale);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::RopeForward(Queue& queue, const RopeParams& p) {
  MOBIUS_VALIDATE(ValidateRope(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::rope_fwd(As<T>(p.out), As<T>(p.inp), p.cos, p.sin, p.b, p.t, p.nh, p.head_dim, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::RopeBackward(Queue& queue, const RopeBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateRopeBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::rope_bwd(As<T>(p.dinp), As<T>(p.dout), p.cos, p.sin, p.b, p.t, p.nh, p.head_dim, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::AttentionForward(Queue& queue, const AttentionParams& p) {
  MOBIUS_VALIDATE(ValidateAttention(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::attention_fwd(As<T>(p.out), p.lse, As<T>(p.q), As<T>(p.k), As<T>(p.v), Shape(p.shape),
                       pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::CachedAttentionForward(Queue& queue, const CachedAttentionParams& p) {
  MOBIUS_VALIDATE(ValidateCachedAttention(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::attention_cached_fwd(As<T>(p.out), p.lse, As<T>(p.q), As<T>(p.k), As<T>(p.v),
                              Shape(p.shape), p.start, p.capacity, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::AttentionBackward(Queue& queue, const AttentionBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateAttentionBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::attention_bwd(As<T>(p.dq), As<T>(p.dk), As<T>(p.dv), As<T>(p.dout), As<T>(p.q),
                       As<T>(p.k), As<T>(p.v), As<T>(p.out), p.lse, Shape(p.shape), pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::CrossEntropyForward(Queue& queue, const CrossEntropyParams& p) {
  MOBIUS_VALIDATE(ValidateCrossEntropy(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (absl::Status s = CheckIds("cross_entropy", p.targets, p.n, p.v, true); !s.ok()) return s;
    const int64_t row0 = p.rows.row0, total = p.rows.total_rows;
    float mean = 0.0f;
    WithType(p.logits_type, [&]<typename T>(T) {
      mean = k::cross_entropy_fwd(p.losses, p.lse, As<T>(p.logits), p.targets, p.n, p.v, pool,
                                  row0, total);
    });
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
    WithType(p.logits_type, [&]<typename T>(T) {
      k::cross_entropy_bwd(As<T>(p.dlogits), As<T>(p.logits), p.lse, p.targets, p.n, p.v, p.dloss,
                           pool, p.rows.row0, p.rows.total_rows);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::ResidualAdd(Queue& queue, const ResidualParams& p) {
  MOBIUS_VALIDATE(ValidateResidual(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::residual_fwd(As<T>(p.out), As<T>(p.a), As<T>(p.b), p.n, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::BiasAdd(Queue& queue, const BiasAddParams& p) {
  MOBIUS_VALIDATE(ValidateBiasAdd(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      if (p.fp32_rows) {
        k::bias_add_fwd(static_cast<float*>(p.out), static_cast<const float*>(p.inp),
                        As<T>(p.bias), p.n, p.c, pool);
      } else {
        k::bias_add_fwd(As<T>(p.out), As<T>(p.inp), As<T>(p.bias), p.n, p.c, pool);
      }
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::BiasBackward(Queue& queue, const BiasBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateBiasBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithType(p.dout_type,
             [&]<typename T>(T) { k::bias_bwd(p.dbias, As<T>(p.dout), p.n, p.c, pool); });
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
                                  .bf16_out = p.bf16_out ? As<uint16_t>(p.bf16_out) + b : nullptr,
                                  .n = static_cast<size_t>(e - b), .decay = p.decay,
                                  .out_fp16 = p.out_type == DType::kF16};
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
    WithType(p.inp_type, [&]<typename T>(T) {
      k::dropout(p.out, As<T>(p.inp), p.n, p.c, p.p, p.key, p.row_offset, p.accumulate, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::DequantizeNf4(Queue& queue, const DequantizeNf4Params& p) {
  MOBIUS_VALIDATE(ValidateDequantizeNf4(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    if (p.dst_type == DType::kF16) {
      k::dequantize_nf4(static_cast<k::F16*>(p.out), p.src, p.n, pool);
    } else {
      k::dequantize_nf4(static_cast<uint16_t*>(p.out), p.src, p.n, pool);
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

absl::Status CpuBackend::MoeRoute(Queue& queue, const MoeRouteParams& p) {
  MOBIUS_VALIDATE(ValidateMoeRoute(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::moe_route(p.probs, p.ids, p.weights, p.order, p.pos, p.offsets, p.logits, p.n, p.experts,
                 p.k, p.renormalize, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::MoeRouteBackward(Queue& queue, const MoeRouteBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateMoeRouteBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::moe_route_bwd(p.dlogits, p.dweights, p.aux_grad, p.probs, p.ids, p.weights, p.n, p.experts,
                     p.k, p.renormalize, pool);
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::MoeGather(Queue& queue, const MoeGatherParams& p) {
  MOBIUS_VALIDATE(ValidateMoeGather(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::moe_gather(As<T>(p.dst), As<T>(p.src), p.order, p.n, p.k, p.c, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::MoeCombine(Queue& queue, const MoeCombineParams& p) {
  MOBIUS_VALIDATE(ValidateMoeCombine(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::moe_combine(As<T>(p.out), As<T>(p.y), p.pos, p.weights, p.n, p.k, p.c, pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::MoeCombineBackward(Queue& queue, const MoeCombineBackwardParams& p) {
  MOBIUS_VALIDATE(ValidateMoeCombineBackward(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    WithHalf(p.dtype, [&]<typename T>(T) {
      k::moe_combine_bwd(p.dy, p.dweights, p.dout, As<T>(p.y), p.pos, p.weights, p.n, p.k, p.c,
                         pool);
    });
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::MoeScatterAdd(Queue& queue, const MoeScatterAddParams& p) {
  MOBIUS_VALIDATE(ValidateMoeScatterAdd(p));
  return EnqueueOp(queue, [p](ThreadPool* pool) {
    k::moe_scatter_add(p.dst, p.src, p.pos, p.n, p.k, p.c, pool);
    return absl::OkStatus();
  });
}

#undef MOBIUS_VALIDATE

}  // namespace mobius::backend
