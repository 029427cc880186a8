//===- CpuIsa.h - which SIMD variant unroll's CPU kernels run -------------===//
//
// The CPU kernels (Gemm.cpp, Attention.cpp, LayerNorm.cpp) are compiled for
// AVX-512, AVX2 and the baseline; detectIsa() picks one once per process,
// from cpuid, and dispatchIsa() calls that variant; hasBf16() says whether
// the bf16 GEMM (Gemm.cpp) can run.
// UNROLL_GEMM_ISA=avx2|plain forces a narrower one (tests, benchmarks).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_CPUISA_H
#define UNROLL_RUNTIME_CPUISA_H

#include <cstdlib>
#include <cstring>

#include <cpuid.h>

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

/// Whether the AVX-512 variant runs (detectIsa) and the CPU has AVX512_BF16
/// (vdpbf16ps): the bf16 GEMM operands of Gemm.cpp.
inline bool hasBf16() {
  static const bool has = detectIsa() == Isa::Avx512 && __builtin_cpu_supports("avx512bf16");
  return has;
}

/// Whether the CPU is Intel's (cpuid's vendor string): tuning choices that
/// were measured to go opposite ways on the AMD and Intel hosts (Gemm.cpp).
inline bool isIntel() {
  static const bool intel = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d))
      return false;
    char vendor[13];
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = 0;
    return !strcmp(vendor, "GenuineIntel");
  }();
  return intel;
}

/// Calls the variant of a kernel for this machine's instruction set.
template <typename... A>
void dispatchIsa(void (*avx512)(A...), void (*avx2)(A...), void (*plain)(A...), A... args) {
  switch (detectIsa()) {
  case Isa::Avx512:
    return avx512(args...);
  case Isa::Avx2:
    return avx2(args...);
  case Isa::Plain:
    return plain(args...);
  }
}

} // namespace unroll::cpu

// The target attributes of the variants: AVX-512 with the extensions
// detectIsa() requires for it, AVX2 with FMA.
#define UNROLL_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
#define UNROLL_AVX2 __attribute__((target("avx2,fma")))
// The bf16 GEMM: AVX-512 as above plus AVX512_BF16 (hasBf16()).
#define UNROLL_AVX512_BF16                                                                          \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16,fma")))

#endif
