// MOBIUS_NUMERIC_CLONES: put on a hot loop function of this library. GCC emits a baseline x86-64
// version and an x86-64-v3 (AVX2) one and picks one at load time from the CPU's features. Only for
// loops whose every operation rounds the same way in both (conversions, compares, maxima, single
// multiplies: no contractible multiply-add), so that results do not depend on the CPU.
#ifndef MOBIUS_COMMON_NUMERIC_CLONES_H_
#define MOBIUS_COMMON_NUMERIC_CLONES_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MOBIUS_NUMERIC_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MOBIUS_NUMERIC_CLONES
#endif

#endif  // MOBIUS_COMMON_NUMERIC_CLONES_H_
