//===- Attention.cpp - the CPU causal-attention kernel of compiled.so -----===//
//
// Causal multi-head attention of a looped transformer's block, f32 and f64
// (unroll_attention_f32 / _f64, declared in
// runtime/include/unroll/runtime/CpuKernels.h):
// qkv[b, i, c·H·hd + h·hd + e] holds q (c = 0), k (1) and v (2) of token i
// (contiguous in the last index, strides sQb and sQi in elements); out[b, i,
// h·hd + e] = Σ_{j ≤ i} softmax_j(q_i · k_j / √hd) v_j.
//
// The lowering of a model for --lower-to-cpu calls this for its attention
// (lib/Conversion/UnrollToLinalg/Attention.cpp) instead of two batched
// products and four passes over the [B, H, n, n] scores: at the looped
// transformer's sizes (n = 2k ≤ 82 tokens, hd = 16 or 32) those were tiny
// GEMM calls and scalar loops. Here each (b, h) is one pass over blocks of
// R query rows (R = 8 with AVX-512, 6 otherwise): k is
// transposed once into a [hd, np] scratch (8 x 8 register blocks); the
// block's scores are an R x W register tile (each vector of kt loaded feeds
// R multiply-adds), the softmax is per row (maximum, exp and sum in
// vectors, their lanes reduced by halving; the block's R rows side by
// side, so that their chains of dependent steps overlap), and the weighted
// sum of v rows is an R x W tile of features (each vector of v feeds R
// rows), scaled by each row's 1 / Σ as it is stored. A row attends to keys 0..i; the block
// computes keys up to its last row, rounded up to whole vectors, and the
// softmax zeroes the rest.
//
// Its vector-Jacobian product, for the backward of a training step,
// unroll_attention_vjp_f32 / _f64, writes all of dqkv (same layout as qkv)
// from qkv and the output's adjoint dout (layout of out): per block of rows
// it recomputes the probabilities P as the forward does, then dP = dO vᵀ
// (the same tile as the scores, with v transposed), dS = P ∘ (dP − Σ_j P dP)
// and dq = dS k / √hd (the weighted-sum tile), keeping the head's P and dS;
// then per block of R keys dk = dSᵀ q / √hd and dv = Pᵀ dO, the same tile
// reading P and dS by columns, over the rows that see those keys.
//
// Both loops over (b, h) ask for the next head's rows while one head
// computes (NextRows): a head's rows are short pieces of long rows, which
// the hardware prefetcher did not fetch ahead.
//
// f32 uses a Cephes-style exp (VecMath.h: range reduction to [-ln2/2,
// ln2/2], degree-6 polynomial; relative error ~2e-7) on whole vectors; f64
// calls std::exp. The code is
// compiled for AVX-512, AVX2 and the baseline and picked at run time, as
// the GEMM kernel is (Isa.h).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "unroll/runtime/CpuIsa.h"
#include "VecMath.h"
#include "unroll/runtime/CpuKernels.h"

namespace {

#define INLINE inline __attribute__((always_inline))

// Native vectors of each instruction set (GCC vector extensions): the
// kernels are templates over the vector type V, instantiated with 16-lane
// f32 / 8-lane f64 vectors for AVX-512, 8 / 4 for AVX2 and 4 / 2 for the
// baseline, so that every V is one register. (A 64-byte vector on AVX2 is
// two registers that GCC moves through the stack: measured 4 GFLOP/s.)
// Memory is touched with unaligned loads and stores.
using unroll::cpu::VecOf;
typedef VecOf<float, 64>::V f32x16;
typedef VecOf<float, 32>::V f32x8;
typedef VecOf<float, 16>::V f32x4;
typedef VecOf<double, 64>::V f64x8;
typedef VecOf<double, 32>::V f64x4;
typedef VecOf<double, 16>::V f64x2;

template <typename V> using Lanes = unroll::cpu::LanesOf<V>;

template <typename V, typename T> INLINE V load(const T *p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V, typename T> INLINE void store(T *p, V v) { std::memcpy(p, &v, sizeof v); }

using unroll::cpu::expNonPositive; // scores minus their row maximum are <= 0

/// Per-thread buffers, grown to the largest head seen.
template <typename T> struct Scratch {
  std::vector<T> kt, vt, p, dp, rows, rows2;
  void reserve(int64_t n, int64_t np, int64_t hd, int R, bool vjp) {
    auto grow = [](std::vector<T> &v, int64_t size) {
      if ((int64_t)v.size() < size)
        v.assign(size, T(0));
    };
    grow(kt, hd * np);
    grow(rows, R * hd);
    if (!vjp) {
      grow(p, R * np); // a block of rows of P
      return;
    }
    // The VJP keeps a head's whole P and dS in row blocks of R, and R rows
    // more, which a key block's columns past n may read.
    const int64_t rowsPadded = (n + R - 1) / R * R + R;
    grow(vt, hd * np);
    grow(p, rowsPadded * np);
    grow(dp, rowsPadded * np);
    grow(rows2, R * hd);
  }
};

using unroll::cpu::f32x8u;
using unroll::cpu::transpose8;

/// kt[e, j] = k[j, e] for j < n, zero up to np. f32 in vector code (V of
/// 8 or more lanes) goes by 8 x 8 blocks; the edges, f64 and the baseline
/// row by row (kt, a few KB, stays in L1).
template <typename V, typename T>
INLINE void transpose(int64_t n, int64_t np, int64_t hd, const T *k, int64_t ld, T *kt) {
  int64_t j0 = 0;
  if constexpr (std::is_same_v<T, float> && sizeof(V) >= 32) {
    if (hd % 8 == 0)
      for (; j0 + 8 <= n; j0 += 8)
        for (int64_t e0 = 0; e0 < hd; e0 += 8) {
          f32x8u r[8];
          for (int i = 0; i < 8; ++i)
            std::memcpy(&r[i], k + (j0 + i) * ld + e0, sizeof r[i]);
          transpose8(r);
          for (int e = 0; e < 8; ++e)
            std::memcpy(kt + (e0 + e) * np + j0, &r[e], sizeof r[e]);
        }
  }
  for (int64_t j = j0; j < n; ++j) {
    const T *row = k + j * ld;
    for (int64_t e = 0; e < hd; ++e)
      kt[e * np + j] = row[e];
  }
  for (int64_t e = 0; e < hd; ++e)
    for (int64_t j = n; j < np; ++j)
      kt[e * np + j] = 0;
}

// The kernels below work on a block of R query rows at once, so that each
// vector of keys (or values) loaded feeds R multiply-adds: register tiles of
// R rows by 2 vectors, as the GEMM kernel's. Rows are x + r · ldx.

/// Keys the score tiles cover for a block whose last key is cols - 1: cols
/// rounded up to whole vectors (the scores past cols are zero or masked).
template <typename V> INLINE int64_t keyWidth(int64_t cols) {
  constexpr int W = Lanes<V>::W;
  return (cols + W - 1) / W * W;
}

/// s[r, j] = (x_r · kt[., j]) · scale, r < R, for the keys j < keyWidth(cols)
/// (kt is k transposed, [hd, np], zero past n): register tiles of R rows by
/// NV vectors of keys, two vectors while they fit and one for an odd last.
template <typename V, int R, int NV, typename T>
INLINE void scoreTile(int64_t j0, int64_t np, int64_t hd, const T *x, int64_t ldx, const T *kt,
                      T scale, T *s) {
  constexpr int W = Lanes<V>::W;
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      acc[r][v] = V{};
  const T *col = kt + j0;
#pragma GCC unroll 4
  for (int64_t e = 0; e < hd; ++e) {
    V k[NV];
    for (int v = 0; v < NV; ++v)
      k[v] = load<V>(col + e * np + v * W);
    for (int r = 0; r < R; ++r) {
      V xv = x[r * ldx + e] - V{}; // a broadcast load (0 + x would be an add too)
      for (int v = 0; v < NV; ++v)
        acc[r][v] += xv * k[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      store<V>(s + r * np + j0 + v * W, acc[r][v] * scale);
}
template <typename V, int R, typename T>
INLINE void scoreBlock(int64_t cols, int64_t np, int64_t hd, const T *x, int64_t ldx, const T *kt,
                       T scale, T *s) {
  constexpr int W = Lanes<V>::W;
  const int64_t width = keyWidth<V>(cols);
  int64_t j0 = 0;
  for (; j0 + 2 * W <= width; j0 += 2 * W)
    scoreTile<V, R, 2>(j0, np, hd, x, ldx, kt, scale, s);
  if (j0 < width)
    scoreTile<V, R, 1>(j0, np, hd, x, ldx, kt, scale, s);
}

using unroll::cpu::laneMax;
using unroll::cpu::laneSum;

/// The R rows of a block of scores (row r of a block starting at query i0
/// at s + r·np, keys 0..min(i0 + r, cols - 1)) become exp(s − max), zero
/// from there to keyWidth(cols); inv[r] = 1 / each row's sum, by which the
/// caller scales what it computes from the row (the forward its weighted
/// sums, the VJP the row as it reads it). The R rows go side by side, each
/// step for all of them: one row's reductions (maximum, lanes, exp, sum,
/// lanes, division) are a chain of dependent steps, which R independent
/// chains overlap.
template <typename V, int R, typename T>
INLINE void softmaxBlock(int64_t i0, int64_t cols, int64_t np, T *s, T inv[R]) {
  constexpr int W = Lanes<V>::W;
  const int64_t blocks = keyWidth<V>(cols) / W;
  V lane;
  for (int l = 0; l < W; ++l)
    lane[l] = T(l);
  V len[R]; // keys past a row's token are masked out
  for (int r = 0; r < R; ++r)
    len[r] = V{} + T(std::min<int64_t>(i0 + r + 1, cols));
  const V lowest = V{} - std::numeric_limits<T>::max();
  V mv[R];
  for (int r = 0; r < R; ++r)
    mv[r] = lowest;
  for (int64_t jb = 0; jb < blocks; ++jb) {
    const V key = lane + T(jb * W);
    for (int r = 0; r < R; ++r) {
      V x = load<V>(s + r * np + jb * W);
      x = key < len[r] ? x : lowest;
      mv[r] = x > mv[r] ? x : mv[r];
    }
  }
  V m[R], sum[R];
  for (int r = 0; r < R; ++r) {
    m[r] = V{} + laneMax(mv[r]);
    sum[r] = V{};
  }
  for (int64_t jb = 0; jb < blocks; ++jb) {
    const V key = lane + T(jb * W);
    for (int r = 0; r < R; ++r) {
      V x = expNonPositive(load<V>(s + r * np + jb * W) - m[r]);
      x = key < len[r] ? x : V{}; // keys past the row's token weigh nothing
      sum[r] += x;
      store<V>(s + r * np + jb * W, x);
    }
  }
  for (int r = 0; r < R; ++r)
    inv[r] = T(1) / laneSum(sum[r]);
}

/// out[r · ldo + e] = Σ_{begin ≤ j < end} c(r, j) · rows[j · ld + e], r <
/// valid, e < hd: R rows by NV vectors of features in registers, each vector
/// of `rows` feeding R rows. c(r, j) is c[r · np + j] (a block of R rows of
/// scores, zero where a key does not count), or with Trans c[j · np + r] (R
/// columns of a head's whole [n, np] matrix: its transpose's rows). Row r
/// of the result is scaled by rowScale[r] unless that is null.
template <typename V, int R, int NV, bool Trans, typename T>
INLINE void combineTile(int64_t begin, int64_t end, int64_t np, const T *c, const T *rows,
                        int64_t ld, T *out, int64_t ldo, int valid, const T *rowScale) {
  constexpr int W = Lanes<V>::W;
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v)
      acc[r][v] = V{};
#pragma GCC unroll 4
  for (int64_t j = begin; j < end; ++j) {
    V x[NV];
    for (int v = 0; v < NV; ++v)
      x[v] = load<V>(rows + j * ld + v * W);
    for (int r = 0; r < R; ++r) {
      V cv = (Trans ? c[j * np + r] : c[r * np + j]) - V{};
      for (int v = 0; v < NV; ++v)
        acc[r][v] += cv * x[v];
    }
  }
  // Rows are stored by a loop of constant trip count, unrolled, that tests
  // each row: with `valid` as the bound the accumulators were kept on the
  // stack for the loop to index (zeroed there before the loop, and read
  // back).
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    if (r < valid)
      for (int v = 0; v < NV; ++v)
        store<V>(out + r * ldo + v * W, rowScale ? acc[r][v] * rowScale[r] : acc[r][v]);
}
template <typename V, int R, bool Trans = false, typename T>
INLINE void combineBlock(int64_t begin, int64_t end, int64_t np, int64_t hd, const T *c,
                         const T *rows, int64_t ld, T *out, int64_t ldo, int valid,
                         const T *rowScale = nullptr) {
  constexpr int W = Lanes<V>::W;
  int64_t e0 = 0;
  for (; e0 + 2 * W <= hd; e0 += 2 * W)
    combineTile<V, R, 2, Trans>(begin, end, np, c, rows + e0, ld, out + e0, ldo, valid, rowScale);
  for (; e0 + W <= hd; e0 += W)
    combineTile<V, R, 1, Trans>(begin, end, np, c, rows + e0, ld, out + e0, ldo, valid, rowScale);
  for (int64_t e = e0; e < hd; ++e)
    for (int r = 0; r < valid; ++r) {
      T acc = 0;
      for (int64_t j = begin; j < end; ++j)
        acc += (Trans ? c[j * np + r] : c[r * np + j]) * rows[j * ld + e];
      out[r * ldo + e] = rowScale ? acc * rowScale[r] : acc;
    }
}

/// Rows i0 .. i0 + R - 1 of a head at token stride ld from `base`: in place
/// when all exist, else the ones that do copied into `pad` (zero rows
/// after). Sets x, ldx; returns how many are real.
template <int R, typename T>
INLINE int rowsAt(int64_t n, int64_t i0, int64_t hd, const T *base, int64_t ld, T *pad, const T *&x,
                  int64_t &ldx) {
  int valid = int(std::min<int64_t>(R, n - i0));
  if (valid == R) {
    x = base + i0 * ld;
    ldx = ld;
    return valid;
  }
  std::fill(pad, pad + R * hd, T(0));
  for (int r = 0; r < valid; ++r)
    std::memcpy(pad + r * hd, base + (i0 + r) * ld, hd * sizeof(T));
  x = pad;
  ldx = hd;
  return valid;
}

/// The rows of the head after this one (its q, k, v and dO, the rows of
/// its result), asked for while this one computes: a head reads each of its
/// tokens' rows as a short piece (hd values) of a row 3·H·hd values long,
/// which the hardware prefetcher does not anticipate, so a head's first
/// touch of each row (the transposes, the first tiles) waited on memory.
/// Each block of R rows asks for the same R rows of the next head (L2), so
/// the requests spread over the head's work instead of filling the miss
/// queue at once.
template <typename T> struct NextRows {
  static constexpr int kMax = 4;
  const T *read[kMax] = {};
  T *write[kMax] = {};
  int64_t readLd[kMax] = {}, writeLd[kMax] = {};
  int reads = 0, writes = 0;
  int64_t bytes = 0; // of a row's piece: hd values
  void addRead(const T *p, int64_t ld) {
    read[reads] = p;
    readLd[reads++] = ld;
  }
  void addWrite(T *p, int64_t ld) {
    write[writes] = p;
    writeLd[writes++] = ld;
  }
  /// Rows i0 .. i1 - 1 of each.
  INLINE void operator()(int64_t i0, int64_t i1) const {
    for (int64_t i = i0; i < i1; ++i) {
      for (int c = 0; c < reads; ++c)
        for (int64_t off = 0; off < bytes; off += 64)
          __builtin_prefetch(reinterpret_cast<const char *>(read[c] + i * readLd[c]) + off, 0, 2);
      for (int c = 0; c < writes; ++c)
        for (int64_t off = 0; off < bytes; off += 64)
          __builtin_prefetch(reinterpret_cast<const char *>(write[c] + i * writeLd[c]) + off, 1, 2);
    }
  }
};

/// The head after (b, h) in the loops below: (b, h + 1), or (b + 1, 0);
/// false after the last.
INLINE bool nextHead(int64_t B, int64_t H, int64_t b, int64_t h, int64_t &nb, int64_t &nh) {
  nb = h + 1 < H ? b : b + 1;
  nh = h + 1 < H ? h + 1 : 0;
  return nb < B;
}

/// One (b, h): q, k, v point at token 0 of this head (token stride ld).
template <typename V, int R, typename T>
INLINE void head(int64_t n, int64_t np, int64_t hd, const T *q, const T *k, const T *v, int64_t ld,
                 T *o, int64_t ldo, Scratch<T> &s, const NextRows<T> &next) {
  const T scale = T(1) / std::sqrt(T(hd));
  T *kt = s.kt.data(), *p = s.p.data();
  transpose<V>(n, np, hd, k, ld, kt);
  for (int64_t i0 = 0; i0 < n; i0 += R) {
    next(i0, std::min<int64_t>(n, i0 + R));
    const T *x;
    int64_t ldx;
    int valid = rowsAt<R>(n, i0, hd, q, ld, s.rows.data(), x, ldx);
    const int64_t cols = std::min<int64_t>(n, i0 + R); // causal: keys up to the block's last row
    scoreBlock<V, R>(cols, np, hd, x, ldx, kt, scale, p);
    T inv[R]; // the rows' 1 / Σ exp, applied to the weighted sums
    softmaxBlock<V, R>(i0, cols, np, p, inv);
    combineBlock<V, R>(0, cols, np, hd, p, v, ld, o + i0 * ldo, ldo, valid, inv);
  }
}

/// The VJP of one (b, h): q, k, v and dO point at token 0 of this head
/// (token strides ld and ldd); writes dq, dk, dv rows (token stride ldg).
/// First per block of R query rows: P (recomputed as the forward does), dP
/// = dO vᵀ, dS and dq = dS k, keeping the head's whole P and dS ([n, np],
/// in L2); then per block of R keys dk = dSᵀ q and dv = Pᵀ dO as register
/// tiles over the query rows that see those keys (i ≥ the block's first).
template <typename V, int R, typename T>
INLINE void headVJP(int64_t n, int64_t np, int64_t hd, const T *q, const T *k, const T *v,
                    int64_t ld, const T *dO, int64_t ldd, T *dq, T *dk, T *dv, int64_t ldg,
                    Scratch<T> &s, const NextRows<T> &next) {
  constexpr int W = Lanes<V>::W;
  const T scale = T(1) / std::sqrt(T(hd));
  T *kt = s.kt.data(), *vt = s.vt.data();
  transpose<V>(n, np, hd, k, ld, kt);
  transpose<V>(n, np, hd, v, ld, vt);
  for (int64_t i0 = 0; i0 < n; i0 += R) {
    next(i0, std::min<int64_t>(n, i0 + R));
    T *p = s.p.data() + i0 * np, *dp = s.dp.data() + i0 * np;
    const T *x, *g;
    int64_t ldx, ldgr;
    int valid = rowsAt<R>(n, i0, hd, q, ld, s.rows.data(), x, ldx);
    rowsAt<R>(n, i0, hd, dO, ldd, s.rows2.data(), g, ldgr);
    const int64_t cols = std::min<int64_t>(n, i0 + R);
    const int64_t width = keyWidth<V>(cols);
    scoreBlock<V, R>(cols, np, hd, x, ldx, kt, scale, p);
    scoreBlock<V, R>(cols, np, hd, g, ldgr, vt, T(1), dp);
    // P = exp(s - max) / Σ, normalized here as the dot product reads it;
    // dS = P ∘ (dP − Σ_j P dP), scaled by 1/√hd for dq and dk (P is zero
    // where a key does not count). The rows side by side, as in
    // softmaxBlock (rows past n are computed and never read).
    T inv[R];
    softmaxBlock<V, R>(i0, cols, np, p, inv);
    V dot[R];
    for (int r = 0; r < R; ++r)
      dot[r] = V{};
    for (int64_t j = 0; j < width; j += W)
      for (int r = 0; r < R; ++r) {
        V pv = load<V>(p + r * np + j) * inv[r];
        store<V>(p + r * np + j, pv);
        dot[r] += pv * load<V>(dp + r * np + j);
      }
    V rowDot[R];
    for (int r = 0; r < R; ++r)
      rowDot[r] = V{} + laneSum(dot[r]);
    for (int64_t j = 0; j < width; j += W)
      for (int r = 0; r < R; ++r)
        store<V>(dp + r * np + j,
                 load<V>(p + r * np + j) * (load<V>(dp + r * np + j) - rowDot[r]) * scale);
    combineBlock<V, R>(0, cols, np, hd, dp, k, ld, dq + i0 * ldg, ldg, valid); // dq = dS k
  }
  // Keys j0 .. j0 + R - 1 are seen by rows i >= j0. The block of row i holds
  // columns up to at least its own last row, so P and dS are set (or zero)
  // there for every key of this block below n; columns past n feed only
  // rows of the result that are not stored.
  for (int64_t j0 = 0; j0 < n; j0 += R) {
    int valid = int(std::min<int64_t>(R, n - j0));
    combineBlock<V, R, true>(j0, n, np, hd, s.dp.data() + j0, q, ld, dk + j0 * ldg, ldg,
                             valid); // dk = dSᵀ q
    combineBlock<V, R, true>(j0, n, np, hd, s.p.data() + j0, dO, ldd, dv + j0 * ldg, ldg,
                             valid); // dv = Pᵀ dO
  }
}

/// np: n rounded up to whole blocks of 2 W keys.
template <typename V> INLINE int64_t paddedKeys(int64_t n) {
  constexpr int W = Lanes<V>::W;
  return (n + 2 * W - 1) / (2 * W) * (2 * W);
}

template <typename V, int R, typename T>
INLINE void attention(int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb,
                      int64_t sQi, T *out, int64_t sOb, int64_t sOi) {
  thread_local Scratch<T> s;
  const int64_t np = paddedKeys<V>(n);
  s.reserve(n, np, hd, R, false);
  const int64_t D = H * hd;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      NextRows<T> next;
      int64_t nb, nh;
      if (nextHead(B, H, b, h, nb, nh)) {
        next.bytes = hd * int64_t(sizeof(T));
        for (int c = 0; c < 3; ++c)
          next.addRead(qkv + nb * sQb + nh * hd + c * D, sQi);
        next.addWrite(out + nb * sOb + nh * hd, sOi);
      }
      const T *base = qkv + b * sQb + h * hd;
      head<V, R>(n, np, hd, base, base + D, base + 2 * D, sQi, out + b * sOb + h * hd, sOi, s,
                 next);
    }
}

template <typename V, int R, typename T>
INLINE void attentionVJP(int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb,
                         int64_t sQi, const T *dout, int64_t sDb, int64_t sDi, T *dqkv, int64_t sGb,
                         int64_t sGi) {
  thread_local Scratch<T> s;
  const int64_t np = paddedKeys<V>(n);
  s.reserve(n, np, hd, R, true);
  const int64_t D = H * hd;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      NextRows<T> next;
      int64_t nb, nh;
      if (nextHead(B, H, b, h, nb, nh)) {
        next.bytes = hd * int64_t(sizeof(T));
        for (int c = 0; c < 3; ++c) {
          next.addRead(qkv + nb * sQb + nh * hd + c * D, sQi);
          next.addWrite(dqkv + nb * sGb + nh * hd + c * D, sGi);
        }
        next.addRead(dout + nb * sDb + nh * hd, sDi);
      }
      const T *base = qkv + b * sQb + h * hd;
      T *g = dqkv + b * sGb + h * hd;
      headVJP<V, R>(n, np, hd, base, base + D, base + 2 * D, sQi, dout + b * sDb + h * hd, sDi, g,
                    g + D, g + 2 * D, sGi, s, next);
    }
}

// The variants: R rows per block such that the R x 2 tile of accumulators
// and the two key vectors fit the registers (32 zmm, 16 ymm, 16 xmm).

#define ARGS(T)                                                                                    \
  int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb, int64_t sQi, T *out,     \
      int64_t sOb, int64_t sOi
#define PASS B, n, H, hd, qkv, sQb, sQi, out, sOb, sOi

UNROLL_AVX512 void attnF32Avx512(ARGS(float)) { attention<f32x16, 8>(PASS); }
UNROLL_AVX2 void attnF32Avx2(ARGS(float)) { attention<f32x8, 6>(PASS); }
void attnF32Plain(ARGS(float)) { attention<f32x4, 6>(PASS); }
UNROLL_AVX512 void attnF64Avx512(ARGS(double)) { attention<f64x8, 8>(PASS); }
UNROLL_AVX2 void attnF64Avx2(ARGS(double)) { attention<f64x4, 6>(PASS); }
void attnF64Plain(ARGS(double)) { attention<f64x2, 6>(PASS); }

#define VJP_ARGS(T)                                                                                \
  int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb, int64_t sQi,             \
      const T *dout, int64_t sDb, int64_t sDi, T *dqkv, int64_t sGb, int64_t sGi
#define VJP_PASS B, n, H, hd, qkv, sQb, sQi, dout, sDb, sDi, dqkv, sGb, sGi

UNROLL_AVX512 void attnVjpF32Avx512(VJP_ARGS(float)) { attentionVJP<f32x16, 8>(VJP_PASS); }
UNROLL_AVX2 void attnVjpF32Avx2(VJP_ARGS(float)) { attentionVJP<f32x8, 6>(VJP_PASS); }
void attnVjpF32Plain(VJP_ARGS(float)) { attentionVJP<f32x4, 6>(VJP_PASS); }
UNROLL_AVX512 void attnVjpF64Avx512(VJP_ARGS(double)) { attentionVJP<f64x8, 8>(VJP_PASS); }
UNROLL_AVX2 void attnVjpF64Avx2(VJP_ARGS(double)) { attentionVJP<f64x4, 6>(VJP_PASS); }
void attnVjpF64Plain(VJP_ARGS(double)) { attentionVJP<f64x2, 6>(VJP_PASS); }

} // namespace

extern "C" {

void unroll_attention_f32(ARGS(float)) {
  unroll::cpu::dispatchIsa(attnF32Avx512, attnF32Avx2, attnF32Plain, PASS);
}
void unroll_attention_f64(ARGS(double)) {
  unroll::cpu::dispatchIsa(attnF64Avx512, attnF64Avx2, attnF64Plain, PASS);
}
void unroll_attention_vjp_f32(VJP_ARGS(float)) {
  unroll::cpu::dispatchIsa(attnVjpF32Avx512, attnVjpF32Avx2, attnVjpF32Plain, VJP_PASS);
}
void unroll_attention_vjp_f64(VJP_ARGS(double)) {
  unroll::cpu::dispatchIsa(attnVjpF64Avx512, attnVjpF64Avx2, attnVjpF64Plain, VJP_PASS);
}

} // extern "C"
