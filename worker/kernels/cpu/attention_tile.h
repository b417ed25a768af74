// Internal to the attention kernels: a key/value tile in fp32 and the index arithmetic shared by
// attention_fwd.cc and attention_bwd.cc.
#ifndef MOBIUS_WORKER_KERNELS_CPU_ATTENTION_TILE_H_
#define MOBIUS_WORKER_KERNELS_CPU_ATTENTION_TILE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "worker/kernels/cpu/attention.h"

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

// Keys [k0, k0 + len) of one (batch, kv head) in fp32, row-major and transposed so that the
// inner loops run over contiguous memory (q.k over keys, p.v over dimensions).
struct KvTile {
  explicit KvTile(int64_t hd)
      : hd(hd), k(kKeyTile * hd), v(kKeyTile * hd), kt(hd * kKeyTile), vt(hd * kKeyTile) {}

  void Load(const uint16_t* kp, const uint16_t* vp, const AttentionShape& s, int64_t b,
            int64_t kvh, int64_t first, int64_t count) {
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
  }

  // out[j] = x . row_j for tile-relative keys j in [j0, j1); `xt_tile` is kt or vt.
  void Dots(const std::vector<float>& xt_tile, const float* x, int64_t j0, int64_t j1,
            float* out) const {
    for (int64_t j = j0; j < j1; ++j) out[j] = 0.0f;
    for (int64_t d = 0; d < hd; ++d) {
      const float xd = x[d];
      const float* col = &xt_tile[d * kKeyTile];
      for (int64_t j = j0; j < j1; ++j) out[j] += xd * col[j];
    }
  }

  // Tile-relative range of keys that query t may see; empty when j0 >= j1.
  void Visible(const AttentionShape& s, int64_t t, int64_t* j0, int64_t* j1) const {
    *j0 = std::max<int64_t>(FirstKey(s, t), k0) - k0;
    *j1 = std::min<int64_t>(t + 1, k0 + len) - k0;
  }

  int64_t hd;
  int64_t k0 = 0, len = 0;
  std::vector<float> k, v;    // [Bc, hd]
  std::vector<float> kt, vt;  // [hd, Bc]
};

}  // namespace mobius::kernels::cpu::attention_internal

#endif  // MOBIUS_WORKER_KERNELS_CPU_ATTENTION_TILE_H_
