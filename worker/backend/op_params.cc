#include "worker/backend/op_params.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace mobius::backend {
namespace {

// Collects the first violated rule of one op's arguments, so each Validate* reads as a list.
class Check {
 public:
  explicit Check(absl::string_view op) : op_(op) {}
  Check& AtLeast(absl::string_view field, int64_t value, int64_t min) {
    if (status_.ok() && value < min) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat(op_, ": ", field, " = ", value, ", want >= ", min));
    }
    return *this;
  }
  // `ptr` must be non-null when the op touches it (`used`).
  Check& Ptr(absl::string_view field, const void* ptr, bool used = true) {
    if (status_.ok() && used && ptr == nullptr) {
      status_ = absl::InvalidArgumentError(absl::StrCat(op_, ": ", field, " is null"));
    }
    return *this;
  }
  // A 16-bit tensor format: bf16 or fp16.
  Check& Half(absl::string_view field, DType dtype) {
    return Rule(IsHalf(dtype), absl::StrCat(field, " must be bf16 or fp16, not ", DTypeName(dtype)));
  }
  Check& Rule(bool ok, absl::string_view what) {
    if (status_.ok() && !ok) status_ = absl::InvalidArgumentError(absl::StrCat(op_, ": ", what));
    return *this;
  }
  absl::Status status() const { return status_; }

 private:
  std::string op_;
  absl::Status status_;
};

Check Elementwise(absl::string_view op, int64_t n) { return std::move(Check(op).AtLeast("n", n, 0)); }

Check AttentionShape(absl::string_view op, const AttentionShapeParams& s) {
  Check c(op);
  c.AtLeast("b", s.b, 0).AtLeast("t", s.t, 0).AtLeast("heads", s.heads, 1);
  c.AtLeast("kv_heads", s.kv_heads, 1).AtLeast("head_dim", s.head_dim, 1);
  c.AtLeast("window", s.window, 0);
  c.Rule(s.heads % s.kv_heads == 0, absl::StrCat("heads = ", s.heads,
                                                  " is not a multiple of kv_heads = ", s.kv_heads));
  return c;
}

// A chunk of a microbatch's rows (CrossEntropyRows).
void CheckRows(Check& c, int64_t n, const CrossEntropyRows& rows) {
  if (rows.total_rows == 0) {
    c.Rule(rows.row0 == 0, absl::StrCat("rows.row0 = ", rows.row0, " without rows.total_rows"));
    return;
  }
  c.AtLeast("rows.row0", rows.row0, 0).AtLeast("rows.total_rows", rows.total_rows, 0);
  c.Rule(rows.row0 + n <= rows.total_rows,
         absl::StrCat("rows [", rows.row0, ", ", rows.row0 + n, ") exceed rows.total_rows = ",
                      rows.total_rows));
}

}  // namespace

absl::Status ValidateZero(const ZeroParams& p) {
  return Check("zero").Ptr("dst", p.dst, p.bytes > 0).status();
}

absl::Status ValidateCast(const CastParams& p) {
  Check c = Elementwise("cast", p.n);
  c.Ptr("src", p.src, p.n > 0).Ptr("dst", p.dst, p.n > 0);
  c.Rule(!p.accumulate || p.dst_type == DType::kFp32,
         absl::StrCat("accumulate needs an fp32 dst_type, got ", DTypeName(p.dst_type)));
  return c.status();
}

absl::Status ValidateEmbedding(const EmbeddingParams& p) {
  const bool used = p.b > 0 && p.t > 0;
  Check c("embedding");
  c.AtLeast("b", p.b, 0).AtLeast("t", p.t, 0).AtLeast("c", p.c, 1).AtLeast("vocab", p.vocab, 1);
  c.Ptr("tokens", p.tokens, used).Ptr("wte", p.wte, used).Ptr("out", p.out, used);
  c.Rule(p.wpe == nullptr || p.t <= p.positions,
         absl::StrCat("t = ", p.t, " exceeds positions = ", p.positions));
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateEmbeddingBackward(const EmbeddingBackwardParams& p) {
  const bool used = p.b > 0 && p.t > 0;
  Check c("embedding_backward");
  c.AtLeast("b", p.b, 0).AtLeast("t", p.t, 0).AtLeast("c", p.c, 1).AtLeast("vocab", p.vocab, 1);
  c.Ptr("tokens", p.tokens, used).Ptr("dout", p.dout, used).Ptr("dwte", p.dwte, used);
  c.Rule(p.dwpe == nullptr || p.t <= p.positions,
         absl::StrCat("t = ", p.t, " exceeds positions = ", p.positions));
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateNorm(const NormParams& p) {
  const bool used = p.n > 0;
  Check c("norm");
  c.AtLeast("n", p.n, 0).AtLeast("c", p.c, 1).Rule(p.eps >= 0.0f, "eps < 0");
  c.Ptr("inp", p.inp, used).Ptr("weight", p.weight, used).Ptr("out", p.out, used);
  c.Ptr("rstd", p.rstd, used).Ptr("mean", p.mean, used && p.op == NormOp::kLayerNorm);
  c.Rule(p.op == NormOp::kLayerNorm || p.bias == nullptr, "rmsnorm takes no bias");
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateNormBackward(const NormBackwardParams& p) {
  const bool used = p.n > 0;
  Check c("norm_backward");
  c.AtLeast("n", p.n, 0).AtLeast("c", p.c, 1);
  c.Ptr("dout", p.dout, used).Ptr("inp", p.inp, used).Ptr("weight", p.weight, used);
  c.Ptr("rstd", p.rstd, used).Ptr("mean", p.mean, used && p.op == NormOp::kLayerNorm);
  c.Ptr("dinp", p.dinp, used).Ptr("dweight", p.dweight, used);
  c.Rule(p.op == NormOp::kLayerNorm || p.dbias == nullptr, "rmsnorm takes no bias");
  c.Half("dtype", p.dtype);
  c.Rule(p.dinp_type == DType::kFp32 || p.dinp_type == p.dtype,
         "dinp_type must be fp32 or dtype");
  return c.status();
}

absl::Status ValidateGelu(const GeluParams& p) {
  return Elementwise("gelu", p.n).Ptr("inp", p.inp, p.n > 0).Ptr("out", p.out, p.n > 0).Half("dtype", p.dtype).status();
}

absl::Status ValidateGeluBackward(const GeluBackwardParams& p) {
  const bool used = p.n > 0;
  return Elementwise("gelu_backward", p.n)
      .Ptr("dout", p.dout, used).Ptr("inp", p.inp, used).Ptr("dinp", p.dinp, used)
      .Rule(p.dinp != p.dout && p.dinp != p.inp, "dinp aliases an input")
      .Half("dtype", p.dtype).status();
}

absl::Status ValidateSwiGlu(const SwiGluParams& p) {
  const bool used = p.n > 0;
  return Elementwise("swiglu", p.n)
      .Ptr("gate", p.gate, used).Ptr("up", p.up, used).Ptr("out", p.out, used)
      .Half("dtype", p.dtype).status();
}

absl::Status ValidateSwiGluBackward(const SwiGluBackwardParams& p) {
  const bool used = p.n > 0;
  return Elementwise("swiglu_backward", p.n)
      .Ptr("dout", p.dout, used).Ptr("gate", p.gate, used).Ptr("up", p.up, used)
      .Ptr("dgate", p.dgate, used).Ptr("dup", p.dup, used)
      .Rule(!used || p.dgate != p.dup, "dgate aliases dup")
      .Half("dtype", p.dtype).status();
}

absl::Status ValidateClampedSwiGlu(const ClampedSwiGluParams& p) {
  const bool used = p.n > 0 && p.width > 0;
  Check c("clamped_swiglu");
  c.AtLeast("n", p.n, 0).AtLeast("width", p.width, 0);
  c.Ptr("gate_up", p.gate_up, used).Ptr("out", p.out, used).Half("dtype", p.dtype);
  c.Rule(std::isfinite(p.alpha) && p.limit > 0 && std::isfinite(p.limit),
         "alpha must be finite and limit positive");
  return c.status();
}

absl::Status ValidateClampedSwiGluBackward(const ClampedSwiGluBackwardParams& p) {
  const bool used = p.n > 0 && p.width > 0;
  Check c("clamped_swiglu_backward");
  c.AtLeast("n", p.n, 0).AtLeast("width", p.width, 0);
  c.Ptr("dout", p.dout, used).Ptr("gate_up", p.gate_up, used).Ptr("dgate_up", p.dgate_up, used);
  c.Half("dtype", p.dtype);
  c.Rule(!used || (p.dgate_up != p.gate_up && p.dgate_up != p.dout), "dgate_up aliases an input");
  c.Rule(std::isfinite(p.alpha) && p.limit > 0 && std::isfinite(p.limit),
         "alpha must be finite and limit positive");
  return c.status();
}

absl::Status ValidateAttentionSink(const AttentionSinkParams& p) {
  const bool used = p.b > 0 && p.t > 0 && p.heads > 0 && p.head_dim > 0;
  Check c("attention_sink");
  c.AtLeast("b", p.b, 0).AtLeast("t", p.t, 0).AtLeast("heads", p.heads, 0);
  c.AtLeast("head_dim", p.head_dim, 0).Half("dtype", p.dtype);
  c.Ptr("sinks", p.sinks, used).Ptr("out", p.out, used).Ptr("lse", p.lse, used);
  return c.status();
}

absl::Status ValidateAttentionSinkBackward(const AttentionSinkBackwardParams& p) {
  const bool used = p.b > 0 && p.t > 0 && p.heads > 0 && p.head_dim > 0;
  Check c("attention_sink_backward");
  c.AtLeast("b", p.b, 0).AtLeast("t", p.t, 0).AtLeast("heads", p.heads, 0);
  c.AtLeast("head_dim", p.head_dim, 0).Half("dtype", p.dtype);
  c.Ptr("sinks", p.sinks, used).Ptr("out", p.out, used).Ptr("dout", p.dout, used);
  c.Ptr("lse", p.lse, used).Ptr("dsinks", p.dsinks, used);
  return c.status();
}

absl::Status ValidateRopeTables(const RopeTablesParams& p) {
  const bool used = p.t > 0 && p.half > 0;
  Check c("rope_tables");
  c.AtLeast("t", p.t, 0).AtLeast("half", p.half, 0);
  c.Ptr("inv_freq", p.inv_freq, used).Ptr("cos", p.cos, used).Ptr("sin", p.sin, used);
  c.Rule(std::isfinite(p.scale) && p.scale > 0, "scale must be positive");
  return c.status();
}

absl::Status ValidateRope(const RopeParams& p) {
  const bool used = p.b > 0 && p.t > 0 && p.nh > 0;
  Check c("rope");
  c.AtLeast("b", p.b, 0).AtLeast("t", p.t, 0).AtLeast("nh", p.nh, 0);
  c.AtLeast("head_dim", p.head_dim, 2).Rule(p.head_dim % 2 == 0, "head_dim is odd");
  c.Ptr("cos", p.cos, used).Ptr("sin", p.sin, used).Ptr("inp", p.inp, used).Ptr("out", p.out, used);
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateRopeBackward(const RopeBackwardParams& p) {
  const bool used = p.b > 0 && p.t > 0 && p.nh > 0;
  Check c("rope_backward");
  c.AtLeast("b", p.b, 0).AtLeast("t", p.t, 0).AtLeast("nh", p.nh, 0);
  c.AtLeast("head_dim", p.head_dim, 2).Rule(p.head_dim % 2 == 0, "head_dim is odd");
  c.Ptr("cos", p.cos, used).Ptr("sin", p.sin, used);
  c.Ptr("dout", p.dout, used).Ptr("dinp", p.dinp, used);
  c.Rule(!used || p.dinp != p.dout, "dinp aliases dout");
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateAttention(const AttentionParams& p) {
  const bool used = p.shape.b > 0 && p.shape.t > 0;
  Check c = AttentionShape("attention", p.shape);
  c.Ptr("q", p.q, used).Ptr("k", p.k, used).Ptr("v", p.v, used);
  c.Ptr("out", p.out, used).Ptr("lse", p.lse, used);
  c.Rule(!used || (p.out != p.q && p.out != p.k && p.out != p.v), "out aliases an input");
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateCachedAttention(const CachedAttentionParams& p) {
  const bool used = p.shape.b > 0 && p.shape.t > 0;
  Check c = AttentionShape("cached_attention", p.shape);
  c.AtLeast("start", p.start, 0).AtLeast("capacity", p.capacity, 0);
  c.Rule(p.start + p.shape.t <= p.capacity,
         absl::StrCat("start + t = ", p.start + p.shape.t, " exceeds capacity = ", p.capacity));
  c.Ptr("q", p.q, used).Ptr("k", p.k, used).Ptr("v", p.v, used).Ptr("out", p.out, used);
  c.Rule(!used || (p.out != p.q && p.out != p.k && p.out != p.v), "out aliases an input");
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateAttentionBackward(const AttentionBackwardParams& p) {
  const bool used = p.shape.b > 0 && p.shape.t > 0;
  Check c = AttentionShape("attention_backward", p.shape);
  c.Ptr("dout", p.dout, used).Ptr("q", p.q, used).Ptr("k", p.k, used).Ptr("v", p.v, used);
  c.Ptr("out", p.out, used).Ptr("lse", p.lse, used);
  c.Ptr("dq", p.dq, used).Ptr("dk", p.dk, used).Ptr("dv", p.dv, used);
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateCrossEntropy(const CrossEntropyParams& p) {
  const bool used = p.n > 0;
  Check c("cross_entropy");
  c.AtLeast("n", p.n, 0).AtLeast("v", p.v, 1);
  c.Ptr("logits", p.logits, used).Ptr("targets", p.targets, used);
  c.Ptr("losses", p.losses, used).Ptr("lse", p.lse, used);
  CheckRows(c, p.n, p.rows);
  return c.status();
}

absl::Status ValidateCrossEntropyBackward(const CrossEntropyBackwardParams& p) {
  const bool used = p.n > 0;
  Check c("cross_entropy_backward");
  c.AtLeast("n", p.n, 0).AtLeast("v", p.v, 1);
  c.Ptr("logits", p.logits, used).Ptr("lse", p.lse, used).Ptr("targets", p.targets, used);
  c.Ptr("dlogits", p.dlogits, used);
  CheckRows(c, p.n, p.rows);
  return c.status();
}

absl::Status ValidateResidual(const ResidualParams& p) {
  const bool used = p.n > 0;
  return Elementwise("residual", p.n)
      .Ptr("a", p.a, used).Ptr("b", p.b, used).Ptr("out", p.out, used)
      .Half("dtype", p.dtype).status();
}

absl::Status ValidateBiasAdd(const BiasAddParams& p) {
  const bool used = p.n > 0;
  Check c("bias_add");
  c.AtLeast("n", p.n, 0).AtLeast("c", p.c, 1);
  c.Ptr("inp", p.inp, used).Ptr("bias", p.bias, used).Ptr("out", p.out, used);
  c.Half("dtype", p.dtype);
  return c.status();
}

absl::Status ValidateBiasBackward(const BiasBackwardParams& p) {
  const bool used = p.n > 0;
  Check c("bias_backward");
  c.AtLeast("n", p.n, 0).AtLeast("c", p.c, 1);
  c.Ptr("dout", p.dout, used).Ptr("dbias", p.dbias, used);
  return c.status();
}

absl::Status ValidateAdamW(const AdamWParams& p) {
  const bool used = p.n > 0;
  Check c("adamw");
  c.AtLeast("n", p.n, 0).AtLeast("step", p.step, 1);
  c.Rule(std::isfinite(p.lr) && p.lr >= 0, absl::StrCat("lr = ", p.lr, ", want finite >= 0"));
  c.Rule(p.beta1 >= 0 && p.beta1 < 1, absl::StrCat("beta1 = ", p.beta1, ", want [0, 1)"));
  c.Rule(p.beta2 >= 0 && p.beta2 < 1, absl::StrCat("beta2 = ", p.beta2, ", want [0, 1)"));
  c.Rule(std::isfinite(p.eps) && p.eps > 0, absl::StrCat("eps = ", p.eps, ", want finite > 0"));
  c.Rule(std::isfinite(p.weight_decay) && p.weight_decay >= 0,
         absl::StrCat("weight_decay = ", p.weight_decay, ", want finite >= 0"));
  c.Rule(std::isfinite(p.grad_scale), absl::StrCat("grad_scale = ", p.grad_scale, ", want finite"));
  c.Ptr("master", p.master, used).Ptr("m", p.m, used).Ptr("v", p.v, used);
  c.Ptr("grad", p.grad, used);
  c.Half("out_type", p.out_type);
  return c.status();
}

absl::Status ValidateSumSquares(const SumSquaresParams& p) {
  Check c("sum_squares");
  c.AtLeast("n", p.n, 0).AtLeast("chunk", p.chunk, 0).Ptr("x", p.x, p.n > 0).Ptr("out", p.out);
  return c.status();
}

absl::Status ValidateDropout(const DropoutParams& p) {
  const bool used = p.n > 0 && p.c > 0;
  Check c("dropout");
  c.AtLeast("n", p.n, 0).AtLeast("c", p.c, 0).AtLeast("row_offset", p.row_offset, 0);
  c.Ptr("inp", p.inp, used).Ptr("out", p.out, used);
  c.Rule(p.p >= 0.0f && p.p < 1.0f, "p must be in [0, 1)");
  c.Rule(!p.accumulate || p.inp_type == DType::kFp32, "the backward (accumulate) takes fp32 inp");
  return c.status();
}

absl::Status ValidateDequantizeNf4(const DequantizeNf4Params& p) {
  Check c("dequantize_nf4");
  c.AtLeast("n", p.n, 0).Ptr("src", p.src, p.n > 0).Ptr("out", p.out, p.n > 0);
  c.Half("dst_type", p.dst_type);
  c.Rule(reinterpret_cast<uintptr_t>(p.src) % 4 == 0, "src must be 4-byte aligned");
  return c.status();
}

}  // namespace mobius::backend
