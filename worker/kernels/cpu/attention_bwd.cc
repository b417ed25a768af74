// attention_bwd: D = rowsum(dO * O), then two race-free passes that both recompute P per tile
// (see attention.h): dK/dV per (batch, kv head, key tile), dQ per (batch, head, query tile).
#include <algorithm>
#include <cmath>
#include <vector>

#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/attention_tile.h"
#include "worker/kernels/cpu/fast_math.h"
#include "worker/kernels/cpu/tile_gemm.h"

namespace mobius::kernels::cpu {
namespace {

using attention_internal::FirstKey;
using attention_internal::kKeyTile;
using attention_internal::KvTile;
using attention_internal::kQueryTile;
using attention_internal::LastQuery;
using attention_internal::LoadRows;
using attention_internal::LseIndex;
using attention_internal::Row;
using attention_internal::VisibleLanes;
using tile_internal::TileGemm;

// One query row against one key tile: on entry p [w] = q.k and dp [w] = dO.v; on return p = P
// and dp = dS (times the score scale), both 0 for keys outside [j0, j1). REQUIRES: w % 8 == 0.
MOBIUS_SIMD_INLINE void RowGrad(float* p, float* dp, int64_t w, int64_t j0, int64_t j1, float lse,
                                float d, float scale) {
  for (int64_t v = 0; v < w / 8; ++v) {
    const F32x8 pv = FastExp(Load8(p + 8 * v) * scale - lse);
    const F32x8 prob = VisibleLanes(v, j0, j1) ? pv : Splat8(0.0f);
    Store8(p + 8 * v, prob);
    Store8(dp + 8 * v, prob * (Load8(dp + 8 * v) - d) * scale);
  }
}

// S = Q K^T and dP = dO V^T of `rows` query rows (row-major [rows, hd]) against the key tile, then
// P and dS in place (RowGrad) for query positions t0.. of head h. Tiles are [rows, kKeyTile].
MOBIUS_SIMD_INLINE void ProbsAndGrads(float* p, float* dp, const float* qs, const float* dos,
                                      const KvTile& tile, const AttentionShape& s, int64_t b,
                                      int64_t h, int64_t t0, int64_t rows, const float* lse,
                                      const float* dvec, float scale) {
  const int64_t hd = s.head_dim, w = tile.width();
  std::fill(p, p + rows * kKeyTile, 0.0f);
  std::fill(dp, dp + rows * kKeyTile, 0.0f);
  TileGemm(p, kKeyTile, qs, hd, tile.kt.data(), kKeyTile, rows, w, hd);
  TileGemm(dp, kKeyTile, dos, hd, tile.vt.data(), kKeyTile, rows, w, hd);
  for (int64_t i = 0; i < rows; ++i) {
    int64_t j0, j1;
    tile.Visible(s, t0 + i, &j0, &j1);
    const int64_t li = LseIndex(s, b, h, t0 + i);
    RowGrad(&p[i * kKeyTile], &dp[i * kKeyTile], w, j0, j1, lse[li], dvec[li], scale);
  }
}

// dst [n] (16-bit) += src [n] fp32, one rounding per element.
template <typename T>
void AccumulateRow(T* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) Store(dst, i, Load(dst, i) + src[i]);
}

// D[b, h, t] = sum_d dout * out.
template <typename T>
std::vector<float> RowDotDoutOut(const T* dout, const T* out, const AttentionShape& s,
                                 ThreadPool* pool) {
  std::vector<float> d(s.b * s.heads * s.t);
  ParallelFor(pool, s.b * s.t, [&](int64_t bt) {
    const int64_t b = bt / s.t, t = bt % s.t;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t off = Row(s, b, t, s.heads, h);
      float acc = 0.0f;
      for (int64_t i = 0; i < s.head_dim; ++i) {
        acc += Load(dout + off, i) * Load(out + off, i);
      }
      d[LseIndex(s, b, h, t)] = acc;
    }
  });
  return d;
}

// dK, dV of one key tile: work item `item` of KeyValuePass. Query rows come in blocks of
// kQueryTile; per block dV^T += dO^T P and dK^T += Q^T dS (tile GEMMs, transposed so that the
// block's rows are the reduction), accumulated over the heads of the group and the rows in order.
template <typename T>  // the storage format (storage.h); one clone set per format
MOBIUS_KERNEL_CLONES void KeyValueItem(T* dk, T* dv, const T* dout, const T* q, const T* k,
                                       const T* v, const float* lse, const float* dvec,
                                       const AttentionShape& s, float scale, int64_t item) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t k_tiles = (s.t + kKeyTile - 1) / kKeyTile;
  const int64_t b = item / (s.kv_heads * k_tiles), kvh = item / k_tiles % s.kv_heads;
  const int64_t k0 = item % k_tiles * kKeyTile, len = std::min(kKeyTile, s.t - k0);
  KvTile tile(hd);
  tile.Load(k, v, s, b, kvh, k0, len);
  const int64_t w = tile.width();
  std::vector<float> dkt(hd * kKeyTile, 0.0f), dvt(hd * kKeyTile, 0.0f);  // [hd, Bc]
  std::vector<float> qs(kQueryTile * hd), qst(hd * kQueryTile), dos(kQueryTile * hd),
      dost(hd * kQueryTile), p(kQueryTile * kKeyTile), ds(kQueryTile * kKeyTile);
  const int64_t last_query = LastQuery(s, k0 + len - 1);
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (int64_t t0 = k0; t0 <= last_query; t0 += kQueryTile) {
      const int64_t rows = std::min(kQueryTile, last_query + 1 - t0);
      LoadRows(qs.data(), qst.data(), q, s, b, t0, rows, s.heads, h);
      LoadRows(dos.data(), dost.data(), dout, s, b, t0, rows, s.heads, h);
      ProbsAndGrads(p.data(), ds.data(), qs.data(), dos.data(), tile, s, b, h, t0, rows, lse, dvec,
                    scale);
      TileGemm(dvt.data(), kKeyTile, dost.data(), rows, p.data(), kKeyTile, hd, w, rows);
      TileGemm(dkt.data(), kKeyTile, qst.data(), rows, ds.data(), kKeyTile, hd, w, rows);
    }
  }
  std::vector<float> row(hd);
  for (int64_t j = 0; j < len; ++j) {
    const int64_t off = Row(s, b, k0 + j, s.kv_heads, kvh);
    for (int64_t d = 0; d < hd; ++d) row[d] = dkt[d * kKeyTile + j];
    AccumulateRow(dk + off, row.data(), hd);
    for (int64_t d = 0; d < hd; ++d) row[d] = dvt[d * kKeyTile + j];
    AccumulateRow(dv + off, row.data(), hd);
  }
}

template <typename T>
void KeyValuePass(T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                  const float* lse, const float* dvec, const AttentionShape& s, float scale,
                  ThreadPool* pool) {
  const int64_t k_tiles = (s.t + kKeyTile - 1) / kKeyTile;
  ParallelFor(pool, s.b * s.kv_heads * k_tiles, [&](int64_t item) {
    KeyValueItem(dk, dv, dout, q, k, v, lse, dvec, s, scale, item);
  });
}

// dQ of one query tile: work item `item` of QueryPass; per key tile dQ += dS K (a tile GEMM).
template <typename T>
MOBIUS_KERNEL_CLONES void QueryItem(T* dq, const T* dout, const T* q, const T* k, const T* v,
                                    const float* lse, const float* dvec, const AttentionShape& s,
                                    float scale, int64_t item) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t q_tiles = (s.t + kQueryTile - 1) / kQueryTile;
  const int64_t b = item / (s.heads * q_tiles), h = item / q_tiles % s.heads;
  const int64_t t0 = item % q_tiles * kQueryTile, t1 = std::min(s.t, t0 + kQueryTile);
  const int64_t rows = t1 - t0, kvh = h / group;
  std::vector<float> qs(rows * hd), dos(rows * hd), dqt(rows * hd, 0.0f);
  std::vector<float> p(rows * kKeyTile), ds(rows * kKeyTile);
  LoadRows(qs.data(), nullptr, q, s, b, t0, rows, s.heads, h);
  LoadRows(dos.data(), nullptr, dout, s, b, t0, rows, s.heads, h);
  KvTile tile(hd);
  for (int64_t k0 = FirstKey(s, t0); k0 < t1; k0 += kKeyTile) {
    tile.Load(k, v, s, b, kvh, k0, std::min(kKeyTile, t1 - k0));
    ProbsAndGrads(p.data(), ds.data(), qs.data(), dos.data(), tile, s, b, h, t0, rows, lse, dvec,
                  scale);
    TileGemm(dqt.data(), hd, ds.data(), kKeyTile, tile.k.data(), hd, rows, hd, tile.len);
  }
  for (int64_t i = 0; i < rows; ++i) {
    AccumulateRow(dq + Row(s, b, t0 + i, s.heads, h), &dqt[i * hd], hd);
  }
}

template <typename T>
void QueryPass(T* dq, const T* dout, const T* q, const T* k, const T* v, const float* lse,
               const float* dvec, const AttentionShape& s, float scale, ThreadPool* pool) {
  const int64_t q_tiles = (s.t + kQueryTile - 1) / kQueryTile;
  ParallelFor(pool, s.b * s.heads * q_tiles, [&](int64_t item) {
    QueryItem(dq, dout, q, k, v, lse, dvec, s, scale, item);
  });
}

template <typename T>
void Backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
              const float* lse, const AttentionShape& s, ThreadPool* pool) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  const std::vector<float> dvec = RowDotDoutOut(dout, out, s, pool);
  KeyValuePass(dk, dv, dout, q, k, v, lse, dvec.data(), s, scale, pool);
  QueryPass(dq, dout, q, k, v, lse, dvec.data(), s, scale, pool);
}

}  // namespace

void attention_bwd(uint16_t* dq, uint16_t* dk, uint16_t* dv, const uint16_t* dout,
                   const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* out,
                   const float* lse, const AttentionShape& s, ThreadPool* pool) {
  Backward(dq, dk, dv, dout, q, k, v, out, lse, s, pool);
}
void attention_bwd(F16* dq, F16* dk, F16* dv, const F16* dout, const F16* q, const F16* k,
                   const F16* v, const F16* out, const float* lse, const AttentionShape& s,
                   ThreadPool* pool) {
  Backward(dq, dk, dv, dout, q, k, v, out, lse, s, pool);
}

}  // namespace mobius::kernels::cpu
