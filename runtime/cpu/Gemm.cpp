//===- Gemm.cpp - the CPU GEMM micro-kernel of compiled.so ----------------===//
//
// C += A · B (or C = A · B) for strided A [M, K], B [K, N], C [M, N], f32 and
// f64: unroll_gemm_f32 / unroll_gemm_f64, declared in
// runtime/include/unroll/runtime/CpuKernels.h. accumulate = 0 overwrites C (the zero fill before a
// contraction is then dropped by the compiler).
//
// `unroll-cpu-gemm` (lib/Transforms/CPUGemm.cpp) turns the contractions of
// the linear layers and their gradients into calls of these, and
// unroll-translate links this file (libunroll_cpu_kernels.a) into every CPU
// library that uses them. Strides are in elements and may be anything
// (transposes are strides), because operands are packed first.
//
// The structure is the classic one (Goto and van de Geijn): B is packed in
// KC x NC panels of NR-wide column slivers, and an MR x NR register tile
// accumulates a KC-long rank-1 update sequence with broadcast-FMA, reading
// MR rows of A. Row-major A is read in place (broadcasts do not need a
// packed layout, and the many small attention products would otherwise
// spend as long packing as multiplying); strided A is packed in MC x KC
// panels of MR-row slivers, k-major (the MR values the tile broadcasts for
// one k side by side; a column-major A copies them as they are). The
// register tile is 8 x 32 f32 (8 x 16 f64) with AVX-512 and 6 x 16 (6 x 8)
// with AVX2; the instruction
// set is picked once at run time (cpuid), with a scalar tile as fallback.
// Partial tiles at the edges go through a small buffer. Nothing brings the
// rows of A read in place, or the rows of C a tile stores, into the cache
// ahead of time but the hardware's prefetcher, whose short streams (8 rows
// of 1-2 KB) start late: before each tile the driver asks for that tile's
// rows of C (write intent) and, on AMD's CPUs, for a share of the next
// tile's rows of A (the 5248 x 256 x 256 products of the paper config:
// 89-95 -> 96-104 GFLOP/s on one thread of a Zen 4 host). On the Intel
// Xeon host that share made the paper step slower (prefetchNextA).
//
// unroll_gemm_ex_* adds the epilogues of GemmFlags.h (a bias row, GELU into
// a second output, GELU's gradient, a residual matrix added to the
// product): each mc x nc block of C gets them as
// soon as its last k-block is done, while it is in L2, instead of a pass over
// all of C before the product (the bias broadcast) and one after (the GELU)
// — `unroll-cpu-gemm` folds those into the call.
//
// bf16 operands (unroll_cpu_set_precision(1), or UNROLL_CPU_PRECISION=bf16;
// `unroll-run --cpu-precision bf16`): on CPUs with AVX512_BF16 the blocked
// f32 path packs both operands rounded to bfloat16 (round to nearest even),
// k-pairs side by side in 32-bit words, and an 8 x 32 register tile
// accumulates in f32 with vdpbf16ps, two products of k per instruction. On
// CPUs with AMX (AMX-TILE, AMX-BF16; UNROLL_GEMM_AMX=0 turns it off) a 32 x
// 32 tile of four 16 x 16 f32 tiles accumulates with tdpbf16ps instead: the
// Xeon host's vdpbf16ps issues on one port, so bf16 was 0.6x f32 there, and
// AMX makes it 4-4.6x (gemmAmx).
// Products of bf16 values are exact in f32, so C differs from the product of
// the rounded operands by f32 accumulation only. The narrow unpacked kernel
// (attention-sized N) and f64 stay in their own precision.
//
// Summation order differs from the plain loop nest (k is blocked by KC), so
// results differ from it by rounding only; the tests compare with f32/f64
// tolerances against independent references.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "unroll/runtime/CpuIsa.h"
#include "VecMath.h"
#include "unroll/runtime/CpuKernels.h"

#include <immintrin.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

// The k-block: C is read and written once per kKC steps of k. 512 rather
// than 256 made the model's K = 1024 products 3-6% faster on
// a Zen 4 host (5248 x 256 x 1024: 99-102 -> 105 GFLOP/s), with the peak shape
// (K = 256, one block either way) unchanged. A register tile's MR rows of
// A (16 KB at f32) stay in L1 across the slivers of B, which stream from
// L2 (64 KB each).
constexpr int64_t kKC = 512;
constexpr int64_t kMC = 96; // rows of A per panel (L2)
// The column block: a packed block of B (kKC x kNC) is streamed once per
// MR-row sliver of A, so it must stay in L2 with room to spare. At 3072 an
// N >= 1024 block of f32 is 2 MB, a Xeon core's whole L2: there, 512 (1 MB)
// made 256 x 1024 x 5248 (the MLP's first weight gradient) 128 -> 149-158
// GFLOP/s and the 2048 x 2048 x 256 peak shape 107-145 -> 170-178, with
// the model's K = 256 and N = 256 shapes unchanged; on a Zen 5 host (1 MB
// L2) 512 and 3072 were within noise.
constexpr int64_t kNC = 512;

template <typename T> struct Scratch {
  T *a = nullptr, *b = nullptr;
  size_t na = 0, nb = 0;
  ~Scratch() {
    free(a);
    free(b);
  }
  T *bufA(size_t n) { return grow(a, na, n); }
  T *bufB(size_t n) { return grow(b, nb, n); }
  static T *grow(T *&p, size_t &have, size_t n) {
    if (n > have) {
      free(p);
      p = static_cast<T *>(aligned_alloc(64, ((n * sizeof(T) + 63) / 64) * 64));
      have = n;
    }
    return p;
  }
};

/// The operands packed row by row come from memory (a tape slice, an
/// activation gradient): the packing asks for the row kAhead rows on while
/// it copies this one (a prefetch past the end of a matrix is harmless).
constexpr int64_t kAhead = 8;
// The driver and its packing are compiled into each instruction set's
// variant (gemm*Avx512 / Avx2 / Plain below, always inlined there): on the
// baseline target GCC copied a packed sliver 16 bytes at a time.
#define DRIVER inline __attribute__((always_inline))

/// The cache lines of p[0, n) asked for (Locality 3: into L1, 2: into L2).
template <typename T, int Write = 0, int Locality = 3>
DRIVER void prefetchRow(const T *p, int64_t n) {
  for (int64_t i = 0; i < n; i += 64 / sizeof(T))
    __builtin_prefetch(p + i, Write, Locality);
}

/// Packs the slivers both operands are read in: S lanes (rows of A, columns
/// of B) by kc steps of k, k-major — sliver s holds, for each k, its S
/// values side by side at out[s·S·kc + k·S] (lanes past len are zero), the
/// order in which the register tile broadcasts A and loads B. Lane l, step
/// k is X[l·sLane + k·sK]. Where lanes are contiguous (column-major A,
/// row-major B) the copy goes along k, so every row of memory is read once,
/// start to end, with the row kAhead steps on prefetched.
/// Where steps are contiguous instead (the forward's weights, B = Wᵀ read
/// from W's rows) and the instruction set has 256-bit vectors (Wide), f32
/// goes by 8 x 8 transposes: eight lanes' rows of eight steps in, eight
/// steps of eight lanes out.
/// With `sums`, also sums[l] += Σ_k X[l·sLane + k·sK] for each lane (the
/// values pass through the registers anyway).
template <typename T, int S, bool Wide>
DRIVER void packSlivers(const T *X, int64_t sLane, int64_t sK, int64_t len, int64_t kc, T *out,
                        T *sums = nullptr) {
  int64_t full = 0;
  if constexpr (Wide && std::is_same_v<T, float> && S % 8 == 0) {
    if (sK == 1 && sLane != 1 && !sums) {
      using unroll::cpu::f32x8u;
      full = len / S * S;
      const int64_t k8 = kc / 8 * 8;
      for (int64_t l0 = 0; l0 < full; l0 += 8) {
        T *o = out + l0 / S * S * kc + l0 % S; // lane l0's value of step 0
        const T *x = X + l0 * sLane;
        for (int64_t k0 = 0; k0 < k8; k0 += 8) {
          f32x8u r[8];
          for (int i = 0; i < 8; ++i)
            memcpy(&r[i], x + i * sLane + k0, sizeof r[i]);
          unroll::cpu::transpose8(r);
          for (int e = 0; e < 8; ++e)
            memcpy(o + (k0 + e) * S, &r[e], sizeof r[e]);
        }
        for (int64_t k = k8; k < kc; ++k)
          for (int i = 0; i < 8; ++i)
            o[k * S + i] = x[i * sLane + k];
      }
    }
  }
  if (sLane == 1) {
    full = len / S * S;
    for (int64_t k = 0; k < kc; ++k) {
      const T *src = X + k * sK;
      prefetchRow(src + kAhead * sK, full);
      for (int64_t l = 0; l < full; l += S)
        memcpy(out + l * kc + k * S, src + l, S * sizeof(T));
      if (sums)
        for (int64_t l = 0; l < full; ++l)
          sums[l] += src[l];
    }
  }
  for (int64_t l = full; l < len; l += S) {
    int64_t lanes = std::min<int64_t>(S, len - l);
    T *o = out + l * kc;
    for (int64_t k = 0; k < kc; ++k, o += S) {
      const T *src = X + l * sLane + k * sK;
      int64_t c = 0;
      for (; c < lanes; ++c)
        o[c] = src[c * sLane];
      for (; c < S; ++c)
        o[c] = 0;
      if (sums)
        for (c = 0; c < lanes; ++c)
          sums[l + c] += src[c * sLane];
    }
  }
}

/// A[ic:ic+mc, pc:pc+kc] as MR-row slivers (and its row sums into `sums`).
template <typename T, int MR, bool Wide>
DRIVER void packA(const T *A, int64_t sAm, int64_t sAk, int64_t mc, int64_t kc, T *out,
                  T *sums = nullptr) {
  packSlivers<T, MR, Wide>(A, sAm, sAk, mc, kc, out, sums);
}

/// sums[m] += Σ_k A[m, k] on its own (where the product does not pack A).
/// A column-major A (sAm = 1: the weight gradients' Xᵀ) goes down its
/// columns, contiguous, adding each to all M sums: row by row it read one
/// value per cache line, and with bf16 operands (whose packing does not sum)
/// that took 29% of the paper step.
template <typename T>
void rowSums(int64_t M, int64_t K, const T *A, int64_t sAm, int64_t sAk, T *sums) {
  if (sAm == 1 && sAk != 1) {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < M; ++i)
        sums[i] += A[i + k * sAk];
    return;
  }
  for (int64_t i = 0; i < M; ++i) {
    T s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += A[i * sAm + k * sAk];
    sums[i] += s;
  }
}

/// B[pc:pc+kc, jc:jc+nc] as NR-column slivers.
template <typename T, int NR, bool Wide>
DRIVER void packB(const T *B, int64_t sBk, int64_t sBn, int64_t kc, int64_t nc, T *out) {
  packSlivers<T, NR, Wide>(B, sBn, sBk, nc, kc, out);
}

/// The memory the calling thread's GEMMs only read until its next
/// unroll_cpu_read_only call (unroll-run's θ during one call of a compiled
/// function), and that call's number.
struct ReadOnly {
  const char *lo = nullptr, *hi = nullptr;
  uint64_t epoch = 0;
};
thread_local ReadOnly readOnly;
/// Whether the thread's last blocked product took B from the cache below
/// (UNROLL_GEMM_PROFILE marks its kernel "(w)").
thread_local bool weightKept = false;

/// A weight shared by every iteration of a looped block is the B of the
/// same product in each iteration (and the B of its VJP in the backward):
/// packed once per call of the compiled function and kept, instead of once
/// per product. An entry holds all of one B's packed blocks, in the order
/// the driver visits them (jc, then pc); entries live until the thread's
/// next read-only region, their buffers are kept for reuse.
struct PackedWeights {
  struct Entry {
    const void *B;
    int64_t sBk, sBn, K, N, layout;
    std::vector<size_t> offsets; // of each block, in bytes
    char *data = nullptr;
    size_t capacity = 0;
  };
  std::vector<Entry> entries;
  size_t used = 0;
  uint64_t epoch = ~uint64_t(0);
  ~PackedWeights() {
    for (Entry &e : entries)
      free(e.data);
  }
};

/// The driver's view of B: packed by the cache (blocks in visiting order) or
/// block by block into the driver's scratch.
template <typename P, typename Pack> struct WeightBlocks {
  const PackedWeights::Entry *entry;
  Pack pack;
  int64_t next = 0;
  /// Block (jc, pc) of B, visited in the driver's order: from the cache,
  /// or packed now into `scratch`.
  DRIVER const P *block(int64_t jc, int64_t nc, int64_t pc, int64_t kc, P *scratch) {
    if (entry)
      return reinterpret_cast<const P *>(entry->data + entry->offsets[next++]);
    pack(jc, nc, pc, kc, scratch);
    return scratch;
  }
};

/// The packed layouts of B besides the f32 drivers' (NR · 2 + Wide): the
/// cache keeps each layout apart.
constexpr int64_t kLayoutBf16 = 1000, kLayoutAmx = 1001;

/// B's packed blocks from the cache if B lies in the thread's read-only
/// region (packed now if this call is the first to ask), else a view that
/// packs each block as the driver asks for it. `blocks(visit)` calls visit(jc, nc, pc, kc, words)
/// for each block in the driver's order, words the packed block's size in P elements; pack(jc, nc,
/// pc, kc, out) packs one. `layout` tells the drivers' layouts apart (f32 per instruction set,
/// bf16, AMX).
template <typename P, typename T, typename Blocks, typename Pack>
DRIVER WeightBlocks<P, Pack> packedWeight(const T *B, int64_t sBk, int64_t sBn, int64_t K,
                                          int64_t N, int64_t layout, Blocks blocks, Pack pack) {
  const ReadOnly &ro = readOnly;
  if (!ro.lo || sBk < 0 || sBn < 0 || K <= 0 || N <= 0)
    return {nullptr, pack};
  const char *first = reinterpret_cast<const char *>(B),
             *last = reinterpret_cast<const char *>(B + (K - 1) * sBk + (N - 1) * sBn + 1);
  if (first < ro.lo || last > ro.hi)
    return {nullptr, pack};
  thread_local PackedWeights cache;
  if (cache.epoch != ro.epoch) {
    cache.used = 0;
    cache.epoch = ro.epoch;
  }
  for (size_t i = 0; i < cache.used; ++i) {
    const auto &e = cache.entries[i];
    if (e.B == B && e.sBk == sBk && e.sBn == sBn && e.K == K && e.N == N && e.layout == layout) {
      weightKept = true;
      return {&e, pack};
    }
  }
  if (cache.used == cache.entries.size())
    cache.entries.emplace_back();
  auto &e = cache.entries[cache.used++];
  e.B = B, e.sBk = sBk, e.sBn = sBn, e.K = K, e.N = N, e.layout = layout;
  e.offsets.clear();
  size_t bytes = 0;
  blocks([&](int64_t, int64_t, int64_t, int64_t, size_t words) {
    e.offsets.push_back(bytes);
    bytes += (words * sizeof(P) + 63) / 64 * 64;
  });
  if (e.capacity < bytes) {
    free(e.data);
    e.data = static_cast<char *>(aligned_alloc(64, bytes));
    e.capacity = bytes;
  }
  size_t i = 0;
  blocks([&](int64_t jc, int64_t nc, int64_t pc, int64_t kc, size_t) {
    pack(jc, nc, pc, kc, reinterpret_cast<P *>(e.data + e.offsets[i++]));
  });
  weightKept = true;
  return {&e, pack};
}

/// Visits the (jc, pc) blocks of a K x N operand in the drivers' order,
/// NC columns by kKC steps at a time, with the packed size words(nc, kc).
template <typename Words> auto blockOrder(int64_t K, int64_t N, int64_t NC, Words words) {
  return [=](auto visit) {
    for (int64_t jc = 0; jc < N; jc += NC)
      for (int64_t pc = 0; pc < K; pc += kKC) {
        const int64_t nc = std::min<int64_t>(NC, N - jc), kc = std::min<int64_t>(kKC, K - pc);
        visit(jc, nc, pc, kc, size_t(words(nc, kc)));
      }
  };
}

/// The register tile: acc[MR][NR] = Σ_k a[r][k] b[k][c], then C += acc.
/// A is a k-major packed sliver (lda = 0: a[k·MR + r]) or, for row-major A,
/// the matrix itself (row r at a + r·lda, contiguous in k: no packing). V is
/// a GCC vector type of W elements; NR = 2 W. Never inlined into the
/// driver: whether GCC inlined it there changed with unrelated edits to the
/// driver, and the tile's code should not. UNROLL_K unrolls the loop over k
/// (UNROLL_K8 with AVX-512, UNROLL_K4 below): one step of k per iteration
/// ran the Xeon's 8 x 32 tile at ~75% of its FMA rate (150-170 GFLOP/s of
/// 214 measured with FMAs alone); 8 steps made the model's products 5-9%
/// faster and the paper step 4.75% (paired medians, docs/performance.md).
#define NOINLINE __attribute__((noinline))
#define UNROLL_TILE(NAME, T, V, W, MR, UNROLL_K, ATTR)                                             \
  ATTR NOINLINE void NAME(int64_t kc, const T *a, int64_t lda, const T *b, T *C, int64_t sCm,      \
                          int64_t sCn, int64_t rows, int64_t cols, bool add) {                     \
    V acc[MR][2];                                                                                  \
    for (int r = 0; r < MR; ++r)                                                                   \
      acc[r][0] = acc[r][1] = V{};                                                                 \
    if (lda == 0) {                                                                                \
      UNROLL_K for (int64_t k = 0; k < kc; ++k) {                                                  \
        V b0, b1;                                                                                  \
        memcpy(&b0, b + k * 2 * W, sizeof(V));                                                     \
        memcpy(&b1, b + k * 2 * W + W, sizeof(V));                                                 \
        for (int r = 0; r < MR; ++r) {                                                             \
          V av = a[k * MR + r] - V{}; /* x - 0 folds: one broadcast load (0 + x is an add) */      \
          acc[r][0] += av * b0;                                                                    \
          acc[r][1] += av * b1;                                                                    \
        }                                                                                          \
      }                                                                                            \
    } else {                                                                                       \
      const T *rp[MR];                                                                             \
      for (int r = 0; r < MR; ++r)                                                                 \
        rp[r] = a + r * lda;                                                                       \
      UNROLL_K for (int64_t k = 0; k < kc; ++k) {                                                  \
        V b0, b1;                                                                                  \
        memcpy(&b0, b + k * 2 * W, sizeof(V));                                                     \
        memcpy(&b1, b + k * 2 * W + W, sizeof(V));                                                 \
        for (int r = 0; r < MR; ++r) {                                                             \
          V av = rp[r][k] - V{};                                                                   \
          acc[r][0] += av * b0;                                                                    \
          acc[r][1] += av * b1;                                                                    \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    if (rows == MR && cols == 2 * W && sCn == 1) {                                                 \
      for (int r = 0; r < MR; ++r) {                                                               \
        V c0 = acc[r][0], c1 = acc[r][1];                                                          \
        if (add) {                                                                                 \
          V o0, o1;                                                                                \
          memcpy(&o0, C + r * sCm, sizeof(V));                                                     \
          memcpy(&o1, C + r * sCm + W, sizeof(V));                                                 \
          c0 += o0;                                                                                \
          c1 += o1;                                                                                \
        }                                                                                          \
        memcpy(C + r * sCm, &c0, sizeof(V));                                                       \
        memcpy(C + r * sCm + W, &c1, sizeof(V));                                                   \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    T tile[MR][2 * W];                                                                             \
    memcpy(tile, acc, sizeof tile);                                                                \
    for (int64_t r = 0; r < rows; ++r)                                                             \
      for (int64_t c = 0; c < cols; ++c)                                                           \
        C[r * sCm + c * sCn] = add ? C[r * sCm + c * sCn] + tile[r][c] : tile[r][c];               \
  }

// GCC does not unroll loops at -O3 without -funroll-loops: the tiles ask.
#define UNROLL_K4 _Pragma("GCC unroll 4")
#define UNROLL_K8 _Pragma("GCC unroll 8")

typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));
typedef double f64x8 __attribute__((vector_size(64)));
typedef double f64x4 __attribute__((vector_size(32)));
typedef double f64x2 __attribute__((vector_size(16)));

#define AVX512 __attribute__((target("avx512f,fma")))
#define AVX2 __attribute__((target("avx2,fma")))
#define PLAIN

/// DEF(PREFIX<variant>, T, V, ATTR) for each precision and instruction set:
/// the kernels whose variants differ in nothing but these.
#define UNROLL_FOR_EACH_VARIANT(DEF, PREFIX) UNROLL_FOR_EACH_VARIANT_AT(DEF, PREFIX, AVX512)
/// The same with the AVX-512 variants compiled for ATTR512.
#define UNROLL_FOR_EACH_VARIANT_AT(DEF, PREFIX, ATTR512)                                           \
  DEF(PREFIX##F32Avx512, float, f32x16, ATTR512)                                                   \
  DEF(PREFIX##F32Avx2, float, f32x8, AVX2)                                                         \
  DEF(PREFIX##F32Plain, float, f32x4, PLAIN)                                                       \
  DEF(PREFIX##F64Avx512, double, f64x8, ATTR512)                                                   \
  DEF(PREFIX##F64Avx2, double, f64x4, AVX2)                                                        \
  DEF(PREFIX##F64Plain, double, f64x2, PLAIN)

UNROLL_TILE(tileF32Avx512, float, f32x16, 16, 8, UNROLL_K8, AVX512)
UNROLL_TILE(tileF32Avx2, float, f32x8, 8, 6, UNROLL_K4, AVX2)
UNROLL_TILE(tileF32Plain, float, f32x4, 4, 4, UNROLL_K4, PLAIN)
UNROLL_TILE(tileF64Avx512, double, f64x8, 8, 8, UNROLL_K8, AVX512)
UNROLL_TILE(tileF64Avx2, double, f64x4, 4, 6, UNROLL_K4, AVX2)
UNROLL_TILE(tileF64Plain, double, f64x2, 2, 4, UNROLL_K4, PLAIN)

/// Narrow products: N = W or 2 W columns with rows of B and C contiguous
/// (attention's P·V and its gradients, N = head dim). No packing at all: each
/// row of C is one or two vectors accumulated over k from B's rows. Packing
/// B for these small products cost as much as the arithmetic.
#define UNROLL_NARROW(NAME, T, V, W, ATTR)                                                         \
  ATTR void NAME(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,            \
                 const T *B, int64_t sBk, T *C, int64_t sCm, bool add) {                           \
    constexpr int R = 8; /* rows at a time */                                                      \
    bool two = N == 2 * W;                                                                         \
    for (int64_t i = 0; i < M; i += R) {                                                           \
      int rows = int(std::min<int64_t>(R, M - i));                                                 \
      V acc[R][2];                                                                                 \
      for (int r = 0; r < R; ++r)                                                                  \
        acc[r][0] = acc[r][1] = V{};                                                               \
      for (int64_t k = 0; k < K; ++k) {                                                            \
        V b0, b1 = V{};                                                                            \
        memcpy(&b0, B + k * sBk, sizeof(V));                                                       \
        if (two)                                                                                   \
          memcpy(&b1, B + k * sBk + W, sizeof(V));                                                 \
        for (int r = 0; r < R; ++r) {                                                              \
          if (r >= rows)                                                                           \
            break;                                                                                 \
          V av = A[(i + r) * sAm + k * sAk] - V{};                                                 \
          acc[r][0] += av * b0;                                                                    \
          if (two)                                                                                 \
            acc[r][1] += av * b1;                                                                  \
        }                                                                                          \
      }                                                                                            \
      for (int r = 0; r < rows; ++r)                                                               \
        for (int h = 0; h < (two ? 2 : 1); ++h) {                                                  \
          T *c = C + (i + r) * sCm + h * W;                                                        \
          V v = acc[r][h];                                                                         \
          if (add) {                                                                               \
            V o;                                                                                   \
            memcpy(&o, c, sizeof(V));                                                              \
            v += o;                                                                                \
          }                                                                                        \
          memcpy(c, &v, sizeof(V));                                                                \
        }                                                                                          \
    }                                                                                              \
  }

UNROLL_NARROW(narrowF32Avx512, float, f32x16, 16, AVX512)
UNROLL_NARROW(narrowF32Avx2, float, f32x8, 8, AVX2)
UNROLL_NARROW(narrowF64Avx512, double, f64x8, 8, AVX512)
UNROLL_NARROW(narrowF64Avx2, double, f64x4, 4, AVX2)

/// Thin products: one of M, N, K is 1 (the model's readout y = h·w + b, its
/// gradients dh = dy wᵀ and dw = hᵀ dy). The blocked kernel would compute
/// them as whole register tiles of which one row or column counts (8-32x the
/// arithmetic; the readout ran at 4 GFLOP/s); these read each operand once.
///
/// y[i] (+)= Σ_k A[i·sAm + k·sAk] x[k·sx] for i < M (a matrix-vector
/// product): dot products along rows of A contiguous in k (four rows at a
/// time), or with columns contiguous in i, y's W·U entries in registers
/// updated by each k. Other layouts go element by element.
template <typename V, typename T>
DRIVER void gemv(int64_t M, int64_t K, const T *A, int64_t sAm, int64_t sAk, const T *x, int64_t sx,
                 T *y, int64_t sy, bool add) {
  constexpr int W = sizeof(V) / sizeof(T);
  auto put = [&](int64_t i, T v) __attribute__((always_inline)) {
    T &o = y[i * sy];
    o = add ? o + v : v;
  };
  if (sAk == 1 && sx == 1) {
    constexpr int R = 4;
    int64_t i = 0;
    for (; i + R <= M; i += R) {
      V acc[R] = {};
      int64_t k = 0;
      for (; k + W <= K; k += W) {
        V xv;
        memcpy(&xv, x + k, sizeof xv);
        for (int r = 0; r < R; ++r) {
          V av;
          memcpy(&av, A + (i + r) * sAm + k, sizeof av);
          acc[r] += av * xv;
        }
      }
      for (int r = 0; r < R; ++r) {
        T s = 0;
        for (int l = 0; l < W; ++l)
          s += acc[r][l];
        for (int64_t kk = k; kk < K; ++kk)
          s += A[(i + r) * sAm + kk] * x[kk];
        put(i + r, s);
      }
    }
    for (; i < M; ++i) {
      T s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += A[i * sAm + k] * x[k];
      put(i, s);
    }
    return;
  }
  if (sAm == 1 && sy == 1) {
    constexpr int U = 4;
    int64_t i = 0;
    auto columns = [&](auto u) __attribute__((always_inline)) {
      constexpr int N = decltype(u)::value;
      V acc[N] = {};
      for (int64_t k = 0; k < K; ++k) {
        V xk = x[k * sx] - V{};
        for (int q = 0; q < N; ++q) {
          V av;
          memcpy(&av, A + i + q * W + k * sAk, sizeof av);
          acc[q] += av * xk;
        }
      }
      for (int q = 0; q < N; ++q) {
        if (add) {
          V o;
          memcpy(&o, y + i + q * W, sizeof o);
          acc[q] += o;
        }
        memcpy(y + i + q * W, &acc[q], sizeof acc[q]);
      }
    };
    for (; i + U * W <= M; i += U * W)
      columns(std::integral_constant<int, U>{});
    for (; i + W <= M; i += W)
      columns(std::integral_constant<int, 1>{});
    for (; i < M; ++i) {
      T s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += A[i + k * sAk] * x[k * sx];
      put(i, s);
    }
    return;
  }
  for (int64_t i = 0; i < M; ++i) {
    T s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += A[i * sAm + k * sAk] * x[k * sx];
    put(i, s);
  }
}

/// C[i, j] (+)= a[i·sa] b[j·sb] (K = 1): rows of C contiguous in j go a
/// vector at a time.
template <typename V, typename T>
DRIVER void outer(int64_t M, int64_t N, const T *a, int64_t sa, const T *b, int64_t sb, T *C,
                  int64_t sCm, int64_t sCn, bool add) {
  constexpr int W = sizeof(V) / sizeof(T);
  for (int64_t i = 0; i < M; ++i) {
    const T ai = a[i * sa];
    T *c = C + i * sCm;
    int64_t j = 0;
    if (sCn == 1 && sb == 1)
      for (; j + W <= N; j += W) {
        V bv, o;
        memcpy(&bv, b + j, sizeof bv);
        bv *= ai;
        if (add) {
          memcpy(&o, c + j, sizeof o);
          bv += o;
        }
        memcpy(c + j, &bv, sizeof bv);
      }
    for (; j < N; ++j) {
      T &o = c[j * sCn];
      o = add ? o + ai * b[j * sb] : ai * b[j * sb];
    }
  }
}

/// Whether a product is thin (thinProduct takes it).
inline bool isThin(int64_t M, int64_t N, int64_t K) {
  return M > 0 && N > 0 && K > 0 && (M == 1 || N == 1 || K == 1);
}

/// A thin product (isThin) by gemv or outer: N = 1 is y = A x, M = 1 the
/// same for Cᵀ = Bᵀ Aᵀ.
template <typename V, typename T>
DRIVER void thinProduct(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,
                        const T *B, int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn,
                        bool add) {
  if (K == 1)
    outer<V>(M, N, A, sAm, B, sBn, C, sCm, sCn, add);
  else if (N == 1)
    gemv<V>(M, K, A, sAm, sAk, B, sBk, C, sCm, add);
  else
    gemv<V>(N, K, B, sBn, sBk, A, sAk, C, sCn, add);
}

#define UNROLL_THIN(NAME, T, V, ATTR)                                                              \
  ATTR void NAME(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,            \
                 const T *B, int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn, bool add) { \
    thinProduct<V>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, add);                           \
  }
UNROLL_FOR_EACH_VARIANT(UNROLL_THIN, thin)

/// The epilogue of unroll_gemm_ex on rows [0, rows) x columns [0, cols) of
/// a finished block of C (and D at C's strides): C += bias, then C += D, D =
/// GELU(C) or C ∘= GELU'(D), while the block is still in cache. V is the
/// instruction set's vector of T; contiguous rows go W at a time.
template <typename V, typename T>
inline __attribute__((always_inline)) void epilogueBlock(int64_t rows, int64_t cols, T *C,
                                                         int64_t sCm, int64_t sCn, int64_t flags,
                                                         const T *bias, T *D) {
  using unroll::cpu::gelu;
  using unroll::cpu::geluGrad;
  using unroll::cpu::geluGradN;
  using unroll::cpu::geluN;
  constexpr int W = sizeof(V) / sizeof(T);
  const bool addBias = flags & UNROLL_GEMM_BIAS, toD = flags & UNROLL_GEMM_GELU_AUX,
             grad = flags & UNROLL_GEMM_DGELU, addD = flags & UNROLL_GEMM_ADD_D;
  // D = C: GELU in place, the pre-activation not kept (stored once).
  const bool keepC = !(toD && D == C);
  // The lambdas are always inlined: compiled on their own they would not
  // get the caller's target attribute, and a 512-bit GCC vector would be
  // emulated with SSE2 (the AVX-512 GELU epilogue was: 13% of the paper
  // step on a Zen 4 host).
  auto one = [&](T *c, T *d, int64_t j) __attribute__((always_inline)) {
    V v{}, x{};
    v[0] = *c;
    if (addBias)
      v[0] += bias[j];
    if (addD)
      v[0] += *d;
    if (grad) {
      x[0] = *d;
      v[0] *= geluGrad(x)[0];
    }
    if (keepC)
      *c = v[0];
    if (toD)
      *d = gelu(v)[0];
  };
  for (int64_t i = 0; i < rows; ++i) {
    T *c = C + i * sCm, *d = D ? D + i * sCm : nullptr;
    int64_t j = 0;
    // U vectors at a time: GELU is a ~40-deep dependency chain per vector,
    // and independent chains side by side keep both FMA pipes busy. AVX-512
    // has the registers for 4 (1312 x 1024 x 256 on the Xeon, 7 paired
    // rounds: bias+GELU 0.978x, GELU' 0.974x against 2; 8 no better than 4);
    // 4 spills on AVX2 (measured slower than 1).
    constexpr int U = sizeof(V) == 64 ? 4 : 2;
    auto vectors = [&](auto u) __attribute__((always_inline)) {
      constexpr int N = decltype(u)::value;
      V v[N], x[N];
      for (int q = 0; q < N; ++q)
        memcpy(&v[q], c + j + q * W, sizeof(V));
      if (addBias)
        for (int q = 0; q < N; ++q) {
          V bv;
          memcpy(&bv, bias + j + q * W, sizeof bv);
          v[q] += bv;
        }
      if (addD)
        for (int q = 0; q < N; ++q) {
          V dv;
          memcpy(&dv, d + j + q * W, sizeof dv);
          v[q] += dv;
        }
      if (grad) {
        for (int q = 0; q < N; ++q)
          memcpy(&x[q], d + j + q * W, sizeof(V));
        geluGradN<V, N>(x);
        for (int q = 0; q < N; ++q)
          v[q] *= x[q];
      }
      if (keepC)
        for (int q = 0; q < N; ++q)
          memcpy(c + j + q * W, &v[q], sizeof(V));
      if (toD) {
        geluN<V, N>(v);
        for (int q = 0; q < N; ++q)
          memcpy(d + j + q * W, &v[q], sizeof(V));
      }
    };
    if (sCn == 1) {
      for (; j + U * W <= cols; j += U * W)
        vectors(std::integral_constant<int, U>{});
      for (; j + W <= cols; j += W)
        vectors(std::integral_constant<int, 1>{});
    }
    for (; j < cols; ++j)
      one(c + j * sCn, d ? d + j * sCn : nullptr, j);
  }
}

template <typename T>
using EpilogueFn = void (*)(int64_t, int64_t, T *, int64_t, int64_t, int64_t, const T *, T *);

#define UNROLL_EPILOGUE(NAME, T, V, ATTR)                                                          \
  ATTR void NAME(int64_t rows, int64_t cols, T *C, int64_t sCm, int64_t sCn, int64_t flags,        \
                 const T *bias, T *D) {                                                            \
    epilogueBlock<V, T>(rows, cols, C, sCm, sCn, flags, bias, D);                                  \
  }
// With the extensions Isa.h's AVX-512 variants have (GELU's exponent is
// clamped by vrangeps, AVX512DQ); the dispatch picks them only where the
// CPU has those.
UNROLL_FOR_EACH_VARIANT_AT(UNROLL_EPILOGUE, epi, UNROLL_AVX512)

/// What unroll_gemm_ex adds to a product: its flags, vectors and the
/// instruction set's epilogue (flags 0: none).
template <typename T> struct Epilogue {
  int64_t flags = 0;
  const T *bias = nullptr;
  T *D = nullptr;
  EpilogueFn<T> fn = nullptr;
  /// ROWSUM_A: where A's row sums go (D), which the blocked product adds
  /// while it packs A; null otherwise.
  T *rowSums = nullptr;
  /// D's rows i0.. and columns j0.. of one register tile asked for into L2,
  /// where the epilogue reads D (the GELU's input, the residual) or writes
  /// it (the GELU's output). The drivers call it tile by tile in the last
  /// k-block, so that the block's epilogue does not wait on memory (Xeon,
  /// 5248 x 1024 x 256, paired medians: with the GELU gradient 23.2 ->
  /// 21.3-21.6 ms, the residual 19.3 -> 18.5-18.7, bias+GELU 21.2 ->
  /// 20.3-20.8; the product alone 16.6). Inlined like the rest of the
  /// driver (DRIVER): GCC does not inline it on its own into the drivers
  /// compiled for AVX2/AVX-512, and drops the call to a function of
  /// prefetches alone as having no effect.
  DRIVER void prefetchD(int64_t i0, int64_t j0, int64_t rows, int64_t cols, int64_t sCm,
                        int64_t sCn) const {
    if (!D || sCn != 1 || !(flags & (UNROLL_GEMM_GELU_AUX | UNROLL_GEMM_DGELU | UNROLL_GEMM_ADD_D)))
      return;
    for (int64_t r = 0; r < rows; ++r)
      prefetchRow<T, 0, 2>(D + (i0 + r) * sCm + j0, cols);
  }
  void apply(int64_t i0, int64_t j0, int64_t rows, int64_t cols, T *C, int64_t sCm,
             int64_t sCn) const {
    if (flags)
      fn(rows, cols, C + i0 * sCm + j0 * sCn, sCm, sCn, flags, bias ? bias + j0 : nullptr,
         D ? D + i0 * sCm + j0 * sCn : nullptr);
  }
};

/// Whether the driver asks for a share of the next rows of a row-major A
/// before each tile: on AMD's CPUs, not on Intel's. On the Intel Xeon host,
/// with the unrolled tile, leaving it out made the paper step 0.973x on one
/// thread and 0.956x on two (paired medians of 26 and 9 rounds) and the
/// forward 0.999x and 1.006x (10 and 5). UNROLL_GEMM_PREFETCH_A=0 or 1
/// overrides.
inline bool prefetchNextA() {
  static const bool on = [] {
    if (const char *e = getenv("UNROLL_GEMM_PREFETCH_A"))
      return strcmp(e, "0") != 0;
    return !unroll::cpu::isIntel();
  }();
  return on;
}

template <typename T>
using TileFn = void (*)(int64_t, const T *, int64_t, const T *, T *, int64_t, int64_t, int64_t,
                        int64_t, bool);

/// One (column, k) block of a blocked product: C[:, jc:jc+nc] gets A's
/// columns pc:pc+kc times the packed block pbk of B.
template <typename T> struct RowsOf {
  TileFn<T> tile;
  int64_t M, jc, nc, pc, kc;
  const T *A;
  int64_t sAm, sAk;
  const T *pbk;
  T *C;
  int64_t sCm, sCn;
  bool accumulate, last, aheadA;
  const Epilogue<T> *epi;
};

/// Rows [ic0, ic1) of a block (`x`), kMC rows at a time, on the calling
/// thread's scratch for A.
template <typename T, int MR, int NR, bool Wide>
DRIVER void gemmRows(const RowsOf<T> &x, int64_t ic0, int64_t ic1) {
  thread_local Scratch<T> scratch;
  const int64_t M = x.M, jc = x.jc, nc = x.nc, pc = x.pc, kc = x.kc, sAm = x.sAm, sAk = x.sAk,
                sCm = x.sCm, sCn = x.sCn;
  const T *A = x.A;
  T *C = x.C;
  const Epilogue<T> &epi = *x.epi;
  T *pa = scratch.bufA(size_t(kKC) * ((std::min<int64_t>(kMC, M) + MR - 1) / MR) * MR);
  for (int64_t ic = ic0; ic < ic1; ic += kMC) {
    int64_t mc = std::min<int64_t>(kMC, ic1 - ic);
    // Row-major A is read in place; only a ragged last sliver (rows past
    // M must read zeros) and strided A are packed.
    bool direct = sAk == 1;
    if (!direct)
      packA<T, MR, Wide>(A + ic * sAm + pc * sAk, sAm, sAk, mc, kc, pa,
                         jc == 0 && epi.rowSums ? epi.rowSums + ic : nullptr);
    for (int64_t ir = 0; ir < mc; ir += MR) {
      int64_t rows = std::min<int64_t>(MR, mc - ir);
      const T *a = pa + ir * kc;
      int64_t lda = 0; // k-major packed
      if (direct && rows == MR) {
        a = A + (ic + ir) * sAm + pc;
        lda = sAm;
      } else if (direct) {
        packA<T, MR, Wide>(A + (ic + ir) * sAm + pc, sAm, 1, rows, kc, pa);
        a = pa;
      }
      // The rows of A read in place next (this panel's next sliver, or
      // the next panel's first) come from memory: a share of their
      // lines is asked for before each of this sliver's tiles.
      const T *next = nullptr;
      if (x.aheadA && direct && ic + ir + 2 * MR <= M)
        next = A + (ic + ir + MR) * sAm + pc;
      const int64_t lines = MR * ((kc * int64_t(sizeof(T)) + 63) / 64);
      const int64_t tiles = (nc + NR - 1) / NR, share = (lines + tiles - 1) / tiles;
      int64_t asked = 0;
      for (int64_t jr = 0; jr < nc; jr += NR) {
        T *c = C + (ic + ir) * sCm + (jc + jr) * sCn;
        // The tile's rows of C, which it stores at its end.
        if (sCn == 1)
          for (int64_t r = 0; r < rows; ++r)
            prefetchRow<T, 1>(c + r * sCm, NR);
        if (x.last)
          epi.prefetchD(ic + ir, jc + jr, rows, std::min<int64_t>(NR, nc - jr), sCm, sCn);
        for (int64_t e = asked + share; next && asked < std::min(lines, e); ++asked)
          __builtin_prefetch(next + (asked % MR) * sAm + (asked / MR) * (64 / sizeof(T)), 0, 2);
        x.tile(kc, a, lda, x.pbk + jr * kc, c, sCm, sCn, rows, std::min<int64_t>(NR, nc - jr),
               x.accumulate || pc > 0);
      }
    }
    // The last k-block finished this mc x nc block of C: its epilogue
    // now, while it is in L2 (per block: a call per register tile cost
    // more than the cache misses it saves).
    if (x.last)
      epi.apply(ic, jc, mc, nc, C, sCm, sCn);
  }
}

/// gemmRows compiled for an instruction set (UNROLL_DRIVER), called by a
/// helping thread: rows [ic0, ic1) of the block *ctx, a RowsOf<T>.
using RowsFn = void (*)(const void *ctx, int64_t ic0, int64_t ic1);

/// Helping: unroll-run's threads each run their own chunks of a batch, and
/// the first to run out of chunks would wait for the others (on this VM the
/// two threads of the paper step ended 3-171 ms apart, 63 ms on average:
/// ~2% of a 1.4 s step). Instead it calls unroll_cpu_help, and the blocked
/// f32 and f64 products of the threads still running hand it rows: a
/// product offers each (column, k) block as a job, and the owner and the
/// helper that took it share its kMC-row blocks through one counter. Each
/// element of C is computed by the same tile in the same order whichever
/// thread runs its rows: the result is the same bit for bit
/// (`unroll-gemm-bench --check-help` checks it).
struct RowJob {
  RowsFn rows = nullptr;
  const void *ctx = nullptr;
  int64_t M = 0, blocks = 0;
  std::atomic<int64_t> next{0};  // the next kMC-row block not yet taken
  std::atomic<bool> done{false}; // the helper that took the job is out of it
  /// Runs blocks until none is left; how many this thread ran.
  int64_t work() {
    int64_t ran = 0;
    for (int64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < blocks; ++ran)
      rows(ctx, b * kMC, std::min(M, (b + 1) * kMC));
    return ran;
  }
};
std::atomic<int> helpersWaiting{0};
std::atomic<RowJob *> offeredJob{nullptr};
/// Row blocks run by helpers (unroll_cpu_helped_blocks).
std::atomic<uint64_t> helpedBlocks{0};

/// Runs the M rows of a block (`ctx`) with a helper, if one waits and no
/// other product holds the offer; false (nothing run) otherwise.
inline bool shareRows(int64_t M, RowsFn rows, const void *ctx) {
  const int64_t blocks = (M + kMC - 1) / kMC;
  if (blocks < 2 || helpersWaiting.load(std::memory_order_relaxed) == 0)
    return false;
  RowJob job;
  job.rows = rows;
  job.ctx = ctx;
  job.M = M;
  job.blocks = blocks;
  RowJob *none = nullptr;
  if (!offeredJob.compare_exchange_strong(none, &job, std::memory_order_release,
                                          std::memory_order_relaxed))
    return false;
  job.work();
  RowJob *mine = &job;
  if (offeredJob.compare_exchange_strong(mine, nullptr, std::memory_order_acq_rel))
    return true; // no helper took it
  while (!job.done.load(std::memory_order_acquire))
    _mm_pause();
  return true;
}

template <typename T, int MR, int NR, bool Wide>
DRIVER void gemm(RowsFn rowsFn, TileFn<T> tile, int64_t M, int64_t N, int64_t K, const T *A,
                 int64_t sAm, int64_t sAk, const T *B, int64_t sBk, int64_t sBn, T *C,
                 int64_t sCm, int64_t sCn, bool accumulate, const Epilogue<T> &epi) {
  if (M <= 0 || N <= 0)
    return;
  if (K <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          C[i * sCm + j * sCn] = 0;
    epi.apply(0, 0, M, N, C, sCm, sCn);
    return;
  }
  thread_local Scratch<T> scratch;
  int64_t ncMax = std::min<int64_t>(kNC, N);
  T *pb = scratch.bufB(size_t(kKC) * ((ncMax + NR - 1) / NR) * NR);
  auto weight = packedWeight<T>(
      B, sBk, sBn, K, N, NR * 2 + Wide,
      blockOrder(K, N, kNC, [](int64_t nc, int64_t kc) { return kc * ((nc + NR - 1) / NR * NR); }),
      [&](int64_t jc, int64_t nc, int64_t pc, int64_t kc, T *out) {
        packB<T, NR, Wide>(B + pc * sBk + jc * sBn, sBk, sBn, kc, nc, out);
      });
  RowsOf<T> x{tile, M, 0, 0, 0, 0, A, sAm, sAk, nullptr, C, sCm, sCn, accumulate, false,
              prefetchNextA(), &epi};
  for (int64_t jc = 0; jc < N; jc += kNC) {
    x.jc = jc;
    x.nc = std::min<int64_t>(kNC, N - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      x.pc = pc;
      x.kc = std::min<int64_t>(kKC, K - pc);
      x.last = pc + x.kc >= K;
      x.pbk = weight.block(jc, x.nc, pc, x.kc, pb);
      if (!shareRows(M, rowsFn, &x))
        gemmRows<T, MR, NR, Wide>(x, 0, M);
    }
  }
}

// The driver of each instruction set: gemm() and its packing inlined into a
// function compiled for it, so that the copies and the row sums use its
// vectors.
#define UNROLL_DRIVER(NAME, T, MR, NR, TILE, WIDE, ATTR)                                           \
  ATTR void NAME##Rows(const void *ctx, int64_t ic0, int64_t ic1) {                                \
    gemmRows<T, MR, NR, WIDE>(*static_cast<const RowsOf<T> *>(ctx), ic0, ic1);                     \
  }                                                                                                \
  ATTR void NAME(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,            \
                 const T *B, int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn, bool acc,   \
                 const Epilogue<T> &epi) {                                                         \
    gemm<T, MR, NR, WIDE>(NAME##Rows, TILE, M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc,   \
                          epi);                                                                    \
  }
UNROLL_DRIVER(gemmF32Avx512, float, 8, 32, tileF32Avx512, true, AVX512)
UNROLL_DRIVER(gemmF32Avx2, float, 6, 16, tileF32Avx2, true, AVX2)
UNROLL_DRIVER(gemmF32Plain, float, 4, 8, tileF32Plain, false, PLAIN)
UNROLL_DRIVER(gemmF64Avx512, double, 8, 16, tileF64Avx512, true, AVX512)
UNROLL_DRIVER(gemmF64Avx2, double, 6, 8, tileF64Avx2, true, AVX2)
UNROLL_DRIVER(gemmF64Plain, double, 4, 4, tileF64Plain, false, PLAIN)

// bf16 operands: k-pairs of bfloat16 in 32-bit words (the low half the
// even k), the layout vdpbf16ps multiplies.

constexpr int kBfMR = 8;  // rows of the bf16 register tile
constexpr int kBfNR = 32; // columns: two vectors of 16 f32 accumulators

/// f32 -> bf16, round to nearest even (NaNs stay NaNs), for the ragged edges
/// of the packing (the vector paths convert with vcvtneps2bf16).
inline uint32_t toBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

/// The word of one k-pair: lo's bf16 in the low half, hi's in the high
/// (hi = 0 past the last step: toBf16(0) = 0).
inline uint32_t pairWord(float lo, float hi) { return toBf16(lo) | toBf16(hi) << 16; }

/// Packs X (lane l, step k at X[l·sLane + k·sK]; len lanes, kc steps) as the
/// slivers the bf16 tiles read: S lanes by kps pairs, sliver s at
/// out[s·S·kps], word p·S + l holding steps 2p and 2p+1 of lane l (zeros
/// past len, up to `lanes` (default: len rounded up to S), and past kc, up
/// to kps pairs (default ⌈kc/2⌉)). S = 1 is the AMX kernel's A: each lane
/// (row) its kps words in a row. With `sums`, also sums[l] += Σ_k X[l, k]
/// (the f32 values, as they pass through the registers).
/// The 16 x 16 transpose of 32-bit lanes: r[j][i] ← r[i][j] (unpacks
/// within 128-bit lanes, then 128-bit lanes exchanged in two steps).
UNROLL_AVX512_BF16 inline void transpose16x32(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + c], 128-bit lane L: column 4L + c of rows 4g .. 4g + 3.
  __m512i u[16];
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    __m512i x = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44),
            y = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    __m512i x2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44),
            y2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(x, x2, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(x, x2, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(y, y2, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(y, y2, 0xdd);
  }
}

// Not inlined into gemmAmx (whose target includes AVX512_BF16): GCC 12 then
// warned about its own intrinsics' undefined vectors.
UNROLL_AVX512_BF16 __attribute__((noinline)) void
packPairs(const float *X, int64_t sLane, int64_t sK, int64_t len, int64_t kc, int S, uint32_t *out,
          int64_t kps = 0, int64_t lanes = 0, float *sums = nullptr) {
  const int64_t kp = (kc + 1) / 2;
  bool summed = false; // sums added by the path below (else after it)
  kps = std::max(kps, kp);
  lanes = std::max(lanes, (len + S - 1) / S * S);
  // Lane l's word for pair p is lane(l)[p·S].
  auto lane = [&](int64_t l) { return out + (l / S) * S * kps + l % S; };
  auto word = [&](int64_t l, int64_t p) -> uint32_t & { return lane(l)[p * S]; };
  // Lane l's pairs from p on, one word at a time (steps contiguous: sK = 1).
  auto laneTail = [&](int64_t l, int64_t p) __attribute__((always_inline)) {
    const float *x = X + l * sLane;
    for (; p < kp; ++p)
      word(l, p) = pairWord(x[2 * p], 2 * p + 1 < kc ? x[2 * p + 1] : 0.0f);
  };
  if (sK == 1) {
    // Each lane's steps are contiguous: 32 at a time become 16 words (the
    // pairs below p16), the rest one by one. With S a multiple of 16,
    // blocks of 16 lanes by 16 pairs are transposed so that each pair's 16
    // lanes are stored side by side (the forward's B = Wᵀ); with S = 1
    // (AMX's A) a lane's 16 words are its next 16.
    int64_t l0 = 0;
    const int64_t p16 = kc / 32 * 16;
    if (S % 16 == 0)
      for (; l0 + 16 <= len; l0 += 16) {
        for (int64_t p = 0; p < p16; p += 16) {
          __m512i r[16];
          for (int i = 0; i < 16; ++i) {
            const float *x = X + (l0 + i) * sLane + 2 * p;
            r[i] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
          }
          transpose16x32(r);
          for (int j = 0; j < 16; ++j)
            _mm512_storeu_si512(&word(l0, p + j), r[j]);
        }
        for (int64_t l = l0; l < l0 + 16; ++l)
          laneTail(l, p16);
      }
    for (int64_t l = l0; l < len; ++l) {
      const float *x = X + l * sLane;
      uint32_t *o = lane(l);
      for (int64_t p = 0; p < p16; p += 16) {
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 2 * p + 16),
                                                 _mm512_loadu_ps(x + 2 * p));
        if (S == 1) {
          _mm512_storeu_si512(o + p, v);
          continue;
        }
        alignas(64) uint32_t w[16];
        _mm512_store_si512(w, v);
        for (int i = 0; i < 16; ++i)
          o[(p + i) * S] = w[i];
      }
      laneTail(l, p16);
    }
  } else if (sLane == 1 && S % 8 == 0) {
    // Lanes contiguous: 8 lanes of two steps become 8 words.
    int64_t full = len / 8 * 8;
    for (int64_t p = 0; p < kp; ++p) {
      const float *x0 = X + 2 * p * sK, *x1 = x0 + sK;
      bool odd = 2 * p + 1 >= kc;
      for (int64_t l = 0; l < full; l += 8) {
        __m256i lo = _mm256_cvtepu16_epi32((__m128i)_mm256_cvtneps_pbh(_mm256_loadu_ps(x0 + l)));
        __m256i hi =
            odd ? _mm256_setzero_si256()
                : _mm256_cvtepu16_epi32((__m128i)_mm256_cvtneps_pbh(_mm256_loadu_ps(x1 + l)));
        _mm256_storeu_si256((__m256i *)&word(l, p), _mm256_or_si256(lo, _mm256_slli_epi32(hi, 16)));
      }
      for (int64_t l = full; l < len; ++l)
        word(l, p) = pairWord(x0[l], odd ? 0.0f : x1[l]);
    }
  } else if (sLane == 1 && S == 1 && kps % 16 == 0) {
    summed = true;
    // Lanes contiguous, each lane's words in a row (AMX's A from a
    // column-major A): blocks of 16 pairs (one vector of 16 lanes' words
    // each) transposed into 16 lanes' rows of 16 words. Pairs past kp are
    // zero vectors.
    const int64_t full = len / 16 * 16;
    for (int64_t l = 0; l < full; l += 16)
      for (int64_t p0 = 0; p0 < kps; p0 += 16) {
        __m512i r[16];
        for (int i = 0; i < 16; ++i) {
          const int64_t p = p0 + i;
          if (p >= kp) {
            r[i] = _mm512_setzero_si512();
            continue;
          }
          const float *x0 = X + 2 * p * sK + l;
          const bool odd = 2 * p + 1 >= kc;
          __m512 v0 = _mm512_loadu_ps(x0),
                 v1 = odd ? _mm512_setzero_ps() : _mm512_loadu_ps(x0 + sK);
          if (sums)
            _mm512_storeu_ps(sums + l, _mm512_loadu_ps(sums + l) + (v0 + v1));
          __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v0));
          __m512i hi =
              odd ? _mm512_setzero_si512() : _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v1));
          r[i] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
        }
        transpose16x32(r);
        for (int j = 0; j < 16; ++j)
          _mm512_storeu_si512(out + (l + j) * kps + p0, r[j]);
      }
    for (int64_t p = 0; p < kp; ++p) {
      const float *x0 = X + 2 * p * sK, *x1 = x0 + sK;
      bool odd = 2 * p + 1 >= kc;
      for (int64_t l = full; l < len; ++l) {
        word(l, p) = pairWord(x0[l], odd ? 0.0f : x1[l]);
        if (sums)
          sums[l] += x0[l] + (odd ? 0.0f : x1[l]);
      }
    }
  } else {
    for (int64_t l = 0; l < len; ++l)
      for (int64_t p = 0; p < kp; ++p)
        word(l, p) = pairWord(X[l * sLane + 2 * p * sK],
                              2 * p + 1 < kc ? X[l * sLane + (2 * p + 1) * sK] : 0.0f);
  }
  if (sums && !summed)
    for (int64_t l = 0; l < len; ++l)
      for (int64_t k = 0; k < kc; ++k)
        sums[l] += X[l * sLane + k * sK];
  for (int64_t l = 0; l < len; ++l)
    for (int64_t p = kp; p < kps; ++p)
      word(l, p) = 0;
  for (int64_t l = len; l < lanes; ++l)
    for (int64_t p = 0; p < kps; ++p)
      word(l, p) = 0;
}

/// acc[8][32] = Σ_p a[p][r] · b[p][c] over kp k-pairs (vdpbf16ps), then C
/// (+)= acc on rows x cols of it.
UNROLL_AVX512_BF16 void tileBf16(int64_t kp, const uint32_t *a, const uint32_t *b, float *C,
                                 int64_t sCm, int64_t sCn, int64_t rows, int64_t cols, bool add) {
  __m512 acc[kBfMR][2];
  for (int r = 0; r < kBfMR; ++r)
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * kBfNR);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * kBfNR + 16);
    for (int r = 0; r < kBfMR; ++r) {
      __m512bh av = (__m512bh)_mm512_set1_epi32(int(a[p * kBfMR + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  if (rows == kBfMR && cols == kBfNR && sCn == 1) {
    for (int r = 0; r < kBfMR; ++r) {
      __m512 c0 = acc[r][0], c1 = acc[r][1];
      if (add) {
        c0 = _mm512_add_ps(c0, _mm512_loadu_ps(C + r * sCm));
        c1 = _mm512_add_ps(c1, _mm512_loadu_ps(C + r * sCm + 16));
      }
      _mm512_storeu_ps(C + r * sCm, c0);
      _mm512_storeu_ps(C + r * sCm + 16, c1);
    }
    return;
  }
  alignas(64) float tile[kBfMR][kBfNR];
  for (int r = 0; r < kBfMR; ++r) {
    _mm512_store_ps(tile[r], acc[r][0]);
    _mm512_store_ps(tile[r] + 16, acc[r][1]);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      C[r * sCm + c * sCn] = add ? C[r * sCm + c * sCn] + tile[r][c] : tile[r][c];
}

// AMX (Intel's tile matrix unit, AMX-TILE and AMX-BF16): tdpbf16ps
// multiplies a 16 x 16-pair tile of A by a 16-pair x 16 tile of B into a
// 16 x 16 f32 tile, 8192 multiply-adds per instruction, from the same
// k-pair words as vdpbf16ps. The register tile is 32 x 32 (four f32 tiles,
// two of A and two of B: all eight tile registers); a k-block's pairs are
// padded with zeros to a multiple of 16. Linux hands a process the tile
// registers only when it asks (arch_prctl ARCH_REQ_XCOMP_PERM), and each
// thread loads the tiles' shapes (ldtilecfg) before it uses them.
#define UNROLL_AMX                                                                                 \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16,fma,amx-tile,amx-bf16")))

constexpr int kAmxMR = 32, kAmxNR = 32, kAmxKP = 16; // k-pairs per tile step
// The AMX driver's column block: 1024 columns, twice the f32 drivers'. A
// panel of A is packed (converted, and for a column-major A transposed)
// once per column block, which costs more against AMX's rate than against
// f32 FMAs: with 1024, the model's N <= 1024 products pack A once, and the
// bf16 paper step was 0.87x of 512 (6 paired rounds; the packed B block,
// 256 pairs x 1024 columns, is 1 MB of the Xeon's 2 MB L2).
constexpr int64_t kAmxNC = 1024;

/// Whether the bf16 GEMM runs on AMX: the CPU has AMX-TILE and AMX-BF16,
/// the kernel grants the tile state, and UNROLL_GEMM_AMX is not 0.
bool amxBf16() {
  static const bool ok = [] {
    const char *e = getenv("UNROLL_GEMM_AMX");
    if ((e && !strcmp(e, "0")) || !unroll::cpu::hasBf16())
      return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24)))
      return false; // AMX-BF16 (bit 22), AMX-TILE (bit 24)
#ifdef __linux__
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ok;
}

/// The tile shapes (palette 1): every tile 16 rows of 64 bytes — C's 16 x
/// 16 f32, A's 16 rows x 16 pairs, B's 16 pairs x 16 columns.
UNROLL_AMX void amxConfigure() {
  struct alignas(64) {
    uint8_t palette, startRow, reserved[14];
    uint16_t colBytes[16];
    uint8_t rows[16];
  } cfg{};
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colBytes[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

/// C[32 x 32] (+)= A B over kps pairs (a multiple of 16): a is 32 rows of
/// kps words (packPairs with S = 1), b a 32-column sliver (S = 32). Tiles
/// 0-3 accumulate (rows 0-15 / 16-31 by columns 0-15 / 16-31), 4-5 hold A,
/// 6-7 B. A whole tile of row-major C is loaded and stored in place; edges
/// go through a buffer.
UNROLL_AMX void tileAmx(int64_t kps, const uint32_t *a, const uint32_t *b, float *C, int64_t sCm,
                        int64_t sCn, int64_t rows, int64_t cols, bool add) {
  const bool direct = rows == kAmxMR && cols == kAmxNR && sCn == 1;
  const int64_t ldc = sCm * int64_t(sizeof(float)), lda = kps * 4, ldb = kAmxNR * 4;
  if (direct && add) {
    _tile_loadd(0, C, ldc);
    _tile_loadd(1, C + 16, ldc);
    _tile_loadd(2, C + 16 * sCm, ldc);
    _tile_loadd(3, C + 16 * sCm + 16, ldc);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t p = 0; p < kps; p += kAmxKP) {
    _tile_loadd(4, a + p, lda);
    _tile_loadd(5, a + 16 * kps + p, lda);
    _tile_loadd(6, b + p * kAmxNR, ldb);
    _tile_loadd(7, b + p * kAmxNR + 16, ldb);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (direct) {
    _tile_stored(0, C, ldc);
    _tile_stored(1, C + 16, ldc);
    _tile_stored(2, C + 16 * sCm, ldc);
    _tile_stored(3, C + 16 * sCm + 16, ldc);
    return;
  }
  alignas(64) float tile[kAmxMR][kAmxNR];
  _tile_stored(0, &tile[0][0], kAmxNR * 4);
  _tile_stored(1, &tile[0][16], kAmxNR * 4);
  _tile_stored(2, &tile[16][0], kAmxNR * 4);
  _tile_stored(3, &tile[16][16], kAmxNR * 4);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      C[r * sCm + c * sCn] = add ? C[r * sCm + c * sCn] + tile[r][c] : tile[r][c];
}

/// gemmBf16's loops with the AMX tile: A packed as rows of pairs, both
/// operands' pairs padded to whole tiles.
UNROLL_AMX void gemmAmx(int64_t M, int64_t N, int64_t K, const float *A, int64_t sAm, int64_t sAk,
                        const float *B, int64_t sBk, int64_t sBn, float *C, int64_t sCm,
                        int64_t sCn, bool accumulate, const Epilogue<float> &epi) {
  thread_local Scratch<uint32_t> scratch;
  static_assert(kKC / 2 % kAmxKP == 0 && kMC % kAmxMR == 0, "whole AMX tiles per block");
  const int64_t kpsMax = kKC / 2, ncMax = std::min<int64_t>(kAmxNC, N);
  uint32_t *pb = scratch.bufB(size_t(kpsMax) * ((ncMax + kAmxNR - 1) / kAmxNR) * kAmxNR);
  uint32_t *pa =
      scratch.bufA(size_t(kpsMax) * ((std::min<int64_t>(kMC, M) + kAmxMR - 1) / kAmxMR) * kAmxMR);
  auto kpsOf = [](int64_t kc) { return ((kc + 1) / 2 + kAmxKP - 1) / kAmxKP * kAmxKP; };
  auto weight = packedWeight<uint32_t>(
      B, sBk, sBn, K, N, kLayoutAmx,
      blockOrder(K, N, kAmxNC,
                 [&](int64_t nc, int64_t kc) {
                   return kpsOf(kc) * ((nc + kAmxNR - 1) / kAmxNR * kAmxNR);
                 }),
      [&](int64_t jc, int64_t nc, int64_t pc, int64_t kc, uint32_t *out) {
        packPairs(B + pc * sBk + jc * sBn, sBn, sBk, nc, kc, kAmxNR, out, kpsOf(kc));
      });
  amxConfigure();
  for (int64_t jc = 0; jc < N; jc += kAmxNC) {
    int64_t nc = std::min<int64_t>(kAmxNC, N - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      int64_t kc = std::min<int64_t>(kKC, K - pc);
      int64_t kps = kpsOf(kc);
      const bool last = pc + kc >= K;
      const uint32_t *pbk = weight.block(jc, nc, pc, kc, pb);
      for (int64_t ic = 0; ic < M; ic += kMC) {
        int64_t mc = std::min<int64_t>(kMC, M - ic);
        packPairs(A + ic * sAm + pc * sAk, sAm, sAk, mc, kc, 1, pa, kps,
                  (mc + kAmxMR - 1) / kAmxMR * kAmxMR,
                  jc == 0 && epi.rowSums ? epi.rowSums + ic : nullptr);
        for (int64_t ir = 0; ir < mc; ir += kAmxMR)
          for (int64_t jr = 0; jr < nc; jr += kAmxNR) {
            // No prefetch of the epilogue's D here (the f32 drivers' gain):
            // ahead of an AMX tile it made the bf16 paper step 1.046x slower
            // (8 paired rounds).
            tileAmx(kps, pa + ir * kps, pbk + jr * kps, C + (ic + ir) * sCm + (jc + jr) * sCn, sCm,
                    sCn, std::min<int64_t>(kAmxMR, mc - ir), std::min<int64_t>(kAmxNR, nc - jr),
                    accumulate || pc > 0);
          }
        if (last)
          epi.apply(ic, jc, mc, nc, C, sCm, sCn);
      }
    }
  }
  _tile_release();
}

/// The blocked product with bf16 operands: gemm()'s loops, both operands
/// packed (rounding is a copy anyway), K > 0. On AMX, gemmAmx. (Not
/// inlined: gemm.test finds every driver by its name.)
__attribute__((noinline)) void gemmBf16(int64_t M, int64_t N, int64_t K, const float *A,
                                        int64_t sAm, int64_t sAk, const float *B, int64_t sBk,
                                        int64_t sBn, float *C, int64_t sCm, int64_t sCn,
                                        bool accumulate, const Epilogue<float> &epi) {
  if (amxBf16())
    return gemmAmx(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, accumulate, epi);
  thread_local Scratch<uint32_t> scratch;
  const int64_t kpMax = kKC / 2, ncMax = std::min<int64_t>(kNC, N);
  uint32_t *pb = scratch.bufB(size_t(kpMax) * ((ncMax + kBfNR - 1) / kBfNR) * kBfNR);
  uint32_t *pa =
      scratch.bufA(size_t(kpMax) * ((std::min<int64_t>(kMC, M) + kBfMR - 1) / kBfMR) * kBfMR);
  auto weight =
      packedWeight<uint32_t>(B, sBk, sBn, K, N, kLayoutBf16,
                             blockOrder(K, N, kNC,
                                        [](int64_t nc, int64_t kc) {
                                          return (kc + 1) / 2 * ((nc + kBfNR - 1) / kBfNR * kBfNR);
                                        }),
                             [&](int64_t jc, int64_t nc, int64_t pc, int64_t kc, uint32_t *out) {
                               packPairs(B + pc * sBk + jc * sBn, sBn, sBk, nc, kc, kBfNR, out);
                             });
  for (int64_t jc = 0; jc < N; jc += kNC) {
    int64_t nc = std::min<int64_t>(kNC, N - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      int64_t kc = std::min<int64_t>(kKC, K - pc), kp = (kc + 1) / 2;
      const bool last = pc + kc >= K;
      const uint32_t *pbk = weight.block(jc, nc, pc, kc, pb);
      for (int64_t ic = 0; ic < M; ic += kMC) {
        int64_t mc = std::min<int64_t>(kMC, M - ic);
        packPairs(A + ic * sAm + pc * sAk, sAm, sAk, mc, kc, kBfMR, pa);
        for (int64_t ir = 0; ir < mc; ir += kBfMR)
          for (int64_t jr = 0; jr < nc; jr += kBfNR) {
            if (last)
              epi.prefetchD(ic + ir, jc + jr, std::min<int64_t>(kBfMR, mc - ir),
                            std::min<int64_t>(kBfNR, nc - jr), sCm, sCn);
            tileBf16(kp, pa + ir * kp, pbk + jr * kp, C + (ic + ir) * sCm + (jc + jr) * sCn, sCm,
                     sCn, std::min<int64_t>(kBfMR, mc - ir), std::min<int64_t>(kBfNR, nc - jr),
                     accumulate || pc > 0);
          }
        if (last)
          epi.apply(ic, jc, mc, nc, C, sCm, sCn);
      }
    }
  }
}

/// The f32 GEMM's operand precision: 1 = bf16. Starts from
/// $UNROLL_CPU_PRECISION; bf16 only where the CPU has it.
std::atomic<int> &precisionBf16() {
  static std::atomic<int> bf16{[] {
    const char *e = getenv("UNROLL_CPU_PRECISION");
    if (!e || strcmp(e, "bf16"))
      return 0;
    if (unroll::cpu::hasBf16())
      return 1;
    fprintf(stderr, "unroll: UNROLL_CPU_PRECISION=bf16 ignored: this CPU lacks AVX512_BF16 "
                    "(vdpbf16ps); the GEMMs run in f32\n");
    return 0;
  }()};
  return bf16;
}

using unroll::cpu::Isa;

/// The kernels of one precision, per instruction set.
template <typename T> struct Kernels;
template <> struct Kernels<float> {
  static constexpr auto gemm512 = gemmF32Avx512, gemm2 = gemmF32Avx2, gemmPlain = gemmF32Plain;
  static constexpr auto narrow512 = narrowF32Avx512, narrow2 = narrowF32Avx2;
  static constexpr auto thin512 = thinF32Avx512, thin2 = thinF32Avx2, thinPlain = thinF32Plain;
  static constexpr auto tile512 = tileF32Avx512, tile2 = tileF32Avx2, tilePlain = tileF32Plain;
  static constexpr auto epi512 = epiF32Avx512, epi2 = epiF32Avx2, epiPlain = epiF32Plain;
};
template <> struct Kernels<double> {
  static constexpr auto gemm512 = gemmF64Avx512, gemm2 = gemmF64Avx2, gemmPlain = gemmF64Plain;
  static constexpr auto narrow512 = narrowF64Avx512, narrow2 = narrowF64Avx2;
  static constexpr auto thin512 = thinF64Avx512, thin2 = thinF64Avx2, thinPlain = thinF64Plain;
  static constexpr auto tile512 = tileF64Avx512, tile2 = tileF64Avx2, tilePlain = tileF64Plain;
  static constexpr auto epi512 = epiF64Avx512, epi2 = epiF64Avx2, epiPlain = epiF64Plain;
};

/// Picks the thin, the narrow unpacked or the blocked kernel for this ISA
/// and returns its name (for UNROLL_GEMM_PROFILE). The register tiles are
/// 8 x 2W (AVX-512), 6 x 2W (AVX2), 4 x 2W (baseline), W = vector width in
/// elements.
template <typename T>
const char *dispatch(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,
                     const T *B, int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn, bool acc,
                     int64_t flags = 0, const T *bias = nullptr, T *D = nullptr) {
  using Kn = Kernels<T>;
  constexpr int64_t w512 = 64 / sizeof(T), w2 = 32 / sizeof(T);
  Isa isa = unroll::cpu::detectIsa();
  Epilogue<T> epi{
      flags & (UNROLL_GEMM_BIAS | UNROLL_GEMM_GELU_AUX | UNROLL_GEMM_DGELU | UNROLL_GEMM_ADD_D),
      bias, D,
      isa == Isa::Avx512 ? Kn::epi512
      : isa == Isa::Avx2 ? Kn::epi2
                         : Kn::epiPlain};
  const int64_t w = isa == Isa::Avx512 ? w512 : w2;
  const bool thin = isThin(M, N, K);
  const bool narrow =
      !thin && isa != Isa::Plain && sBn == 1 && sCn == 1 && K > 0 && (N == w || N == 2 * w);
  // Thin products stay in their precision (they are memory-bound).
  const bool bf16 =
      std::is_same_v<T, float> && K > 0 && !thin && precisionBf16().load(std::memory_order_relaxed);
  // A's row sums (ROWSUM_A, into D): while the blocked f32/f64 product packs
  // A (A strided, K > 0), or the AMX one packs a column-major A (a weight
  // gradient's Xᵀ: a pass of its own over it from memory was 3% of the bf16
  // paper step), else in a loop of their own first.
  if (flags & UNROLL_GEMM_ROWSUM_A) {
    const bool packed = sAk != 1 && K > 0 && M > 0 && N > 0 && !narrow && !thin;
    if (packed && (!bf16 || (sAm == 1 && amxBf16())))
      epi.rowSums = D;
    else
      rowSums(M, K, A, sAm, sAk, D);
  }
  if (thin) {
    (isa == Isa::Avx512 ? Kn::thin512
     : isa == Isa::Avx2 ? Kn::thin2
                        : Kn::thinPlain)(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc);
    epi.apply(0, 0, M, N, C, sCm, sCn);
    return "thin";
  }
  if (narrow) {
    (isa == Isa::Avx512 ? Kn::narrow512 : Kn::narrow2)(M, N, K, A, sAm, sAk, B, sBk, C, sCm, acc);
    epi.apply(0, 0, M, N, C, sCm, sCn);
    return "narrow";
  }
  if constexpr (std::is_same_v<T, float>)
    if (bf16) {
      gemmBf16(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc, epi);
      return "blocked bf16";
    }
  (isa == Isa::Avx512 ? Kn::gemm512
   : isa == Isa::Avx2 ? Kn::gemm2
                      : Kn::gemmPlain)(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc, epi);
  return "blocked";
}

/// UNROLL_GEMM_PROFILE=1: every call of the exported entry points below is
/// timed, and when the process exits (or the library is unloaded) a table
/// of the calls grouped by shape, operand layout, epilogue and kernel goes
/// to stderr, the shapes taking the most time first: how much of a step is
/// in the GEMM calls and at what rate each shape runs (the median call,
/// which leaves out the first, cold, calls). A kernel marked "(w)" took B
/// as a weight packed once per call of the compiled function
/// (unroll_cpu_read_only). Off, a call pays one test of a static flag.
class Profile {
public:
  static bool on() {
    static const bool enabled = [] {
      const char *e = getenv("UNROLL_GEMM_PROFILE");
      return e && *e && strcmp(e, "0") != 0;
    }();
    return enabled;
  }
  static Profile &get() {
    static Profile profile;
    return profile;
  }
  void add(int64_t M, int64_t N, int64_t K, int64_t sAm, int64_t sAk, int64_t sBk, int64_t sBn,
           int64_t flags, int bytes, const char *kernel, double seconds) {
    Key key{M, N, K, layout(sAm, sAk), layout(sBk, sBn), flags, bytes, kernel};
    std::lock_guard<std::mutex> lock(mutex_);
    calls_[key].push_back(seconds);
  }
  ~Profile() { print(); }

private:
  struct Key {
    int64_t M, N, K;
    char a, b; // r: rows contiguous, c: columns contiguous, s: neither
    int64_t flags;
    int bytes;
    const char *kernel;
    bool operator<(const Key &o) const {
      return std::tie(M, N, K, a, b, flags, bytes, kernel) <
             std::tie(o.M, o.N, o.K, o.a, o.b, o.flags, o.bytes, o.kernel);
    }
  };
  /// 'r' when the inner index (k of A, n of B) is contiguous, 'c' when the
  /// outer one is, 's' otherwise.
  static char layout(int64_t sOuter, int64_t sInner) {
    return sInner == 1 ? 'r' : sOuter == 1 ? 'c' : 's';
  }
  static std::string flagNames(int64_t flags) {
    static const std::pair<int64_t, const char *> names[] = {{UNROLL_GEMM_BIAS, "bias"},
                                                             {UNROLL_GEMM_GELU_AUX, "gelu"},
                                                             {UNROLL_GEMM_DGELU, "dgelu"},
                                                             {UNROLL_GEMM_ADD_D, "residual"},
                                                             {UNROLL_GEMM_ROWSUM_A, "rowsum"}};
    std::string out;
    for (auto [bit, name] : names)
      if (flags & bit)
        out += (out.empty() ? "" : "+") + std::string(name);
    return out.empty() ? "-" : out;
  }
  void print() {
    if (calls_.empty())
      return;
    struct Row {
      const Key *key;
      size_t calls;
      double total, median;
    };
    std::vector<Row> rows;
    double total = 0;
    size_t calls = 0;
    for (auto &[key, secs] : calls_) {
      std::sort(secs.begin(), secs.end());
      double sum = 0;
      for (double x : secs)
        sum += x;
      rows.push_back({&key, secs.size(), sum, secs[secs.size() / 2]});
      total += sum;
      calls += secs.size();
    }
    // (A comparator class, not a lambda: gemm.test finds no out-of-line lambda.)
    struct MostTimeFirst {
      bool operator()(const Row &x, const Row &y) const { return x.total > y.total; }
    };
    std::sort(rows.begin(), rows.end(), MostTimeFirst());
    fprintf(stderr,
            "unroll GEMM profile (UNROLL_GEMM_PROFILE): %zu calls of %zu kinds, %.4f s in all\n"
            "%7s %7s %7s  A B  %-8s %-17s %-16s %7s %11s %9s %9s\n",
            calls, rows.size(), total, "M", "N", "K", "type", "epilogue", "kernel", "calls",
            "median ms", "total s", "GFLOP/s");
    for (const Row &r : rows) {
      const Key &k = *r.key;
      fprintf(stderr, "%7lld %7lld %7lld  %c %c  %-8s %-17s %-16s %7zu %11.4f %9.4f %9.1f\n",
              (long long)k.M, (long long)k.N, (long long)k.K, k.a, k.b,
              k.bytes == 4 ? "f32" : "f64", flagNames(k.flags).c_str(), k.kernel, r.calls,
              r.median * 1e3, r.total, 2.0 * k.M * k.N * k.K / r.median / 1e9);
    }
    if (uint64_t helped = helpedBlocks.load())
      fprintf(stderr, "%llu blocks of %lld rows run by threads helping (unroll_cpu_help)\n",
              (unsigned long long)helped, (long long)kMC);
  }
  std::mutex mutex_;
  std::map<Key, std::vector<double>> calls_;
};

/// dispatch(), timed into the profile when UNROLL_GEMM_PROFILE is set.
template <typename T>
void run(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk, const T *B,
         int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn, bool acc, int64_t flags = 0,
         const T *bias = nullptr, T *D = nullptr) {
  if (!Profile::on()) {
    dispatch<T>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc, flags, bias, D);
    return;
  }
  Profile &profile = Profile::get(); // constructed before the first call's timing
  weightKept = false;
  auto t0 = std::chrono::steady_clock::now();
  const char *kernel =
      dispatch<T>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc, flags, bias, D);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (weightKept) // B a weight, packed by the call's first product (unroll_cpu_read_only)
    kernel = !strcmp(kernel, "blocked") ? "blocked (w)" : "blocked bf16 (w)";
  profile.add(M, N, K, sAm, sAk, sBk, sBn, flags, int(sizeof(T)), kernel, secs);
}

} // namespace

extern "C" {

void unroll_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t sAm, int64_t sAk,
                     const float *B, int64_t sBk, int64_t sBn, float *C, int64_t sCm, int64_t sCn,
                     int64_t accumulate) {
  run<float>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, accumulate != 0);
}

void unroll_gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t sAm, int64_t sAk,
                     const double *B, int64_t sBk, int64_t sBn, double *C, int64_t sCm, int64_t sCn,
                     int64_t accumulate) {
  run<double>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, accumulate != 0);
}

void unroll_gemm_ex_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t sAm, int64_t sAk,
                        const float *B, int64_t sBk, int64_t sBn, float *C, int64_t sCm,
                        int64_t sCn, int64_t accumulate, int64_t flags, const float *bias,
                        float *D) {
  run<float>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, accumulate != 0, flags, bias, D);
}

void unroll_gemm_ex_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t sAm, int64_t sAk,
                        const double *B, int64_t sBk, int64_t sBn, double *C, int64_t sCm,
                        int64_t sCn, int64_t accumulate, int64_t flags, const double *bias,
                        double *D) {
  run<double>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, accumulate != 0, flags, bias, D);
}

#define UNROLL_EXPORT __attribute__((visibility("default")))

UNROLL_EXPORT void unroll_cpu_read_only(const void *p, size_t bytes) {
  static const bool off = [] {
    const char *e = getenv("UNROLL_GEMM_PACKED_WEIGHTS");
    return e && strcmp(e, "0") == 0;
  }();
  static std::atomic<uint64_t> calls{0};
  readOnly.lo = off ? nullptr : static_cast<const char *>(p);
  readOnly.hi = readOnly.lo ? readOnly.lo + bytes : nullptr;
  readOnly.epoch = calls.fetch_add(1) + 1;
}

UNROLL_EXPORT void unroll_cpu_help(const int32_t *running) {
  helpersWaiting.fetch_add(1);
  while (__atomic_load_n(running, __ATOMIC_ACQUIRE) > 0) {
    RowJob *job = offeredJob.load(std::memory_order_acquire);
    if (job && offeredJob.compare_exchange_strong(job, nullptr, std::memory_order_acq_rel)) {
      helpedBlocks.fetch_add(uint64_t(job->work()), std::memory_order_relaxed);
      job->done.store(true, std::memory_order_release);
    } else {
      _mm_pause();
    }
  }
  helpersWaiting.fetch_sub(1);
}

UNROLL_EXPORT uint64_t unroll_cpu_helped_blocks(void) { return helpedBlocks.load(); }

UNROLL_EXPORT int32_t unroll_cpu_bf16_supported(void) { return unroll::cpu::hasBf16() ? 1 : 0; }

UNROLL_EXPORT int32_t unroll_cpu_set_precision(int32_t bf16) {
  int on = bf16 && unroll::cpu::hasBf16() ? 1 : 0;
  precisionBf16().store(on, std::memory_order_relaxed);
  return on;
}

UNROLL_EXPORT const char *unroll_cpu_bf16_kernel(void) {
  return !unroll::cpu::hasBf16() ? "none" : amxBf16() ? "amx" : "avx512bf16";
}

UNROLL_EXPORT int32_t unroll_cpu_precision(void) {
  return precisionBf16().load(std::memory_order_relaxed);
}

UNROLL_EXPORT int32_t unroll_cpu_bf16_rates(double *f32Gflops, double *bf16Gflops) {
  if (!unroll::cpu::hasBf16())
    return 0;
  // A 512 x 512 x 256 product (the blocked path, 134 MFLOP), each precision
  // timed alternately, best of 5 after a warm-up: about 10 ms in all.
  constexpr int64_t M = 512, N = 512, K = 256;
  std::vector<float> A(M * K, 0.5f), B(K * N, 0.25f), C(M * N);
  const int before = precisionBf16().load(std::memory_order_relaxed);
  double best[2] = {1e30, 1e30};
  for (int r = 0; r < 6; ++r)
    for (int bf16 = 0; bf16 < 2; ++bf16) {
      precisionBf16().store(bf16, std::memory_order_relaxed);
      auto t0 = std::chrono::steady_clock::now();
      unroll_gemm_f32(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), N, 1, 0);
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0)
        best[bf16] = std::min(best[bf16], sec);
    }
  precisionBf16().store(before, std::memory_order_relaxed);
  *f32Gflops = 2.0 * M * N * K / best[0] / 1e9;
  *bf16Gflops = 2.0 * M * N * K / best[1] / 1e9;
  return 1;
}

} // extern "C"
