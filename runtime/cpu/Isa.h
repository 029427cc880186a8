//===- Isa.h - which SIMD variant unroll's CPU kernels run ----------------===//
//
// The CPU kernels (Gemm.cpp, Attention.cpp) are compiled for AVX-512, AVX2
// and the baseline; detectIsa() picks one once per process, from cpuid.
// UNROLL_GEMM_ISA=avx2|plain forces a narrower one (tests, benchmarks).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_CPU_ISA_H
#define UNROLL_RUNTIME_CPU_ISA_H

#include <cstdlib>
#include <cstring>

namespace unroll::cpu {

enum class Isa { Plain, Avx2, Avx512 };

inline Isa detectIsa() {
  static const Isa isa = [] {
    if (const char *e = getenv("UNROLL_GEMM_ISA")) {
      if (!strcmp(e, "plain"))
        return Isa::Plain;
      if (!strcmp(e, "avx2"))
        return Isa::Avx2;
    }
    __builtin_cpu_init();
    // The attention kernels' AVX-512 variant also uses VL, DQ and BW.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
      return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return Isa::Avx2;
    return Isa::Plain;
  }();
  return isa;
}

} // namespace unroll::cpu

#endif
