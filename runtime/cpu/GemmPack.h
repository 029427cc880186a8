//===- GemmPack.h - block sizes, scratch and operand packing ----------------===//
//
// Part of Gemm.cpp's translation unit, which includes it once (everything
// here has internal linkage). The file comment of Gemm.cpp explains the whole.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "VecMath.h"
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace {

// The k-block: C is read and written once per kKC steps of k, so a long
// block saves C traffic on the model's K = 1024 products (512 is 3-6% faster
// than 256 there on Zen 4). A register tile's MR rows of A (16 KB at f32)
// stay in L1 across the slivers of B, which stream from L2 (64 KB each).
constexpr int64_t kKC = 512;
constexpr int64_t kMC = 96; // rows of A per panel (L2)
// The column block: a packed block of B (kKC x kNC) is streamed once per
// MR-row sliver of A, so it must stay in L2 with room to spare: 512 columns
// of f32 are 1 MB, half a Xeon core's L2 (a block of a whole 2 MB L2 ran
// wide products ~20% slower).
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

} // namespace
