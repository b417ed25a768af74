#include "worker/kernels/cpu/cross_entropy.h"

#include <cmath>
#include <vector>

#include "worker/kernels/cpu/fast_math.h"

namespace mobius::kernels::cpu {
namespace {

constexpr int64_t kBlock = 512;  // fp32 staging block for the exp loops
// A single running fp32 max or sum does not vectorise (without -ffast-math the compiler may not
// reorder it), so each block reduces into kLanes interleaved partials combined in a fixed order.
constexpr int64_t kLanes = 8;

MOBIUS_KERNEL_CLONES
float BlockMax(const float* x, int64_t n, float init) {
  float lane[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lane[l] = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = lane[l] < x[i + l] ? x[i + l] : lane[l];
  }
  float m = init;
  for (int64_t l = 0; l < kLanes; ++l) m = std::max(m, lane[l]);
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// sum over i of exp(x[i] - shift); x[i] = exp(x[i] - shift). Lane l of the vector sum is the
// interleaved partial kLanes wide, the tail is added after the lanes in order.
static_assert(kLanes == 8, "one F32x8 of partial sums");
MOBIUS_KERNEL_CLONES
float BlockExpSum(float* x, int64_t n, float shift) {
  const F32x8 s = Splat8(shift);
  F32x8 lane = Splat8(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F32x8 e = FastExp(Load8(x + i) - s);
    Store8(x + i, e);
    lane += e;
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += lane[l];
  for (; i < n; ++i) {
    x[i] = FastExp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

// x[i] = exp(x[i] - shift) * scale.
MOBIUS_KERNEL_CLONES
void BlockScaledExp(float* x, int64_t n, float shift, float scale) {
  const F32x8 s = Splat8(shift);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Store8(x + i, FastExp(Load8(x + i) - s) * scale);
  for (; i < n; ++i) x[i] = FastExp(x[i] - shift) * scale;
}

template <typename T>
float RowLogSumExp(const T* z, int64_t v) {
  float buf[kBlock];
  float max_z = -INFINITY;
  for (int64_t b0 = 0; b0 < v; b0 += kBlock) {
    const int64_t len = std::min(kBlock, v - b0);
    LoadRow(buf, z + b0, len);
    max_z = BlockMax(buf, len, max_z);
  }
  // fp32 sums per block, blocks summed in double: a running fp32 sum over a 50k vocabulary would
  // lose ~1e-5 relative.
  double sum = 0.0;
  for (int64_t b0 = 0; b0 < v; b0 += kBlock) {
    const int64_t len = std::min(kBlock, v - b0);
    LoadRow(buf, z + b0, len);
    sum += BlockExpSum(buf, len, max_z);
  }
  return max_z + static_cast<float>(std::log(sum));
}

// The mean over the microbatch's rows (all of them when chunked), in row order.
float Mean(const float* losses, const int32_t* targets, int64_t n) {
  double total = 0.0;
  int64_t count = 0;
  for (int64_t row = 0; row < n; ++row) {
    if (targets[row] == kIgnoreIndex) continue;
    total += losses[row];
    ++count;
  }
  return count == 0 ? 0.0f : static_cast<float>(total / count);
}

template <typename T>
float Forward(float* losses, float* lse, const T* logits, const int32_t* targets, int64_t n,
              int64_t v, ThreadPool* pool, int64_t row0, int64_t total_rows) {
  ParallelFor(pool, n, [&](int64_t row) {
    losses[row] = 0.0f;
    lse[row] = 0.0f;
    if (targets[row] == kIgnoreIndex) return;
    const T* z = logits + row * v;
    lse[row] = RowLogSumExp(z, v);
    losses[row] = lse[row] - Load(z, targets[row]);
  });
  if (total_rows == 0) return Mean(losses, targets, n);
  return Mean(losses - row0, targets - row0, total_rows);
}

template <typename T>
void Backward(T* dlogits, const T* logits, const float* lse, const int32_t* targets, int64_t n,
              int64_t v, float dloss, ThreadPool* pool, int64_t row0, int64_t total_rows) {
  const int32_t* counted = total_rows == 0 ? targets : targets - row0;
  const int64_t rows = total_rows == 0 ? n : total_rows;
  int64_t count = 0;
  for (int64_t row = 0; row < rows; ++row) count += counted[row] != kIgnoreIndex;
  const float scale = count == 0 ? 0.0f : static_cast<float>(static_cast<double>(dloss) / count);
  ParallelFor(pool, n, [&](int64_t row) {
    T* dz = dlogits + row * v;
    if (targets[row] == kIgnoreIndex) {
      for (int64_t i = 0; i < v; ++i) Store(dz, i, 0.0f);
      return;
    }
    const T* z = logits + row * v;
    const float m = lse[row];
    const int64_t tgt = targets[row];
    const float z_target = Load(z, tgt);  // read before an in-place write overwrites it
    float buf[kBlock];
    for (int64_t b0 = 0; b0 < v; b0 += kBlock) {
      const int64_t len = std::min(kBlock, v - b0);
      LoadRow(buf, z + b0, len);
      BlockScaledExp(buf, len, m, scale);
      StoreRow(dz + b0, buf, len);
    }
    // The target's entry again with the one-hot term, subtracted in fp32 before rounding.
    Store(dz, tgt, (FastExp(z_target - m) - 1.0f) * scale);
  });
}

}  // namespace

float cross_entropy_fwd(float* losses, float* lse, const uint16_t* logits, const int32_t* targets,
                        int64_t n, int64_t v, ThreadPool* pool, int64_t row0,
                        int64_t total_rows) {
  return Forward(losses, lse, logits, targets, n, v, pool, row0, total_rows);
}
float cross_entropy_fwd(float* losses, float* lse, const F16* logits, const int32_t* targets,
                        int64_t n, int64_t v, ThreadPool* pool, int64_t row0,
                        int64_t total_rows) {
  return Forward(losses, lse, logits, targets, n, v, pool, row0, total_rows);
}
float cross_entropy_fwd(float* losses, float* lse, const float* logits, const int32_t* targets,
                        int64_t n, int64_t v, ThreadPool* pool, int64_t row0,
                        int64_t total_rows) {
  return Forward(losses, lse, logits, targets, n, v, pool, row0, total_rows);
}

void cross_entropy_bwd(uint16_t* dlogits, const uint16_t* logits, const float* lse,
                       const int32_t* targets, int64_t n, int64_t v, float dloss,
                       ThreadPool* pool, int64_t row0, int64_t total_rows) {
  Backward(dlogits, logits, lse, targets, n, v, dloss, pool, row0, total_rows);
}
void cross_entropy_bwd(F16* dlogits, const F16* logits, const float* lse, const int32_t* targets,
                       int64_t n, int64_t v, float dloss, ThreadPool* pool, int64_t row0,
                       int64_t total_rows) {
  Backward(dlogits, logits, lse, targets, n, v, dloss, pool, row0, total_rows);
}
void cross_entropy_bwd(float* dlogits, const float* logits, const float* lse,
                       const int32_t* targets, int64_t n, int64_t v, float dloss,
                       ThreadPool* pool, int64_t row0, int64_t total_rows) {
  Backward(dlogits, logits, lse, targets, n, v, dloss, pool, row0, total_rows);
}

}  // namespace mobius::kernels::cpu
