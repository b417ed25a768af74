// Internal to the attention kernels: a key/value tile in fp32, the index arithmetic and the
// per-row masking shared by attention_fwd.cc and attention_bwd.cc. The products of a tile
// (scores, P V, dS K, ...) are TileGemm calls (tile_gemm.h) on these fp32 layouts.
#ifndef MOBIUS_WORKER_KERNELS_CPU_ATTENTION_TILE_H_
#define MOBIUS_WORKER_KERNELS_CPU_ATTENTION_TILE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/fast_math.h"
#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu::attention_internal {

inline constexpr int64_t kQueryTile = 32;  // Br: query rows per forward / dQ work item
inline constexpr int64_t kKeyTile = 64;    // Bc: keys per tile

// Offset of row (b, t, head) in [B, T, NH, hd].
inline int64_t Row(const AttentionShape& s, int64_t b, int64_t t, int64_t nh, int64_t head) {
  return ((b * s.t + t) * nh + head) * s.head_dim;
}
// Offset of (b, h, t) in [B, H, T].
inline int64_t LseIndex(const AttentionShape& s, int64_t b, int64_t h, int64_t t) {
  return (b * s.heads + h) * s.t + t;
}
// First key position query t may attend to.
inline int64_t FirstKey(const AttentionShape& s, int64_t t) {
  return s.window > 0 ? std::max<int64_t>(0, t - s.window + 1) : 0;
}
// Last query position that attends to key t2.
inline int64_t LastQuery(const AttentionShape& s, int64_t t2) {
  return s.window > 0 ? std::min<int64_t>(s.t - 1, t2 + s.window - 1) : s.t - 1;
}

// Keys [k0, k0 + len) of one (batch, kv head) in fp32, row-major ([key, d]: the B of P V and
// dS K) and transposed ([d, key]: the B of Q K^T and dO V^T). Columns len..kKeyTile of the
// transposed copies are zero, so a score tile may be computed RoundUp8(len) wide.
struct KvTile {
  explicit KvTile(int64_t hd)
      : hd(hd), k(kKeyTile * hd), v(kKeyTile * hd), kt(hd * kKeyTile), vt(hd * kKeyTile) {}

  template <typename T>  // the storage format (storage.h)
  void Load(const T* kp, const T* vp, const AttentionShape& s, int64_t b, int64_t kvh,
            int64_t first, int64_t count) {
    k0 = first;
    len = count;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t off = Row(s, b, k0 + j, s.kv_heads, kvh);
      LoadRow(&k[j * hd], kp + off, hd);
      LoadRow(&v[j * hd], vp + off, hd);
      for (int64_t d = 0; d < hd; ++d) {
        kt[d * kKeyTile + j] = k[j * hd + d];
        vt[d * kKeyTile + j] = v[j * hd + d];
      }
    }
    for (int64_t d = 0; d < hd && len < kKeyTile; ++d) {
      std::fill(&kt[d * kKeyTile + len], &kt[(d + 1) * kKeyTile], 0.0f);
      std::fill(&vt[d * kKeyTile + len], &vt[(d + 1) * kKeyTile], 0.0f);
    }
  }

  // Tile-relative range of keys that query t may see; empty when j0 >= j1.
  void Visible(const AttentionShape& s, int64_t t, int64_t* j0, int64_t* j1) const {
    *j0 = std::max<int64_t>(FirstKey(s, t), k0) - k0;
    *j1 = std::min<int64_t>(t + 1, k0 + len) - k0;
  }

  // Columns of a score tile: len rounded up to whole F32x8 vectors.
  int64_t width() const { return (len + 7) / 8 * 8; }

  int64_t hd;
  int64_t k0 = 0, len = 0;
  std::vector<float> k, v;    // [Bc, hd]
  std::vector<float> kt, vt;  // [hd, Bc]
};

// Lanes [8 * vec, 8 * vec + 8) of a score row inside [j0, j1): all bits set, else 0.
MOBIUS_SIMD_INLINE I32x8 VisibleLanes(int64_t vec, int64_t j0, int64_t j1) {
  const I32x8 j = I32x8{0, 1, 2, 3, 4, 5, 6, 7} + static_cast<int32_t>(8 * vec);
  return (j >= static_cast<int32_t>(j0)) & (j < static_cast<int32_t>(j1));
}

// q rows [rows x hd] (and, when qt is not null, transposed [hd x rows]) of (b, t0.., nh, head).
template <typename T>
inline void LoadRows(float* q, float* qt, const T* src, const AttentionShape& s, int64_t b,
                     int64_t t0, int64_t rows, int64_t nh, int64_t head) {
  const int64_t hd = s.head_dim;
  for (int64_t i = 0; i < rows; ++i) LoadRow(&q[i * hd], src + Row(s, b, t0 + i, nh, head), hd);
  if (qt == nullptr) return;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t d = 0; d < hd; ++d) qt[d * rows + i] = q[i * hd + d];
  }
}

}  // namespace mobius::kernels::cpu::attention_internal

#endif  // MOBIUS_WORKER_KERNELS_CPU_ATTENTION_TILE_H_
