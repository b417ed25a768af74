#include "worker/model/linear.h"

#include "common/status_macros.h"

namespace mobius::units {

using backend::DType;
using backend::GemmParams;

namespace {

// xd [N, in] fp32 = the adapter's dropped-out input (linear.h LoraTerm).
absl::Status DropInput(backend::Backend& be, backend::Queue& q, const LoraTerm& l, const void* x,
                       DType x_type, int64_t n, int64_t in) {
  return be.Dropout(q, {.n = n, .c = in, .inp_type = x_type, .inp = x, .out = l.xd,
                        .accumulate = false, .p = l.dropout, .key = l.key,
                        .row_offset = l.row_offset});
}

// w itself, or (an NF4 base weight) w reading the 16-bit weight it dequantises into its scratch.
absl::StatusOr<LinearWeight> Readable(backend::Backend& be, backend::Queue& q, LinearWeight w) {
  if (w.nf4_elements == 0) return w;
  if (w.nf4_scratch == nullptr || w.dw != nullptr) {
    return absl::InvalidArgumentError("linear: an NF4 weight needs scratch and is frozen");
  }
  MOBIUS_RETURN_IF_ERROR(be.DequantizeNf4(
      q, {.n = w.nf4_elements, .src = w.w, .dst_type = w.dtype, .out = w.nf4_scratch}));
  w.w = w.nf4_scratch;
  w.nf4_elements = 0;
  return w;
}

}  // namespace

absl::Status LoraProjectInput(backend::Backend& be, backend::Queue& q, const LoraTerm& l,
                              const void* x, DType x_type, int64_t n, int64_t in) {
  if (l.a == nullptr) return absl::OkStatus();
  GemmParams h;  // h [N, r] = x A^T (xd A^T with dropout)
  h.m = n, h.n = l.rank, h.k = in;
  h.a_type = x_type, h.a = x, h.lda = in;
  if (l.dropout > 0) {
    MOBIUS_RETURN_IF_ERROR(DropInput(be, q, l, x, x_type, n, in));
    h.a_type = DType::kFp32, h.a = l.xd;
  }
  h.b_type = DType::kFp32, h.b = l.a, h.ldb = in, h.trans_b = true;
  h.c_type = DType::kFp32, h.c = l.h, h.ldc = l.rank;
  return be.Gemm(q, h);
}

absl::Status LinearForward(backend::Backend& be, backend::Queue& q, const LinearWeight& weight,
                           const void* x, void* y, DType y_type, int64_t n, int64_t in,
                           int64_t out) {
  MOBIUS_ASSIGN_OR_RETURN(const LinearWeight w, Readable(be, q, weight));
  GemmParams g;
  g.m = n, g.n = out, g.k = in;
  g.a_type = w.dtype, g.a = x, g.lda = in;
  // Conv1D: B = W [in, out] as stored; nn.Linear: B = W^T from W [out, in].
  g.b_type = w.dtype, g.b = w.w, g.ldb = w.ld, g.trans_b = !w.in_out;
  g.c_type = y_type, g.c = y, g.ldc = out;
  g.half_accumulate = w.half_accumulate && y_type == DType::kF16 && w.dtype == DType::kF16;
  MOBIUS_RETURN_IF_ERROR(be.Gemm(q, g));
  if (w.bias != nullptr) {
    if (y_type != w.dtype && y_type != DType::kFp32) {
      return absl::InvalidArgumentError("linear: bias needs a 16-bit or fp32 output");
    }
    MOBIUS_RETURN_IF_ERROR(be.BiasAdd(q, {.dtype = w.dtype, .n = n, .c = out,
                                          .fp32_rows = y_type == DType::kFp32, .inp = y,
                                          .bias = w.bias, .out = y}));
  }
  const LoraTerm& l = w.lora;
  if (l.a == nullptr) return absl::OkStatus();
  if (l.first) MOBIUS_RETURN_IF_ERROR(LoraProjectInput(be, q, l, x, w.dtype, n, in));
  GemmParams d;  // y += scale h B^T
  d.m = n, d.n = out, d.k = l.rank;
  d.alpha = l.scale, d.beta = 1.0f;
  d.a_type = DType::kFp32, d.a = l.h, d.lda = l.rank;
  d.b_type = DType::kFp32, d.b = l.b, d.ldb = l.rank, d.trans_b = true;
  d.c_type = y_type, d.c = y, d.ldc = out;
  return be.Gemm(q, d);
}

namespace {

// The adapter's part of LinearBackward (linear.h).
absl::Status LoraBackward(backend::Backend& be, backend::Queue& q, const LoraTerm& l,
                          const void* x, DType x_type, const void* dy, DType dy_type, float* dx,
                          int64_t n, int64_t in, int64_t out) {
  GemmParams gh;  // gh [N, r] (+)= scale dy B
  gh.m = n, gh.n = l.rank, gh.k = out;
  gh.alpha = l.scale, gh.beta = l.first ? 0.0f : 1.0f;
  gh.a_type = dy_type, gh.a = dy, gh.lda = out;
  gh.b_type = DType::kFp32, gh.b = l.b, gh.ldb = l.rank;
  gh.c_type = DType::kFp32, gh.c = l.gh, gh.ldc = l.rank;
  MOBIUS_RETURN_IF_ERROR(be.Gemm(q, gh));
  GemmParams db;  // dB [out, r] += scale dy^T h
  db.m = out, db.n = l.rank, db.k = n;
  db.alpha = l.scale, db.beta = 1.0f, db.trans_a = true;
  db.a_type = dy_type, db.a = dy, db.lda = out;
  db.b_type = DType::kFp32, db.b = l.h, db.ldb = l.rank;
  db.c_type = DType::kFp32, db.c = l.db, db.ldc = l.rank;
  MOBIUS_RETURN_IF_ERROR(be.Gemm(q, db));
  if (!l.last) return absl::OkStatus();
  const bool drop = l.dropout > 0;
  GemmParams da;  // dA [r, in] += gh^T x (xd, regenerated, with dropout)
  da.m = l.rank, da.n = in, da.k = n;
  da.beta = 1.0f, da.trans_a = true;
  da.a_type = DType::kFp32, da.a = l.gh, da.lda = l.rank;
  da.b_type = x_type, da.b = x, da.ldb = in;
  if (drop) {
    MOBIUS_RETURN_IF_ERROR(DropInput(be, q, l, x, x_type, n, in));
    da.b_type = DType::kFp32, da.b = l.xd;
  }
  da.c_type = DType::kFp32, da.c = l.da, da.ldc = in;
  MOBIUS_RETURN_IF_ERROR(be.Gemm(q, da));
  if (dx == nullptr) return absl::OkStatus();
  GemmParams g;  // dx [N, in] += gh A (with dropout: xd = gh A, then dx += mask(xd) / (1 - p))
  g.m = n, g.n = in, g.k = l.rank;
  g.beta = drop ? 0.0f : 1.0f;
  g.a_type = DType::kFp32, g.a = l.gh, g.lda = l.rank;
  g.b_type = DType::kFp32, g.b = l.a, g.ldb = in;
  g.c_type = DType::kFp32, g.c = drop ? l.xd : dx, g.ldc = in;
  MOBIUS_RETURN_IF_ERROR(be.Gemm(q, g));
  if (!drop) return absl::OkStatus();
  return be.Dropout(q, {.n = n, .c = in, .inp_type = DType::kFp32, .inp = l.xd, .out = dx,
                        .accumulate = true, .p = l.dropout, .key = l.key,
                        .row_offset = l.row_offset});
}

// dW (+)= x^T dy in W's layout: into the fp32 dw, or (half_dw) into the fp16 scratch, added into
// dw after the call's last chunk.
absl::Status WeightGradient(backend::Backend& be, backend::Queue& q, const LinearWeight& w,
                            const void* x, const void* dy, DType dy_type, bool half_dw,
                            bool sum_half, int64_t n, int64_t in, int64_t out) {
  GemmParams g;
  g.beta = 1.0f, g.trans_a = true;
  g.c_type = DType::kFp32, g.c = w.dw, g.ldc = w.ld;
  if (half_dw) {
    g.beta = w.dw_half_first ? 0.0f : 1.0f;
    g.c_type = DType::kF16, g.c = w.dw_half;
    g.half_accumulate = sum_half;
  }
  if (w.in_out) {  // dW [in, out] = x^T dy
    g.m = in, g.n = out, g.k = n;
    g.a_type = w.dtype, g.a = x, g.lda = in;
    g.b_type = dy_type, g.b = dy, g.ldb = out;
  } else {  // dW [out, in] = dy^T x
    g.m = out, g.n = in, g.k = n;
    g.a_type = dy_type, g.a = dy, g.lda = out;
    g.b_type = w.dtype, g.b = x, g.ldb = in;
  }
  MOBIUS_RETURN_IF_ERROR(be.Gemm(q, g));
  if (half_dw && w.dw_half_last) {
    MOBIUS_RETURN_IF_ERROR(be.Cast(q, {.n = in * out, .src_type = DType::kF16,
                                       .dst_type = DType::kFp32, .src = w.dw_half, .dst = w.dw,
                                       .accumulate = true}));
  }
  return absl::OkStatus();
}

// The fp16 dW of an [out, in] weight dw_block_rows output rows at a time through the
// block-sized scratch, each block added into its rows of the fp32 dw (LinearWeight::dw_block_rows).
absl::Status BlockedHalfWeightGradient(backend::Backend& be, backend::Queue& q,
                                       const LinearWeight& w, const void* x, const void* dy,
                                       DType dy_type, bool sum_half, int64_t n, int64_t in,
                                       int64_t out) {
  if (w.in_out || !w.dw_half_first || !w.dw_half_last) {
    return absl::InvalidArgumentError(
        "linear: a blocked fp16 dW takes an [out, in] weight in a call of its own");
  }
  for (int64_t r0 = 0; r0 < out; r0 += w.dw_block_rows) {  // dW[r0 .. r0 + rows) = dy^T x
    const int64_t rows = std::min(w.dw_block_rows, out - r0);
    GemmParams g;
    g.trans_a = true, g.m = rows, g.n = in, g.k = n;
    g.a_type = dy_type, g.a = static_cast<const uint16_t*>(dy) + r0, g.lda = out;
    g.b_type = w.dtype, g.b = x, g.ldb = in;
    g.c_type = DType::kF16, g.c = w.dw_half, g.ldc = in;
    g.half_accumulate = sum_half;
    MOBIUS_RETURN_IF_ERROR(be.Gemm(q, g));
    MOBIUS_RETURN_IF_ERROR(be.Cast(q, {.n = rows * in, .src_type = DType::kF16,
                                       .dst_type = DType::kFp32, .src = w.dw_half,
                                       .dst = w.dw + r0 * in, .accumulate = true}));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LinearBackward(backend::Backend& be, backend::Queue& q, const LinearWeight& w,
                            const void* x, const void* dy, DType dy_type, void* dx,
                            DType dx_type, bool accumulate_dx, int64_t n, int64_t in,
                            int64_t out) {
  const bool half = w.half_backward;
  if (half && (w.lora.a != nullptr || w.dtype != DType::kF16)) {
    return absl::InvalidArgumentError("linear: the fp16 backward takes fp16 weights, no adapter");
  }
  if (IsHalf(dx_type) && !half) {
    return absl::InvalidArgumentError("linear: a 16-bit input gradient needs the fp16 backward");
  }
  if (half && dy_type == DType::kFp32) {  // round dy to fp16 once: every GEMM below reads it
    if (w.dy_half == nullptr) return absl::InvalidArgumentError("linear: no dy_half scratch");
    MOBIUS_RETURN_IF_ERROR(be.Cast(q, {.n = n * out, .src_type = DType::kFp32,
                                       .dst_type = DType::kF16, .src = dy, .dst = w.dy_half}));
    dy = w.dy_half, dy_type = DType::kF16;
  }
  // fp16 A, B and C: the products sum in fp16 where the device is faster so.
  const bool sum_half = half && w.half_accumulate && dy_type == DType::kF16;
  if (dx != nullptr) {  // dx [N, in] = dy [N, out] * W^T
    MOBIUS_ASSIGN_OR_RETURN(const LinearWeight wd, Readable(be, q, w));
    GemmParams g;
    g.m = n, g.n = in, g.k = out;
    g.a_type = dy_type, g.a = dy, g.lda = out;
    g.b_type = wd.dtype, g.b = wd.w, g.ldb = wd.ld, g.trans_b = wd.in_out;
    g.c_type = dx_type, g.c = dx, g.ldc = in, g.beta = accumulate_dx ? 1.0f : 0.0f;
    g.half_accumulate = sum_half && dx_type == DType::kF16;
    MOBIUS_RETURN_IF_ERROR(be.Gemm(q, g));
  }
  if (w.lora.a != nullptr) {
    MOBIUS_RETURN_IF_ERROR(LoraBackward(be, q, w.lora, x, w.dtype, dy, dy_type,
                                        static_cast<float*>(dx), n, in, out));
  }
  if (w.dw == nullptr) {  // frozen: no weight gradient
    if (w.dbias == nullptr) return absl::OkStatus();
    return be.BiasBackward(q, {.n = n, .c = out, .dout_type = dy_type, .dout = dy,
                               .dbias = w.dbias});
  }
  // fp16: this call's dW in fp16 scratch (contiguous weights), then added into the fp32 dw.
  const bool half_dw = half && w.dw_half != nullptr && w.ld == (w.in_out ? out : in);
  if (half_dw && w.dw_block_rows > 0 && w.dw_block_rows < out) {
    MOBIUS_RETURN_IF_ERROR(BlockedHalfWeightGradient(be, q, w, x, dy, dy_type, sum_half, n, in, out));
  } else {
    MOBIUS_RETURN_IF_ERROR(WeightGradient(be, q, w, x, dy, dy_type, half_dw, sum_half, n, in, out));
  }
  if (w.dbias == nullptr) return absl::OkStatus();
  return be.BiasBackward(q, {.n = n, .c = out, .dout_type = dy_type, .dout = dy, .dbias = w.dbias});
}

}  // namespace mobius::units
