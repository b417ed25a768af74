// attention_bwd: D = rowsum(dO * O), then two race-free passes that both recompute P per tile
// (see attention.h): dK/dV per (batch, kv head, key tile), dQ per (batch, head, query tile).
#include <cmath>
#include <vector>

#include "worker/kernels/cpu/attention.h"
#include "worker/kernels/cpu/attention_tile.h"
#include "worker/kernels/cpu/fast_math.h"

namespace mobius::kernels::cpu {
namespace {

using attention_internal::FirstKey;
using attention_internal::kKeyTile;
using attention_internal::KvTile;
using attention_internal::kQueryTile;
using attention_internal::LastQuery;
using attention_internal::LseIndex;
using attention_internal::Row;

// One query row against one key tile: P and dS (times the score scale) for keys [j0, j1).
struct RowGrad {
  float p[kKeyTile];
  float ds[kKeyTile];

  void Compute(const KvTile& tile, const float* qrow, const float* dorow, float lse, float d,
               float scale, int64_t j0, int64_t j1) {
    float dp[kKeyTile];
    tile.Dots(tile.kt, qrow, j0, j1, p);
    tile.Dots(tile.vt, dorow, j0, j1, dp);
    for (int64_t j = j0; j < j1; ++j) {
      p[j] = FastExp(p[j] * scale - lse);
      ds[j] = p[j] * (dp[j] - d) * scale;
    }
  }
};

// dst [n] bf16 += src [n] fp32, one rounding per element.
void AccumulateRow(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = numeric::Fp32ToBf16(numeric::Bf16ToFp32(dst[i]) + src[i]);
  }
}

// D[b, h, t] = sum_d dout * out.
std::vector<float> RowDotDoutOut(const uint16_t* dout, const uint16_t* out, const AttentionShape& s,
                                 ThreadPool* pool) {
  std::vector<float> d(s.b * s.heads * s.t);
  ParallelFor(pool, s.b * s.t, [&](int64_t bt) {
    const int64_t b = bt / s.t, t = bt % s.t;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t off = Row(s, b, t, s.heads, h);
      float acc = 0.0f;
      for (int64_t i = 0; i < s.head_dim; ++i) {
        acc += numeric::Bf16ToFp32(dout[off + i]) * numeric::Bf16ToFp32(out[off + i]);
      }
      d[LseIndex(s, b, h, t)] = acc;
    }
  });
  return d;
}

// dK, dV of one key tile: work item `item` of KeyValuePass.
MOBIUS_KERNEL_CLONES
void KeyValueItem(uint16_t* dk, uint16_t* dv, const uint16_t* dout, const uint16_t* q,
                  const uint16_t* k, const uint16_t* v, const float* lse, const float* dvec,
                  const AttentionShape& s, float scale, int64_t item) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t k_tiles = (s.t + kKeyTile - 1) / kKeyTile;
  const int64_t b = item / (s.kv_heads * k_tiles), kvh = item / k_tiles % s.kv_heads;
  const int64_t k0 = item % k_tiles * kKeyTile, len = std::min(kKeyTile, s.t - k0);
  KvTile tile(hd);
  tile.Load(k, v, s, b, kvh, k0, len);
  std::vector<float> dkt(len * hd, 0.0f), dvt(len * hd, 0.0f), qrow(hd), dorow(hd);
  RowGrad g;
  const int64_t last_query = LastQuery(s, k0 + len - 1);
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (int64_t t = k0; t <= last_query; ++t) {
      int64_t j0, j1;
      tile.Visible(s, t, &j0, &j1);
      if (j0 >= j1) continue;
      const int64_t off = Row(s, b, t, s.heads, h);
      LoadRow(qrow.data(), q + off, hd);
      LoadRow(dorow.data(), dout + off, hd);
      const int64_t li = LseIndex(s, b, h, t);
      g.Compute(tile, qrow.data(), dorow.data(), lse[li], dvec[li], scale, j0, j1);
      for (int64_t j = j0; j < j1; ++j) {
        const float pj = g.p[j], dsj = g.ds[j];
        float* dvj = &dvt[j * hd];
        float* dkj = &dkt[j * hd];
        for (int64_t d = 0; d < hd; ++d) dvj[d] += pj * dorow[d];
        for (int64_t d = 0; d < hd; ++d) dkj[d] += dsj * qrow[d];
      }
    }
  }
  for (int64_t j = 0; j < len; ++j) {
    const int64_t off = Row(s, b, k0 + j, s.kv_heads, kvh);
    AccumulateRow(dk + off, &dkt[j * hd], hd);
    AccumulateRow(dv + off, &dvt[j * hd], hd);
  }
}

void KeyValuePass(uint16_t* dk, uint16_t* dv, const uint16_t* dout, const uint16_t* q,
                  const uint16_t* k, const uint16_t* v, const float* lse, const float* dvec,
                  const AttentionShape& s, float scale, ThreadPool* pool) {
  const int64_t k_tiles = (s.t + kKeyTile - 1) / kKeyTile;
  ParallelFor(pool, s.b * s.kv_heads * k_tiles, [&](int64_t item) {
    KeyValueItem(dk, dv, dout, q, k, v, lse, dvec, s, scale, item);
  });
}

// dQ of one query tile: work item `item` of QueryPass.
MOBIUS_KERNEL_CLONES
void QueryItem(uint16_t* dq, const uint16_t* dout, const uint16_t* q, const uint16_t* k,
               const uint16_t* v, const float* lse, const float* dvec, const AttentionShape& s,
               float scale, int64_t item) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t q_tiles = (s.t + kQueryTile - 1) / kQueryTile;
  const int64_t b = item / (s.heads * q_tiles), h = item / q_tiles % s.heads;
  const int64_t t0 = item % q_tiles * kQueryTile, t1 = std::min(s.t, t0 + kQueryTile);
  const int64_t rows = t1 - t0, kvh = h / group;
  std::vector<float> qs(rows * hd), dos(rows * hd), dqt(rows * hd, 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t off = Row(s, b, t0 + i, s.heads, h);
    LoadRow(&qs[i * hd], q + off, hd);
    LoadRow(&dos[i * hd], dout + off, hd);
  }
  KvTile tile(hd);
  RowGrad g;
  for (int64_t k0 = FirstKey(s, t0); k0 < t1; k0 += kKeyTile) {
    tile.Load(k, v, s, b, kvh, k0, std::min(kKeyTile, t1 - k0));
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j0, j1;
      tile.Visible(s, t0 + i, &j0, &j1);
      if (j0 >= j1) continue;
      const int64_t li = LseIndex(s, b, h, t0 + i);
      g.Compute(tile, &qs[i * hd], &dos[i * hd], lse[li], dvec[li], scale, j0, j1);
      float* dqi = &dqt[i * hd];
      for (int64_t j = j0; j < j1; ++j) {
        const float dsj = g.ds[j];
        const float* kj = &tile.k[j * hd];
        for (int64_t d = 0; d < hd; ++d) dqi[d] += dsj * kj[d];
      }
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    AccumulateRow(dq + Row(s, b, t0 + i, s.heads, h), &dqt[i * hd], hd);
  }
}

void QueryPass(uint16_t* dq, const uint16_t* dout, const uint16_t* q, const uint16_t* k,
               const uint16_t* v, const float* lse, const float* dvec, const AttentionShape& s,
               float scale, ThreadPool* pool) {
  const int64_t q_tiles = (s.t + kQueryTile - 1) / kQueryTile;
  ParallelFor(pool, s.b * s.heads * q_tiles, [&](int64_t item) {
    QueryItem(dq, dout, q, k, v, lse, dvec, s, scale, item);
  });
}

}  // namespace

void attention_bwd(uint16_t* dq, uint16_t* dk, uint16_t* dv, const uint16_t* dout,
                   const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* out,
                   const float* lse, const AttentionShape& s, ThreadPool* pool) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  const std::vector<float> dvec = RowDotDoutOut(dout, out, s, pool);
  KeyValuePass(dk, dv, dout, q, k, v, lse, dvec.data(), s, scale, pool);
  QueryPass(dq, dout, q, k, v, lse, dvec.data(), s, scale, pool);
}

}  // namespace mobius::kernels::cpu
