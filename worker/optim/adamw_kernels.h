// Internal to worker/optim: the element-wise kernels behind adamw.h and their shared scalar code.
//
// Each ISA lives in its own .cc compiled with its own target flags (CMakeLists.txt); generic code is
// built for the baseline x86-64 ISA and only calls into those files after a run-time CPU check.
// Everything defined in this header has internal linkage (unnamed namespace): an inline function
// with external linkage instantiated in an AVX file could be the copy the linker keeps for generic
// callers and crash a CPU without AVX.
#ifndef MOBIUS_WORKER_OPTIM_ADAMW_KERNELS_H_
#define MOBIUS_WORKER_OPTIM_ADAMW_KERNELS_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mobius::optim::internal {

// Per-step constants, already rounded to float (see adamw.cc: AdamWScalarsFor).
struct AdamWScalars {
  float grad_scale;
  float decay;            // 1 - lr * weight_decay, or 1 for tensors without decay
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float neg_step_size;          // -lr / (1 - beta1^t)
  float eps;
};

// The format of the 16-bit copy of the new master weights.
enum class HalfOut { kBf16, kF16 };

// Kernel signature: updates master/m/v in place over [0, n), writes `out` (16-bit bits in
// `format`) unless it is null. Each kernel picks its loop for the format once per call.
using AdamWKernelFn = void (*)(const AdamWScalars& s, float* master, float* m, float* v,
                               const float* grad, uint16_t* out, HalfOut format, size_t n);
using SumSquaresFn = double (*)(const float* x, size_t n);

void AdamWScalarKernel(const AdamWScalars& s, float* master, float* m, float* v, const float* grad,
                       uint16_t* out, HalfOut format, size_t n);
void AdamWAvx2Kernel(const AdamWScalars& s, float* master, float* m, float* v, const float* grad,
                     uint16_t* out, HalfOut format, size_t n);
void AdamWAvx512Kernel(const AdamWScalars& s, float* master, float* m, float* v,
                       const float* grad, uint16_t* out, HalfOut format, size_t n);

double SumSquaresScalar(const float* x, size_t n);
double SumSquaresAvx2(const float* x, size_t n);
double SumSquaresAvx512(const float* x, size_t n);

namespace {

// Same rule as numeric::Fp32ToBf16 (tests check they agree), private copy for the reason above.
inline uint16_t RoundToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Same rule as numeric::Fp32ToF16 (tests check they agree; F. Giesen's float_to_half_fast3_rtne),
// private copy for the same reason: nearest even, subnormals by the FPU's own rounding, +-inf from
// 65520 up, NaN -> quiet NaN with the top payload bits.
inline uint16_t RoundToF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  if (magnitude >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    constexpr uint32_t kHalf = 126u << 23;  // 0.5f
    float tiny;
    std::memcpy(&tiny, &magnitude, sizeof(tiny));
    const float shifted = tiny + 0.5f;
    uint32_t shifted_bits;
    std::memcpy(&shifted_bits, &shifted, sizeof(shifted_bits));
    return static_cast<uint16_t>(sign | (shifted_bits - kHalf));
  }
  const uint32_t odd = (magnitude >> 13) & 1u;
  magnitude += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
  return static_cast<uint16_t>(sign | (magnitude >> 13));
}

template <HalfOut kFormat>
inline uint16_t RoundToHalf(float value) {
  return kFormat == HalfOut::kF16 ? RoundToF16(value) : RoundToBf16(value);
}

// One element, in the documented order. kFused: the three multiply-adds as std::fma, exactly what
// the SIMD kernels do (they use this for their tails, so body and tail agree bit for bit).
// The scalar file is compiled with -ffp-contract=off so that kFused=false really rounds twice.
template <bool kFused>
inline void AdamWElement(const AdamWScalars& s, float& p, float& m, float& v, float grad) {
  const float g = grad * s.grad_scale;
  const float pd = p * s.decay;
  const float mb = m * s.beta1;
  const float vb = v * s.beta2;
  const float sg = s.one_minus_beta2 * g;
  if constexpr (kFused) {
    m = std::fma(g, s.one_minus_beta1, mb);
    v = std::fma(sg, g, vb);
  } else {
    m = mb + g * s.one_minus_beta1;
    v = vb + sg * g;
  }
  const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
  const float q = m / denom;
  if constexpr (kFused) {
    p = std::fma(s.neg_step_size, q, pd);
  } else {
    p = pd + s.neg_step_size * q;
  }
}

template <bool kFused, HalfOut kFormat>
inline void AdamWElements(const AdamWScalars& s, float* master, float* m, float* v,
                          const float* grad, uint16_t* out, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    AdamWElement<kFused>(s, master[i], m[i], v[i], grad[i]);
    if (out != nullptr) out[i] = RoundToHalf<kFormat>(master[i]);
  }
}

}  // namespace
}  // namespace mobius::optim::internal

#endif  // MOBIUS_WORKER_OPTIM_ADAMW_KERNELS_H_
