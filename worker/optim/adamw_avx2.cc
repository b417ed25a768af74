// AVX2 + FMA kernels (this file only is compiled with -mavx2 -mfma; see CMakeLists.txt).
// Same operations and order as AdamWElement<true> in adamw_kernels.h, 8 floats at a time.
#include <immintrin.h>

#include "worker/optim/adamw_kernels.h"

namespace mobius::optim::internal {
namespace {

// Round-to-nearest-even bf16 of 8 floats, NaN -> quiet NaN, packed into 8 uint16.
inline __m128i ToBf16x8(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i upper = _mm256_srli_epi32(bits, 16);
  const __m256i lsb = _mm256_and_si256(upper, _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet_nan = _mm256_or_si256(upper, _mm256_set1_epi32(0x40));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  const __m256i result = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
  // packus works per 128-bit lane: [r0..r3 r0..r3 | r4..r7 r4..r7]; gather qwords 0 and 2.
  const __m256i packed = _mm256_packus_epi32(result, result);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

// Round-to-nearest-even fp16 of 8 floats, packed into 8 uint16: RoundToF16 (adamw_kernels.h)
// lane-wise, its branches as blends (F16C's vcvtps2ph is not implied by the AVX2 + FMA check).
inline __m128i ToF16x8(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x8000));
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i payload =
      _mm256_and_si256(_mm256_srli_epi32(magnitude, 13), _mm256_set1_epi32(0x3ff));
  const __m256i nan = _mm256_or_si256(payload, _mm256_set1_epi32(0x7e00));
  const __m256i inf = _mm256_set1_epi32(0x7c00);
  // Below 2^-14: the FPU rounds magnitude + 0.5f to units of 2^-24 in the low bits.
  const __m256 shifted = _mm256_add_ps(_mm256_castsi256_ps(magnitude), _mm256_set1_ps(0.5f));
  const __m256i subnormal =
      _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_set1_epi32(126 << 23));
  // Normal: rebias the exponent ((15 - 127) << 23, mod 2^32) and round to nearest even.
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(magnitude, 13), _mm256_set1_epi32(1));
  const __m256i rebias = _mm256_set1_epi32(static_cast<int>(0xc8000fffu));
  const __m256i normal =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(magnitude, rebias), odd), 13);
  // magnitude < 2^31, so the signed compares are exact.
  __m256i result = normal;
  result = _mm256_blendv_epi8(result, subnormal,
                              _mm256_cmpgt_epi32(_mm256_set1_epi32(0x38800000), magnitude));
  result = _mm256_blendv_epi8(result, inf,
                              _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x477fffff)));
  result = _mm256_blendv_epi8(result, nan,
                              _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000)));
  result = _mm256_or_si256(result, sign);
  const __m256i packed = _mm256_packus_epi32(result, result);  // as ToBf16x8
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

template <HalfOut kFormat>
inline __m128i ToHalfx8(__m256 x) {
  return kFormat == HalfOut::kF16 ? ToF16x8(x) : ToBf16x8(x);
}

template <HalfOut kFormat>
void Avx2Loop(const AdamWScalars& s, float* master, float* m, float* v, const float* grad,
              uint16_t* out, size_t n) {
  const __m256 grad_scale = _mm256_set1_ps(s.grad_scale);
  const __m256 decay = _mm256_set1_ps(s.decay);
  const __m256 beta1 = _mm256_set1_ps(s.beta1);
  const __m256 one_minus_beta1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 beta2 = _mm256_set1_ps(s.beta2);
  const __m256 one_minus_beta2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 bc2_sqrt = _mm256_set1_ps(s.bias_correction2_sqrt);
  const __m256 neg_step = _mm256_set1_ps(s.neg_step_size);
  const __m256 eps = _mm256_set1_ps(s.eps);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(grad + i), grad_scale);
    const __m256 pd = _mm256_mul_ps(_mm256_loadu_ps(master + i), decay);
    const __m256 mb = _mm256_mul_ps(_mm256_loadu_ps(m + i), beta1);
    const __m256 vb = _mm256_mul_ps(_mm256_loadu_ps(v + i), beta2);
    const __m256 sg = _mm256_mul_ps(one_minus_beta2, g);
    const __m256 mn = _mm256_fmadd_ps(g, one_minus_beta1, mb);
    const __m256 vn = _mm256_fmadd_ps(sg, g, vb);
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vn), bc2_sqrt), eps);
    const __m256 pn = _mm256_fmadd_ps(neg_step, _mm256_div_ps(mn, denom), pd);
    _mm256_storeu_ps(m + i, mn);
    _mm256_storeu_ps(v + i, vn);
    _mm256_storeu_ps(master + i, pn);
    if (out != nullptr) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), ToHalfx8<kFormat>(pn));
    }
  }
  AdamWElements<true, kFormat>(s, master, m, v, grad, out, i, n);
}

}  // namespace

void AdamWAvx2Kernel(const AdamWScalars& s, float* master, float* m, float* v, const float* grad,
                     uint16_t* out, HalfOut format, size_t n) {
  if (format == HalfOut::kF16) {
    Avx2Loop<HalfOut::kF16>(s, master, m, v, grad, out, n);
  } else {
    Avx2Loop<HalfOut::kBf16>(s, master, m, v, grad, out, n);
  }
}

double SumSquaresAvx2(const float* x, size_t n) {
  __m256d acc0 = _mm256_setzero_pd();
  __m256d acc1 = _mm256_setzero_pd();
  __m256d acc2 = _mm256_setzero_pd();
  __m256d acc3 = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i);
    const __m256 b = _mm256_loadu_ps(x + i + 8);
    const __m256d a0 = _mm256_cvtps_pd(_mm256_castps256_ps128(a));
    const __m256d a1 = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
    const __m256d b0 = _mm256_cvtps_pd(_mm256_castps256_ps128(b));
    const __m256d b1 = _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1));
    acc0 = _mm256_fmadd_pd(a0, a0, acc0);
    acc1 = _mm256_fmadd_pd(a1, a1, acc1);
    acc2 = _mm256_fmadd_pd(b0, b0, acc2);
    acc3 = _mm256_fmadd_pd(b1, b1, acc3);
  }
  const __m256d acc = _mm256_add_pd(_mm256_add_pd(acc0, acc1), _mm256_add_pd(acc2, acc3));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, acc);
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) {
    const double d = x[i];
    sum += d * d;
  }
  return sum;
}

}  // namespace mobius::optim::internal
