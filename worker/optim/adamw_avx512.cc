// AVX-512 (F + BW) kernels (this file only is compiled with -mavx512f -mavx512bw; CMakeLists.txt).
// Same operations and order as AdamWElement<true> in adamw_kernels.h, 16 floats at a time.
#include <immintrin.h>

#include "worker/optim/adamw_kernels.h"

namespace mobius::optim::internal {
namespace {

// Round-to-nearest-even bf16 of 16 floats, NaN -> quiet NaN, packed into 16 uint16.
inline __m256i ToBf16x16(__m512 x) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i upper = _mm512_srli_epi32(bits, 16);
  const __m512i lsb = _mm512_and_si512(upper, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i quiet_nan = _mm512_or_si512(upper, _mm512_set1_epi32(0x40));
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, is_nan, quiet_nan));
}

// fp16 of 16 floats: AVX-512F's vcvtps2ph, round to nearest even (no MXCSR dependence), which
// gives RoundToF16's bits (subnormals, +-inf from 65520 up; a NaN keeps its sign and top payload
// bits and is made quiet); adamw_kernel_test.cc checks it against numeric::Fp32ToF16.
inline __m256i ToF16x16(__m512 x) {
  return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

template <HalfOut kFormat>
inline __m256i ToHalfx16(__m512 x) {
  return kFormat == HalfOut::kF16 ? ToF16x16(x) : ToBf16x16(x);
}

template <HalfOut kFormat>
void Avx512Loop(const AdamWScalars& s, float* master, float* m, float* v, const float* grad,
                uint16_t* out, size_t n) {
  const __m512 grad_scale = _mm512_set1_ps(s.grad_scale);
  const __m512 decay = _mm512_set1_ps(s.decay);
  const __m512 beta1 = _mm512_set1_ps(s.beta1);
  const __m512 one_minus_beta1 = _mm512_set1_ps(s.one_minus_beta1);
  const __m512 beta2 = _mm512_set1_ps(s.beta2);
  const __m512 one_minus_beta2 = _mm512_set1_ps(s.one_minus_beta2);
  const __m512 bc2_sqrt = _mm512_set1_ps(s.bias_correction2_sqrt);
  const __m512 neg_step = _mm512_set1_ps(s.neg_step_size);
  const __m512 eps = _mm512_set1_ps(s.eps);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_mul_ps(_mm512_loadu_ps(grad + i), grad_scale);
    const __m512 pd = _mm512_mul_ps(_mm512_loadu_ps(master + i), decay);
    const __m512 mb = _mm512_mul_ps(_mm512_loadu_ps(m + i), beta1);
    const __m512 vb = _mm512_mul_ps(_mm512_loadu_ps(v + i), beta2);
    const __m512 sg = _mm512_mul_ps(one_minus_beta2, g);
    const __m512 mn = _mm512_fmadd_ps(g, one_minus_beta1, mb);
    const __m512 vn = _mm512_fmadd_ps(sg, g, vb);
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vn), bc2_sqrt), eps);
    const __m512 pn = _mm512_fmadd_ps(neg_step, _mm512_div_ps(mn, denom), pd);
    _mm512_storeu_ps(m + i, mn);
    _mm512_storeu_ps(v + i, vn);
    _mm512_storeu_ps(master + i, pn);
    if (out != nullptr) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), ToHalfx16<kFormat>(pn));
    }
  }
  AdamWElements<true, kFormat>(s, master, m, v, grad, out, i, n);
}

}  // namespace

void AdamWAvx512Kernel(const AdamWScalars& s, float* master, float* m, float* v,
                       const float* grad, uint16_t* out, HalfOut format, size_t n) {
  if (format == HalfOut::kF16) {
    Avx512Loop<HalfOut::kF16>(s, master, m, v, grad, out, n);
  } else {
    Avx512Loop<HalfOut::kBf16>(s, master, m, v, grad, out, n);
  }
}

double SumSquaresAvx512(const float* x, size_t n) {
  __m512d acc0 = _mm512_setzero_pd();
  __m512d acc1 = _mm512_setzero_pd();
  __m512d acc2 = _mm512_setzero_pd();
  __m512d acc3 = _mm512_setzero_pd();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i);
    const __m512 b = _mm512_loadu_ps(x + i + 16);
    const __m512d a0 = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
    const __m512d a1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    const __m512d b0 = _mm512_cvtps_pd(_mm512_castps512_ps256(b));
    const __m512d b1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b), 1)));
    acc0 = _mm512_fmadd_pd(a0, a0, acc0);
    acc1 = _mm512_fmadd_pd(a1, a1, acc1);
    acc2 = _mm512_fmadd_pd(b0, b0, acc2);
    acc3 = _mm512_fmadd_pd(b1, b1, acc3);
  }
  const __m512d acc = _mm512_add_pd(_mm512_add_pd(acc0, acc1), _mm512_add_pd(acc2, acc3));
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, acc);
  double sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
               ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) {
    const double d = x[i];
    sum += d * d;
  }
  return sum;
}

}  // namespace mobius::optim::internal
