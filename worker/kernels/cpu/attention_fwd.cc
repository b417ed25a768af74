// attention_fwd: one work item per (batch, head, query tile); each keeps the running max m, the
// running sum l and the unnormalised output of its rows in fp32 while it walks the key tiles.
#include <algorithm>
#include <cmath>
#include <vector>

#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/attention_tile.h"
#include "worker/kernels/cpu/fast_math.h"
#include "worker/kernels/cpu/tile_gemm.h"

namespace mobius::kernels::cpu {

using attention_internal::FirstKey;
using attention_internal::kKeyTile;
using attention_internal::KvTile;
using attention_internal::kQueryTile;
using attention_internal::LoadRows;
using attention_internal::LseIndex;
using attention_internal::Row;
using attention_internal::VisibleLanes;
using tile_internal::TileGemm;

namespace {

// Scores of one query row in the current key tile -> its unnormalised probabilities, updating the
// running max m and sum l (online softmax). p [w] holds q.k on entry; keys outside [j0, j1) get
// p = 0. Returns alpha = exp(m_old - m_new), the factor for the row's accumulated output.
// REQUIRES: j0 < j1 <= w, w a multiple of 8.
MOBIUS_SIMD_INLINE float SoftmaxRow(float* p, int64_t w, int64_t j0, int64_t j1, float scale, float* m,
                        float* l) {
  const F32x8 neg_inf = Splat8(-INFINITY);
  F32x8 vmax = neg_inf;
  for (int64_t v = 0; v < w / 8; ++v) {
    const F32x8 x = VisibleLanes(v, j0, j1) ? Load8(p + 8 * v) * scale : neg_inf;
    Store8(p + 8 * v, x);
    vmax = x > vmax ? x : vmax;
  }
  float tile_max = -INFINITY;
  for (int lane = 0; lane < 8; ++lane) tile_max = std::max(tile_max, vmax[lane]);
  const float m_new = std::max(*m, tile_max);
  const float alpha = FastExp(*m - m_new);  // 0 on the first visible tile
  F32x8 vsum = Splat8(0.0f);
  for (int64_t v = 0; v < w / 8; ++v) {
    const F32x8 e = FastExp(Load8(p + 8 * v) - m_new);  // exp(-inf) == 0: masked keys
    Store8(p + 8 * v, e);
    vsum += e;
  }
  float sum = 0.0f;
  for (int lane = 0; lane < 8; ++lane) sum += vsum[lane];
  *l = *l * alpha + sum;
  *m = m_new;
  return alpha;
}

// One work item: query rows [t0, t1) of (b, h), at positions start + t0 .. start + t1 - 1 of their
// sequence. `qs` shapes q, out and lse (t: the queries); `kvs` shapes k and v (t: their rows per
// sequence, >= start + t1). Per key tile: S = Q K^T and O += P V as tile GEMMs, the online softmax
// on each row of S in between. Key tiles start at FirstKey of the tile's first position, so a row
// sees the same tiles (and gets the same bits) at any start when the window is 0.
template <typename T>  // the storage format (storage.h); one clone set per format
MOBIUS_KERNEL_CLONES void ForwardItem(T* out, float* lse, const T* q, const T* k, const T* v,
                                      const AttentionShape& qs, const AttentionShape& kvs,
                                      int64_t start, float scale, int64_t item) {
  const int64_t hd = qs.head_dim, group = qs.heads / qs.kv_heads;
  const int64_t q_tiles = (qs.t + kQueryTile - 1) / kQueryTile;
  const int64_t b = item / (qs.heads * q_tiles), h = item / q_tiles % qs.heads;
  const int64_t t0 = item % q_tiles * kQueryTile, t1 = std::min(qs.t, t0 + kQueryTile);
  const int64_t rows = t1 - t0, kvh = h / group;
  const int64_t p0 = start + t0, p1 = start + t1;  // positions of the rows
  std::vector<float> qv(rows * hd), acc(rows * hd, 0.0f), scores(rows * kKeyTile);
  std::vector<float> m(rows, -INFINITY), l(rows, 0.0f);
  LoadRows(qv.data(), nullptr, q, qs, b, t0, rows, qs.heads, h);
  KvTile tile(hd);
  for (int64_t k0 = FirstKey(kvs, p0); k0 < p1; k0 += kKeyTile) {
    tile.Load(k, v, kvs, b, kvh, k0, std::min(kKeyTile, p1 - k0));
    const int64_t w = tile.width();
    std::fill(scores.begin(), scores.end(), 0.0f);
    TileGemm(scores.data(), kKeyTile, qv.data(), hd, tile.kt.data(), kKeyTile, rows, w, hd);
    for (int64_t i = 0; i < rows; ++i) {
      float* p = &scores[i * kKeyTile];
      int64_t j0, j1;
      tile.Visible(kvs, p0 + i, &j0, &j1);
      if (j0 >= j1) {  // nothing visible in this tile: the row is left as it is
        std::fill(p, p + w, 0.0f);
        continue;
      }
      const float alpha = SoftmaxRow(p, w, j0, j1, scale, &m[i], &l[i]);
      float* a = &acc[i * hd];
      for (int64_t d = 0; d < hd; ++d) a[d] *= alpha;
    }
    TileGemm(acc.data(), hd, scores.data(), kKeyTile, tile.v.data(), hd, rows, hd, tile.len);
  }
  for (int64_t i = 0; i < rows; ++i) {
    float* a = &acc[i * hd];
    const float inv_l = 1.0f / l[i];
    for (int64_t d = 0; d < hd; ++d) a[d] *= inv_l;
    StoreRow(out + Row(qs, b, t0 + i, qs.heads, h), a, hd);
    if (lse != nullptr) lse[LseIndex(qs, b, h, t0 + i)] = m[i] + std::log(l[i]);
  }
}

float Scale(const AttentionShape& s) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

template <typename T>
void Forward(T* out, float* lse, const T* q, const T* k, const T* v, const AttentionShape& s,
             ThreadPool* pool) {
  const int64_t q_tiles = (s.t + kQueryTile - 1) / kQueryTile;
  const float scale = Scale(s);
  ParallelFor(pool, s.b * s.heads * q_tiles,
              [&](int64_t item) { ForwardItem(out, lse, q, k, v, s, s, 0, scale, item); });
}

template <typename T>
void CachedForward(T* out, float* lse, const T* q, const T* k_cache, const T* v_cache,
                   const AttentionShape& s, int64_t start, int64_t capacity, ThreadPool* pool) {
  AttentionShape kvs = s;
  kvs.t = capacity;
  const int64_t q_tiles = (s.t + kQueryTile - 1) / kQueryTile;
  const float scale = Scale(s);
  ParallelFor(pool, s.b * s.heads * q_tiles, [&](int64_t item) {
    ForwardItem(out, lse, q, k_cache, v_cache, s, kvs, start, scale, item);
  });
}

}  // namespace

void attention_fwd(uint16_t* out, float* lse, const uint16_t* q, const uint16_t* k,
                   const uint16_t* v, const AttentionShape& s, ThreadPool* pool) {
  Forward(out, lse, q, k, v, s, pool);
}
void attention_fwd(F16* out, float* lse, const F16* q, const F16* k, const F16* v,
                   const AttentionShape& s, ThreadPool* pool) {
  Forward(out, lse, q, k, v, s, pool);
}

void attention_cached_fwd(uint16_t* out, float* lse, const uint16_t* q, const uint16_t* k_cache,
                          const uint16_t* v_cache, const AttentionShape& s, int64_t start,
                          int64_t capacity, ThreadPool* pool) {
  CachedForward(out, lse, q, k_cache, v_cache, s, start, capacity, pool);
}
void attention_cached_fwd(F16* out, float* lse, const F16* q, const F16* k_cache,
                          const F16* v_cache, const AttentionShape& s, int64_t start,
                          int64_t capacity, ThreadPool* pool) {
  CachedForward(out, lse, q, k_cache, v_cache, s, start, capacity, pool);
}

}  // namespace mobius::kernels::cpu
