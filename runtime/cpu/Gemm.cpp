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
// with AVX2; the instruction set is picked once at run time (cpuid), with a
// scalar tile as fallback. Partial tiles at the edges go through a small
// buffer. The hardware prefetcher's short streams (8 rows of 1-2 KB) start
// late, so before each tile the driver asks for that tile's rows of C
// (write intent) and, on AMD's CPUs, for a share of the next tile's rows of
// A (prefetchNextA).
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
// 32 tile of four 16 x 16 f32 tiles accumulates with tdpbf16ps instead
// (gemmAmx): where vdpbf16ps issues on one port, it is slower than f32 FMAs.
// Products of bf16 values are exact in f32, so C differs from the product of
// the rounded operands by f32 accumulation only. The narrow unpacked kernel
// (attention-sized N) and f64 stay in their own precision.
//
// Summation order differs from the plain loop nest (k is blocked by KC), so
// results differ from it by rounding only; the tests compare with f32/f64
// tolerances against independent references.
//
// Files: GemmPack.h (block sizes, scratch, packing, kept packed weights),
// GemmTiles.h (register tiles, narrow and thin kernels, epilogues),
// GemmBf16.h (bf16 operands), and this file (the drivers, the row sharing
// between threads, the dispatch and the C API). Measurements behind the
// block sizes and prefetches are in docs/performance.md.
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
#include "unroll/runtime/CpuKernels.h"

#include "GemmPack.h"  // block sizes, scratch, packing, the kept weights
#include "GemmTiles.h" // register tiles, narrow/thin kernels, epilogues

#include <immintrin.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

/// Whether the driver asks for a share of the next rows of a row-major A
/// before each tile: on AMD's CPUs, not on Intel's, where the unrolled tile
/// runs the paper step 3-4% faster without it. UNROLL_GEMM_PREFETCH_A=0 or
/// 1 overrides.
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
                 int64_t sAm, int64_t sAk, const T *B, int64_t sBk, int64_t sBn, T *C, int64_t sCm,
                 int64_t sCn, bool accumulate, const Epilogue<T> &epi) {
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
  RowsOf<T> x{tile, M,       0, 0,   0,   0,          A,     sAm,
              sAk,  nullptr, C, sCm, sCn, accumulate, false, prefetchNextA(),
              &epi};
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

} // namespace

#include "GemmBf16.h" // bf16 operands: vdpbf16ps tiles, AMX tiles, gemmBf16

namespace {

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
