//===- GemmBf16.h - bf16 operands: vdpbf16ps and AMX tiles ------------------===//
//
// Part of Gemm.cpp's translation unit, which includes it once (everything
// here has internal linkage). The file comment of Gemm.cpp explains the whole.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "GemmTiles.h"

#include <atomic>
#include <immintrin.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

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
// f32 FMAs: with 1024, the model's N <= 1024 products pack A once (the
// packed B block, 256 pairs x 1024 columns, is 1 MB of a Xeon's 2 MB L2).
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
            // No prefetch of the epilogue's D here: ahead of an AMX tile it
            // costs more than it saves (unlike the f32 drivers).
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

} // namespace
