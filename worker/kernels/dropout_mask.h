// LoRA dropout's mask (PEFT's nn.Dropout on an adapter's input), identical on every backend and in
// every process: element (row, col) of a call is kept iff a counter-based hash of (key, row, col),
// read as a 24-bit uniform in [0, 1), is >= p. Nothing is drawn in order, so the mask of a token
// does not depend on how the batch is cut into microbatches or the model into stages: the caller
// passes the token's row in the whole batch (row_offset + local row) and a key naming the step and
// the adapted module (LoraDropoutKey). Kept elements are scaled by 1 / (1 - p), as PyTorch does.
//
// Header-only, plain C++ usable from CUDA device code (MOBIUS_HOST_DEVICE). Pure functions.
#ifndef MOBIUS_WORKER_KERNELS_DROPOUT_MASK_H_
#define MOBIUS_WORKER_KERNELS_DROPOUT_MASK_H_

#include <cstdint>

#if defined(__CUDACC__)
#define MOBIUS_HOST_DEVICE __host__ __device__
#else
#define MOBIUS_HOST_DEVICE
#endif

namespace mobius::kernels {

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mix.
MOBIUS_HOST_DEVICE inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// Whether element (row, col) survives dropout with probability p of being dropped.
MOBIUS_HOST_DEVICE inline bool DropoutKeep(uint64_t key, uint64_t row, uint64_t col, float p) {
  const uint64_t h = Mix64(key ^ Mix64(row * 0x9E3779B97F4A7C15ull + col));
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return u >= p;
}

// The dropout key of optimizer step `step` of a run seeded `seed` (never 0: 0 means "no dropout",
// e.g. an eval pass), and from it one adapted module's, `module` being the module's index in the
// model's adapter list (model::LoraModules order).
inline uint64_t LoraDropoutStepKey(uint64_t seed, int64_t step) {
  return Mix64(Mix64(seed ^ 0x4C6F526144726F70ull) + static_cast<uint64_t>(step)) | 1;
}
inline uint64_t LoraDropoutModuleKey(uint64_t step_key, int64_t module) {
  return Mix64(step_key + static_cast<uint64_t>(module) * 0x9E3779B97F4A7C15ull);
}

}  // namespace mobius::kernels

#endif  // MOBIUS_WORKER_KERNELS_DROPOUT_MASK_H_
