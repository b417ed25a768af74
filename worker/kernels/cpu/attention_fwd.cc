// attention_fwd: one work item per (batch, head, query tile); each keeps the running max m, the
// running sum l and the unnormalised output of its rows in fp32 while it walks the key tiles.
#include <cmath>
#include <vector>

#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/attention_tile.h"
#include "worker/kernels/cpu/fast_math.h"

namespace mobius::kernels::cpu {

using attention_internal::FirstKey;
using attention_internal::kKeyTile;
using attention_internal::KvTile;
using attention_internal::kQueryTile;
using attention_internal::LseIndex;
using attention_internal::Row;

namespace {

// One work item: query rows [t0, t1) of (b, h). Score rows are staged in a float array so that the
// scale, exp and p.v loops each run over contiguous memory and vectorise.
MOBIUS_KERNEL_CLONES
void ForwardItem(uint16_t* out, float* lse, const uint16_t* q, const uint16_t* k,
                 const uint16_t* v, const AttentionShape& s, float scale, int64_t item) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t q_tiles = (s.t + kQueryTile - 1) / kQueryTile;
  const int64_t b = item / (s.heads * q_tiles), h = item / q_tiles % s.heads;
  const int64_t t0 = item % q_tiles * kQueryTile, t1 = std::min(s.t, t0 + kQueryTile);
  const int64_t rows = t1 - t0, kvh = h / group;
  std::vector<float> qs(rows * hd), acc(rows * hd, 0.0f);
  std::vector<float> m(rows, -INFINITY), l(rows, 0.0f);
  for (int64_t i = 0; i < rows; ++i) LoadRow(&qs[i * hd], q + Row(s, b, t0 + i, s.heads, h), hd);
  KvTile tile(hd);
  float p[kKeyTile];
  for (int64_t k0 = FirstKey(s, t0); k0 < t1; k0 += kKeyTile) {
    tile.Load(k, v, s, b, kvh, k0, std::min(kKeyTile, t1 - k0));
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j0, j1;
      tile.Visible(s, t0 + i, &j0, &j1);
      if (j0 >= j1) continue;
      tile.Dots(tile.kt, &qs[i * hd], j0, j1, p);
      for (int64_t j = j0; j < j1; ++j) p[j] *= scale;
      float tile_max = -INFINITY;
      for (int64_t j = j0; j < j1; ++j) tile_max = std::max(tile_max, p[j]);
      const float m_new = std::max(m[i], tile_max);
      const float alpha = FastExp(m[i] - m_new);  // 0 on the first visible tile
      for (int64_t j = j0; j < j1; ++j) p[j] = FastExp(p[j] - m_new);
      float sum = 0.0f;
      for (int64_t j = j0; j < j1; ++j) sum += p[j];
      l[i] = l[i] * alpha + sum;
      m[i] = m_new;
      float* a = &acc[i * hd];
      for (int64_t d = 0; d < hd; ++d) a[d] *= alpha;
      for (int64_t j = j0; j < j1; ++j) {
        const float pj = p[j];
        const float* vj = &tile.v[j * hd];
        for (int64_t d = 0; d < hd; ++d) a[d] += pj * vj[d];
      }
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    uint16_t* o = out + Row(s, b, t0 + i, s.heads, h);
    const float inv_l = 1.0f / l[i];
    for (int64_t d = 0; d < hd; ++d) o[d] = numeric::Fp32ToBf16(acc[i * hd + d] * inv_l);
    lse[LseIndex(s, b, h, t0 + i)] = m[i] + std::log(l[i]);
  }
}

}  // namespace

void attention_fwd(uint16_t* out, float* lse, const uint16_t* q, const uint16_t* k,
                   const uint16_t* v, const AttentionShape& s, ThreadPool* pool) {
  const int64_t q_tiles = (s.t + kQueryTile - 1) / kQueryTile;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  ParallelFor(pool, s.b * s.heads * q_tiles,
              [&](int64_t item) { ForwardItem(out, lse, q, k, v, s, scale, item); });
}

}  // namespace mobius::kernels::cpu
