//===- gemm_bench.cpp - the GEMM kernel: correctness and peak -------------===//
//
//   unroll-gemm-bench --check            random shapes and strides (all
//                                        transposes, edge tiles) against a
//                                        plain triple loop in double
//   unroll-gemm-bench --check-bf16       the same with bf16 operands
//                                        (AVX512_BF16) against the loop on
//                                        the rounded operands
//   unroll-gemm-bench --check-attention  the causal attention kernel
//                                        (runtime/cpu/Attention.cpp) on
//                                        random sizes and strides against a
//                                        plain softmax loop in double
//   unroll-gemm-bench --check-help       --check's cases with a second
//                                        thread helping (unroll_cpu_help): the
//                                        same bits as alone
//   unroll-gemm-bench --check-layer-norm the layer-norm row kernels
//                                        (runtime/cpu/LayerNorm.cpp) on random
//                                        sizes and strides against plain loops
//                                        in double, the VJP also against
//                                        central differences (f64)
//   unroll-gemm-bench --time-attention B n H hd [--repeats R]
//                                        median time of the attention kernel
//                                        and of its VJP (f32), and GFLOP/s
//                                        counting the causal products only
//   unroll-gemm-bench --time-layer-norm B n F [--repeats R]
//                                        median times of the layer norm and
//                                        its VJP without and with an addend
//                                        (f32, B x n rows of F)
//   unroll-gemm-bench --fma-peak [--threads T]
//                                        GFLOP/s of vector FMAs on registers
//                                        alone: the FMA pipes' ceiling
//   unroll-gemm-bench M N K [--ta] [--tb] [--repeats R] [--threads T]
//                    [--epilogue bias|gelu|dgelu|residual|rowsum] [--cold]
//                    [--packed-b]
//                                        GFLOP/s of C += A·B (f32), the
//                                        machine's measured peak for the
//                                        benchmark's share-of-peak column;
//                                        --cold: operands from memory;
//                                        --packed-b: B packed once
//                                        (unroll_cpu_read_only)
//
//===----------------------------------------------------------------------===//
#include "Peak.h"
#include "unroll/runtime/CpuKernels.h"
// The instruction set the kernels pick (detectIsa), for --fma-peak.
#include "unroll/runtime/CpuIsa.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

/// unroll_gemm_* (ex false) or unroll_gemm_ex_* with `flags`.
template <typename T>
void call(bool ex, int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,
          const T *B, int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn, int64_t acc,
          int64_t flags, const T *bias, T *D) {
  if constexpr (sizeof(T) == 4) {
    if (ex)
      unroll_gemm_ex_f32(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc, flags, bias, D);
    else
      unroll_gemm_f32(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc);
  } else {
    if (ex)
      unroll_gemm_ex_f64(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc, flags, bias, D);
    else
      unroll_gemm_f64(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc);
  }
}

/// The model's GELU and its derivative in double (std::tanh).
double geluRef(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
double geluGradRef(double x) {
  const double c = 0.7978845608028654, a = 0.044715;
  double t = std::tanh(c * (x + a * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x);
}

/// x rounded to bfloat16's 8 significant bits, ties to even (normal x; in
/// double, independently of the kernel's bit arithmetic and vcvtneps2bf16).
double roundBf16(double x) {
  int e;
  double m = std::frexp(x, &e); // |m| in [0.5, 1)
  return std::ldexp(std::nearbyint(m * 256) / 256, e);
}

/// One random case; returns max |got - want| / max |want|. With bf16 (the
/// kernel set to bf16 operands), want is the product of the operands
/// rounded to bf16, except where the narrow f32 kernel computes it (N = 16
/// or 32, unit column strides) or a thin one (M, N or K = 1); *vsF32 gets the error against the
/// exact f32 product (how far bf16 is from f32). *digest gets a hash of
/// the outputs' bits (C and D).
template <typename T>
double checkOne(std::mt19937_64 &rng, bool bf16 = false, double *vsF32 = nullptr,
                uint64_t *digest = nullptr) {
  // Half the cases small enough for the unpacked path, half blocked.
  std::uniform_int_distribution<int64_t> dim(1, rng() % 2 ? 40 : 300);
  // A quarter of the cases with K up to 1200: several of the kernel's k-blocks (512).
  int64_t M = dim(rng), N = dim(rng), K = rng() % 4 == 0 ? dim(rng) * 4 : dim(rng);
  if (rng() % 10 == 0)
    K = 0;
  // An eighth with N past 512: several of the kernel's column blocks (512;
  // 1024 on AMX) (the epilogue's bias offset, the row sums counted in the
  // first block only).
  if (rng() % 8 == 0)
    N = 513 + int64_t(rng() % 1100);
  if (rng() % 4 == 0)
    N = (rng() % 4 + 1) * 4; // 4..16: the unpacked narrow kernel's widths
  if (rng() % 5 == 0) {      // the thin kernels: M, N or K = 1, the others up to 300
    int64_t *one[] = {&M, &N, &K};
    *one[rng() % 3] = 1;
  }
  bool acc = rng() & 1; // C += A B, or C = A B
  bool ta = rng() & 1, tb = rng() & 1, tc = rng() & 1;
  int64_t padA = rng() % 3, padB = rng() % 3, padC = rng() % 3;
  // Row-major [M, K] (or its transpose) with padded leading dimensions.
  int64_t ldA = (ta ? M : K) + padA, ldB = (tb ? K : N) + padB, ldC = (tc ? M : N) + padC;
  std::vector<T> A((ta ? K : M) * ldA), B((tb ? N : K) * ldB), C((tc ? N : M) * ldC);
  std::normal_distribution<double> nd(0, 1);
  for (T &v : A)
    v = nd(rng);
  for (T &v : B)
    v = nd(rng);
  for (T &v : C)
    v = nd(rng);
  int64_t sAm = ta ? 1 : ldA, sAk = ta ? ldA : 1, sBk = tb ? 1 : ldB, sBn = tb ? ldB : 1,
          sCm = tc ? 1 : ldC, sCn = tc ? ldC : 1;
  // Half the cases through unroll_gemm_ex with an epilogue (as the compiler
  // calls it: overwriting C), D at C's strides.
  bool ex = rng() & 1;
  const int64_t kFlags[] = {0,
                            UNROLL_GEMM_BIAS,
                            UNROLL_GEMM_BIAS | UNROLL_GEMM_GELU_AUX,
                            UNROLL_GEMM_GELU_AUX,
                            UNROLL_GEMM_DGELU,
                            UNROLL_GEMM_ADD_D,
                            UNROLL_GEMM_BIAS | UNROLL_GEMM_ADD_D,
                            UNROLL_GEMM_ROWSUM_A};
  int64_t flags = ex ? kFlags[rng() % 8] : 0;
  if (flags & ~UNROLL_GEMM_ROWSUM_A)
    acc = false; // (the row sums go with C += A·B, as for a weight gradient)
  // Half the GELUs in place (D = C: C ends as GELU(C), the compiler's call
  // where the pre-activation is dead).
  bool inPlace = (flags & UNROLL_GEMM_GELU_AUX) && (rng() & 1);
  std::vector<T> bias(N), D(C.size());
  for (T &v : bias)
    v = nd(rng);
  for (T &v : D)
    v = nd(rng);
  // ROWSUM_A: D[m] += Σ_k A[m, k] (D a vector of M, its first M values).
  std::vector<double> wantSums(M);
  for (int64_t i = 0; i < M; ++i) {
    double s = D[i];
    for (int64_t k = 0; k < K; ++k)
      s += A[i * sAm + k * sAk];
    wantSums[i] = s;
  }
  bool narrow = sBn == 1 && sCn == 1 && (N == 16 || N == 32);
  bool thin = M == 1 || N == 1 || K == 1; // thin products stay f32
  bool rounded = bf16 && !narrow && !thin && K > 0;
  std::vector<double> want(M * N), wantD(M * N), exact(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = acc ? C[i * sCm + j * sCn] : 0.0, x = s;
      for (int64_t k = 0; k < K; ++k) {
        double a = A[i * sAm + k * sAk], b = B[k * sBk + j * sBn];
        s += rounded ? roundBf16(a) * roundBf16(b) : a * b;
        x += a * b;
      }
      if (flags & UNROLL_GEMM_BIAS)
        s += bias[j], x += bias[j];
      if (flags & UNROLL_GEMM_ADD_D)
        s += D[i * sCm + j * sCn], x += D[i * sCm + j * sCn];
      if (flags & UNROLL_GEMM_DGELU)
        s *= geluGradRef(D[i * sCm + j * sCn]), x *= geluGradRef(D[i * sCm + j * sCn]);
      want[i * N + j] = s;
      wantD[i * N + j] = geluRef(s);
      exact[i * N + j] = x;
    }
  auto product = [&](std::vector<T> &c, std::vector<T> &d) {
    call<T>(ex, M, N, K, A.data(), sAm, sAk, B.data(), sBk, sBn, c.data(), sCm, sCn, acc, flags,
            flags & UNROLL_GEMM_BIAS ? bias.data() : nullptr,
            inPlace ? c.data()
            : flags & (UNROLL_GEMM_GELU_AUX | UNROLL_GEMM_DGELU | UNROLL_GEMM_ADD_D |
                       UNROLL_GEMM_ROWSUM_A)
                ? d.data()
                : nullptr);
  };
  // A third of the cases with B a weight (unroll_cpu_read_only): first
  // another B is marked and multiplied (its packing cached), then B itself
  // is marked and multiplied twice, the second product from the cached
  // packing. A cache that outlived its mark, or a wrong block of the cached
  // packing, gives the wrong C.
  const bool weight = rng() % 3 == 0;
  if (weight) {
    std::vector<T> real = B, c = C, d = D;
    for (T &v : B)
      v = nd(rng);
    unroll_cpu_read_only(B.data(), B.size() * sizeof(T));
    product(c, d);
    B = real;
    unroll_cpu_read_only(B.data(), B.size() * sizeof(T));
    c = C, d = D;
    product(c, d);
  }
  product(C, D);
  if (weight)
    unroll_cpu_read_only(nullptr, 0);
  if (digest) { // FNV-1a over the bytes of C and D
    uint64_t h = 1469598103934665603ull;
    for (const std::vector<T> *v : {&C, &D})
      for (size_t i = 0; i < v->size() * sizeof(T); ++i)
        h = (h ^ reinterpret_cast<const unsigned char *>(v->data())[i]) * 1099511628211ull;
    *digest = h;
  }
  double err = 0, scale = 0, errF32 = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      scale = std::max(scale, std::abs(want[i * N + j]));
      if (inPlace) {
        err = std::max(err, std::abs(C[i * sCm + j * sCn] - wantD[i * N + j]));
        continue;
      }
      err = std::max(err, std::abs(C[i * sCm + j * sCn] - want[i * N + j]));
      errF32 = std::max(errF32, std::abs(C[i * sCm + j * sCn] - exact[i * N + j]));
      if (flags & UNROLL_GEMM_GELU_AUX)
        err = std::max(err, std::abs(D[i * sCm + j * sCn] - wantD[i * N + j]));
    }
  if (flags & UNROLL_GEMM_ROWSUM_A)
    for (int64_t i = 0; i < M; ++i) {
      err = std::max(err, std::abs(D[i] - wantSums[i]));
      scale = std::max(scale, std::abs(wantSums[i]));
    }
  if (vsF32)
    *vsF32 = errF32 / std::max(scale, 1e-30);
  return err / std::max(scale, 1e-30);
}

/// bf16 operands: the kernel against the product of the rounded operands in
/// double (f32 accumulation is all that may differ), and a check that bf16
/// is in effect at all (the error against the exact product is bf16's).
int checkBf16() {
  if (!unroll_cpu_set_precision(1)) {
    printf("GEMM bf16: unavailable (no AVX512_BF16, or UNROLL_GEMM_ISA forces a narrower "
           "instruction set); nothing to check\nSKIP\n");
    return 0;
  }
  std::mt19937_64 rng(7);
  double e = 0, vsF32 = 0;
  for (int c = 0; c < 240; ++c) {
    double f = 0;
    e = std::max(e, checkOne<float>(rng, true, &f));
    vsF32 = std::max(vsF32, f);
  }
  // The rates probe (unroll-run's note when bf16 is the slower choice)
  // leaves the precision as it found it, bf16 and f32.
  double r32 = 0, r16 = 0, s32 = 0, s16 = 0;
  bool probe = unroll_cpu_bf16_rates(&r32, &r16) && unroll_cpu_precision() == 1;
  unroll_cpu_set_precision(0);
  probe = probe && unroll_cpu_bf16_rates(&s32, &s16) && unroll_cpu_precision() == 0 && r32 > 0 &&
          r16 > 0 && s32 > 0 && s16 > 0;
  printf("rates probe (512 x 512 x 256): f32 %.0f, bf16 %.0f GFLOP/s; precision %s\n", s32, s16,
         probe ? "kept" : "NOT KEPT, or the probe failed");
  bool ok = e <= 1e-5 && vsF32 >= 1e-4 && probe;
  printf("GEMM bf16 operands (kernel %s) vs plain loops on the bf16-rounded operands, 240 "
         "random shapes/strides: max rel. error %.2e (tolerance 1e-05); vs the exact f32 product "
         "%.2e (bf16's rounding: at least 1e-04)\n%s\n",
         unroll_cpu_bf16_kernel(), e, vsF32, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

/// The f32 GELU and GELU' epilogues value by value, through 1 x N x 1
/// products (C = 1 · x): x on a grid over [-40, 40] (step 1/512) and
/// extremes, against geluRef / geluGradRef. Returns the largest error
/// relative to each value's own bound: |GELU error| ≤ 1e-6 |x| (σ to ~2
/// ulp, scaled by x), |GELU' error| ≤ 2e-6; non-finite results count as
/// failures.
double checkGeluValues() {
  std::vector<float> x;
  for (int i = -40 * 512; i <= 40 * 512; ++i)
    x.push_back(i / 512.0f);
  for (float v : {87.0f, 88.0f, 89.0f, 1e4f, 1e10f, 3e38f, 1e-30f, 1e-38f})
    x.push_back(v), x.push_back(-v);
  const int64_t N = int64_t(x.size());
  std::vector<float> one(1, 1.0f), c(N), d(N);
  unroll_gemm_ex_f32(1, N, 1, one.data(), 1, 1, x.data(), N, 1, c.data(), N, 1, 0,
                     UNROLL_GEMM_GELU_AUX, nullptr, d.data());
  double worst = 0;
  for (int64_t j = 0; j < N; ++j) {
    double e = std::abs(d[j] - geluRef(x[j])) / (1e-6 * std::abs(double(x[j])) + 1e-37);
    worst = std::max(worst, std::isfinite(d[j]) ? e : 1e30);
  }
  // GELU' (x² overflows past ~1e19: the formula's x·s(1 − s)(1 + 3a x²) is
  // 0 · ∞ there, as the reference's).
  std::vector<float> xs;
  for (float v : x)
    if (std::abs(v) < 1e19f)
      xs.push_back(v);
  const int64_t Ns = int64_t(xs.size());
  std::vector<float> ones(Ns, 1.0f), g(Ns);
  unroll_gemm_ex_f32(1, Ns, 1, one.data(), 1, 1, ones.data(), Ns, 1, g.data(), Ns, 1, 0,
                     UNROLL_GEMM_DGELU, nullptr, xs.data());
  for (int64_t j = 0; j < Ns; ++j) {
    double e = std::abs(g[j] - geluGradRef(xs[j])) / 2e-6;
    worst = std::max(worst, std::isfinite(g[j]) ? e : 1e30);
  }
  return worst;
}

int check() {
  std::mt19937_64 rng(42);
  double e32 = 0, e64 = 0;
  for (int c = 0; c < 240; ++c) {
    e32 = std::max(e32, checkOne<float>(rng));
    e64 = std::max(e64, checkOne<double>(rng));
  }
  double gelu = checkGeluValues();
  bool ok = e32 <= 1e-5 && e64 <= 1e-13 && gelu <= 1;
  const char *isa = getenv("UNROLL_GEMM_ISA");
  printf("GEMM (%s) vs plain loops, 240 random shapes/strides each (half with a bias, GELU, "
         "GELU-gradient, residual or row-sum epilogue): max rel. error f32 %.2e "
         "(tolerance 1e-05), f64 %.2e (tolerance 1e-13)\n"
         "f32 GELU and GELU' on [-40, 40] and extremes vs tanh in double: worst error %.2f of "
         "its bound (1e-6 |x|; 2e-6)\n%s\n",
         isa ? isa : "detected ISA", e32, e64, gelu, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

/// The blocked products with a second thread lending itself to them
/// (unroll_cpu_help, as unroll-run's threads do when their chunks are done):
/// --check's random f32 and f64 cases, run alone and then with the helper,
/// must give the same bits, and the helper must have run some of the rows.
int checkHelp() {
  const int cases = 240;
  std::vector<uint64_t> alone(2 * cases), helped(2 * cases);
  std::mt19937_64 rng(42);
  for (int c = 0; c < cases; ++c) {
    checkOne<float>(rng, false, nullptr, &alone[2 * c]);
    checkOne<double>(rng, false, nullptr, &alone[2 * c + 1]);
  }
  int32_t running = 1;
  std::thread helper([&] { unroll_cpu_help(&running); });
  const uint64_t before = unroll_cpu_helped_blocks();
  rng.seed(42);
  double e32 = 0, e64 = 0;
  for (int c = 0; c < cases; ++c) {
    e32 = std::max(e32, checkOne<float>(rng, false, nullptr, &helped[2 * c]));
    e64 = std::max(e64, checkOne<double>(rng, false, nullptr, &helped[2 * c + 1]));
  }
  __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
  helper.join();
  const uint64_t blocks = unroll_cpu_helped_blocks() - before;
  int differ = 0;
  for (int c = 0; c < 2 * cases; ++c)
    differ += helped[c] != alone[c];
  const bool ok = differ == 0 && e32 <= 1e-5 && e64 <= 1e-13 && blocks > 0;
  printf("GEMM with a helping thread (unroll_cpu_help), %d random cases each in f32 and f64: %d "
         "differ in a bit from the products alone; max rel. error vs plain loops f32 %.2e "
         "(tolerance 1e-05), f64 %.2e (tolerance 1e-13); %llu row blocks run by the helper\n%s\n",
         cases, differ, e32, e64, (unsigned long long)blocks, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

/// The attention kernel on one random case against softmax in double;
/// returns max |error| / max |reference|.
template <typename T> double checkAttentionOne(std::mt19937_64 &rng) {
  std::uniform_int_distribution<int> pick(0, 1 << 30);
  const int hds[] = {4, 8, 16, 24, 32, 64};
  int64_t B = 1 + pick(rng) % 3, n = 1 + pick(rng) % 90, H = 1 + pick(rng) % 4,
          hd = hds[pick(rng) % 6], D = H * hd;
  int64_t sQi = 3 * D + pick(rng) % 3, sQb = n * sQi + pick(rng) % 5; // padded rows
  int64_t sOi = D + pick(rng) % 3, sOb = n * sOi;
  std::normal_distribution<double> g(0, 2);
  std::vector<T> qkv(B * sQb), out(B * sOb, T(0));
  for (T &x : qkv)
    x = T(g(rng));
  if constexpr (sizeof(T) == 4)
    unroll_attention_f32(B, n, H, hd, qkv.data(), sQb, sQi, out.data(), sOb, sOi);
  else
    unroll_attention_f64(B, n, H, hd, qkv.data(), sQb, sQi, out.data(), sOb, sOi);
  double err = 0, scale = 0;
  std::vector<double> p(n);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) {
        auto at = [&](int64_t tok, int64_t c, int64_t e) {
          return double(qkv[b * sQb + tok * sQi + c * D + h * hd + e]);
        };
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t e = 0; e < hd; ++e)
            s += at(i, 0, e) * at(j, 1, e);
          p[j] = s / std::sqrt(double(hd));
          m = std::max(m, p[j]);
        }
        for (int64_t j = 0; j <= i; ++j)
          z += (p[j] = std::exp(p[j] - m));
        for (int64_t e = 0; e < hd; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j)
            o += p[j] / z * at(j, 2, e);
          err = std::max(err, std::abs(o - double(out[b * sOb + i * sOi + h * hd + e])));
          scale = std::max(scale, std::abs(o));
        }
      }
  return err / std::max(scale, 1e-30);
}

/// A random attention case: sizes, padded strides, inputs.
template <typename T> struct AttnCase {
  int64_t B, n, H, hd, D, sQb, sQi, sOb, sOi;
  std::vector<T> qkv, dout;
  explicit AttnCase(std::mt19937_64 &rng) {
    std::uniform_int_distribution<int> pick(0, 1 << 30);
    const int hds[] = {4, 8, 16, 24, 32, 64};
    B = 1 + pick(rng) % 3, n = 1 + pick(rng) % 90, H = 1 + pick(rng) % 4, hd = hds[pick(rng) % 6];
    D = H * hd;
    sQi = 3 * D + pick(rng) % 3, sQb = n * sQi + pick(rng) % 5; // padded rows
    sOi = D + pick(rng) % 3, sOb = n * sOi;
    std::normal_distribution<double> g(0, 2);
    qkv.resize(B * sQb), dout.resize(B * sOb);
    for (T &x : qkv)
      x = T(g(rng));
    for (T &x : dout)
      x = T(g(rng));
  }
  void forward(const std::vector<T> &in, std::vector<T> &out) const {
    out.assign(B * sOb, T(0));
    if constexpr (sizeof(T) == 4)
      unroll_attention_f32(B, n, H, hd, in.data(), sQb, sQi, out.data(), sOb, sOi);
    else
      unroll_attention_f64(B, n, H, hd, in.data(), sQb, sQi, out.data(), sOb, sOi);
  }
  void vjp(std::vector<T> &grad) const {
    grad.assign(B * sQb, T(0));
    if constexpr (sizeof(T) == 4)
      unroll_attention_vjp_f32(B, n, H, hd, qkv.data(), sQb, sQi, dout.data(), sOb, sOi,
                               grad.data(), sQb, sQi);
    else
      unroll_attention_vjp_f64(B, n, H, hd, qkv.data(), sQb, sQi, dout.data(), sOb, sOi,
                               grad.data(), sQb, sQi);
  }
};

/// The VJP kernel against the chain rule written out in plain double loops
/// (P, dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − rowsum(P ∘ dP)), dQ = dS K/√hd,
/// dK = dSᵀ Q/√hd); returns max |error| / max |reference|.
template <typename T> double checkVJPOne(std::mt19937_64 &rng) {
  AttnCase<T> c(rng);
  std::vector<T> grad;
  c.vjp(grad);
  double err = 0, scale = 0, s = 1 / std::sqrt(double(c.hd));
  std::vector<double> P(c.n * c.n), dS(c.n * c.n);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h) {
      auto at = [&](int64_t tok, int64_t slot, int64_t e) {
        return double(c.qkv[b * c.sQb + tok * c.sQi + slot * c.D + h * c.hd + e]);
      };
      auto dO = [&](int64_t tok, int64_t e) {
        return double(c.dout[b * c.sOb + tok * c.sOi + h * c.hd + e]);
      };
      for (int64_t i = 0; i < c.n; ++i) {
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double v = 0;
          for (int64_t e = 0; e < c.hd; ++e)
            v += at(i, 0, e) * at(j, 1, e);
          P[i * c.n + j] = v * s;
          m = std::max(m, v * s);
        }
        for (int64_t j = 0; j <= i; ++j)
          z += (P[i * c.n + j] = std::exp(P[i * c.n + j] - m));
        double rowDot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          P[i * c.n + j] /= z;
          double dp = 0;
          for (int64_t e = 0; e < c.hd; ++e)
            dp += dO(i, e) * at(j, 2, e);
          dS[i * c.n + j] = dp;
          rowDot += P[i * c.n + j] * dp;
        }
        for (int64_t j = 0; j <= i; ++j)
          dS[i * c.n + j] = P[i * c.n + j] * (dS[i * c.n + j] - rowDot);
      }
      for (int64_t t = 0; t < c.n; ++t)
        for (int64_t e = 0; e < c.hd; ++e) {
          double dq = 0, dk = 0, dv = 0;
          for (int64_t j = 0; j <= t; ++j)
            dq += dS[t * c.n + j] * at(j, 1, e) * s;
          for (int64_t i = t; i < c.n; ++i) {
            dk += dS[i * c.n + t] * at(i, 0, e) * s;
            dv += P[i * c.n + t] * dO(i, e);
          }
          const T *g = grad.data() + b * c.sQb + t * c.sQi + h * c.hd + e;
          double ref[3] = {dq, dk, dv};
          for (int slot = 0; slot < 3; ++slot) {
            err = std::max(err, std::abs(ref[slot] - double(g[slot * c.D])));
            scale = std::max(scale, std::abs(ref[slot]));
          }
        }
    }
  return err / std::max(scale, 1e-30);
}

/// f64: <vjp, δ> against central differences of <attention(qkv), dO>
/// along a random direction δ (independent of the chain rule above).
double checkVJPDirection(std::mt19937_64 &rng) {
  AttnCase<double> c(rng);
  std::vector<double> grad, out, shifted(c.qkv.size()), delta(c.qkv.size());
  std::normal_distribution<double> g(0, 1);
  for (double &x : delta)
    x = g(rng);
  c.vjp(grad);
  double analytic = 0;
  for (size_t k = 0; k < grad.size(); ++k)
    analytic += grad[k] * delta[k];
  auto objective = [&](double eps) {
    for (size_t k = 0; k < shifted.size(); ++k)
      shifted[k] = c.qkv[k] + eps * delta[k];
    c.forward(shifted, out);
    double v = 0;
    for (size_t k = 0; k < out.size(); ++k)
      v += out[k] * c.dout[k];
    return v;
  };
  double h = 1e-5, fd = (objective(h) - objective(-h)) / (2 * h);
  return std::abs(fd - analytic) / std::max(std::abs(analytic), 1.0);
}

int checkAttention() {
  std::mt19937_64 rng(7);
  double e32 = 0, e64 = 0, v32 = 0, v64 = 0, dir = 0;
  for (int c = 0; c < 60; ++c) {
    e32 = std::max(e32, checkAttentionOne<float>(rng));
    e64 = std::max(e64, checkAttentionOne<double>(rng));
    v32 = std::max(v32, checkVJPOne<float>(rng));
    v64 = std::max(v64, checkVJPOne<double>(rng));
    dir = std::max(dir, checkVJPDirection(rng));
  }
  bool ok = e32 <= 1e-5 && e64 <= 1e-13 && v32 <= 1e-5 && v64 <= 1e-12 && dir <= 1e-6;
  const char *isa = getenv("UNROLL_GEMM_ISA");
  printf("attention (%s) vs plain softmax loops, 60 random sizes/strides each: max rel. error "
         "f32 %.2e (tolerance 1e-05), f64 %.2e (tolerance 1e-13)\n"
         "its VJP vs the chain rule in plain loops: f32 %.2e (tolerance 1e-05), f64 %.2e "
         "(tolerance 1e-12); vs central differences along random directions (f64): %.2e "
         "(tolerance 1e-06)\n%s\n",
         isa ? isa : "detected ISA", e32, e64, v32, v64, dir, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

/// A random layer-norm case: x [B, n, F] and dy with padded batch and token
/// strides, gain and bias; in half the cases an addend for dx (the VJP's
/// `add`, with token strides of its own).
template <typename T> struct NormCase {
  int64_t B, n, F, sXb, sXi, sDb, sDi, sAb, sAi;
  double eps;
  bool withAdd;
  std::vector<T> x, dy, g, bias, add;
  explicit NormCase(std::mt19937_64 &rng) {
    std::uniform_int_distribution<int64_t> pick(0, 1 << 20);
    const int64_t fs[] = {1, 3, 8, 16, 17, 64, 100, 256};
    B = 1 + pick(rng) % 3, n = 1 + pick(rng) % 40, F = fs[pick(rng) % 8];
    sXi = F + pick(rng) % 3, sXb = n * sXi + pick(rng) % 5;
    sDi = F + pick(rng) % 2, sDb = n * sDi;
    eps = pick(rng) % 2 ? 1e-5 : 1e-3;
    withAdd = pick(rng) % 2;
    sAi = F + pick(rng) % 4, sAb = n * sAi + pick(rng) % 3;
    std::normal_distribution<double> gd(0.5, 2);
    x.resize(B * sXb), dy.resize(B * sDb), g.resize(F), bias.resize(F), add.resize(B * sAb);
    for (auto *v : {&x, &dy, &g, &bias, &add})
      for (T &e : *v)
        e = T(gd(rng));
  }
  int64_t bits() const {
    int64_t b;
    std::memcpy(&b, &eps, sizeof b);
    return b;
  }
  void forward(const std::vector<T> &in, std::vector<T> &y) const {
    y.assign(B * n * F, T(0));
    if constexpr (sizeof(T) == 4)
      unroll_layer_norm_f32(B, n, F, in.data(), sXb, sXi, g.data(), bias.data(), y.data(), n * F, F,
                            bits());
    else
      unroll_layer_norm_f64(B, n, F, in.data(), sXb, sXi, g.data(), bias.data(), y.data(), n * F, F,
                            bits());
  }
  void vjp(std::vector<T> &dx, std::vector<T> &dg, std::vector<T> &db) const {
    dx.assign(B * n * F, T(0)), dg.assign(F, T(7)), db.assign(F, T(7)); // overwritten
    const T *a = withAdd ? add.data() : nullptr;
    if constexpr (sizeof(T) == 4)
      unroll_layer_norm_vjp_f32(B, n, F, x.data(), sXb, sXi, g.data(), dy.data(), sDb, sDi, a, sAb,
                                sAi, dx.data(), n * F, F, dg.data(), db.data(), bits());
    else
      unroll_layer_norm_vjp_f64(B, n, F, x.data(), sXb, sXi, g.data(), dy.data(), sDb, sDi, a, sAb,
                                sAi, dx.data(), n * F, F, dg.data(), db.data(), bits());
  }
};

/// Forward and VJP against plain double loops written from the formulas
/// (two-pass moments; dx = rstd (ĝ − mean ĝ − x̂ mean(ĝ x̂)), dg = Σ dy x̂,
/// db = Σ dy); max |error| / max |reference| of each.
template <typename T> std::pair<double, double> checkNormOne(std::mt19937_64 &rng) {
  NormCase<T> c(rng);
  std::vector<T> y, dx, dg, db;
  c.forward(c.x, y);
  c.vjp(dx, dg, db);
  double ef = 0, sf = 0, ev = 0, sv = 0;
  std::vector<double> rdg(c.F, 0.0), rdb(c.F, 0.0), xh(c.F);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t i = 0; i < c.n; ++i) {
      const T *xr = c.x.data() + b * c.sXb + i * c.sXi, *dyr = c.dy.data() + b * c.sDb + i * c.sDi;
      double m = 0, v = 0;
      for (int64_t f = 0; f < c.F; ++f)
        m += xr[f];
      m /= c.F;
      for (int64_t f = 0; f < c.F; ++f)
        v += (xr[f] - m) * (xr[f] - m);
      double r = 1 / std::sqrt(v / c.F + c.eps), m1 = 0, m2 = 0;
      for (int64_t f = 0; f < c.F; ++f) {
        xh[f] = (xr[f] - m) * r;
        double want = xh[f] * c.g[f] + c.bias[f], got = y[(b * c.n + i) * c.F + f];
        ef = std::max(ef, std::abs(want - got));
        sf = std::max(sf, std::abs(want));
        m1 += double(dyr[f]) * c.g[f] / c.F;
        m2 += double(dyr[f]) * c.g[f] * xh[f] / c.F;
        rdg[f] += double(dyr[f]) * xh[f];
        rdb[f] += dyr[f];
      }
      for (int64_t f = 0; f < c.F; ++f) {
        double want = r * (double(dyr[f]) * c.g[f] - m1 - xh[f] * m2) +
                      (c.withAdd ? double(c.add[b * c.sAb + i * c.sAi + f]) : 0.0);
        ev = std::max(ev, std::abs(want - double(dx[(b * c.n + i) * c.F + f])));
        sv = std::max(sv, std::abs(want));
      }
    }
  for (int64_t f = 0; f < c.F; ++f) {
    ev = std::max({ev, std::abs(rdg[f] - dg[f]), std::abs(rdb[f] - db[f])});
    sv = std::max({sv, std::abs(rdg[f]), std::abs(rdb[f])});
  }
  return {ef / std::max(sf, 1e-30), ev / std::max(sv, 1e-30)};
}

/// f64: <dx, δ> + <dg, γ> + <db, β> against central differences of
/// <layerNorm(x, g, b), dy> along random directions.
double checkNormDirection(std::mt19937_64 &rng) {
  NormCase<double> c(rng);
  c.withAdd = false; // dx is then the derivative alone
  std::normal_distribution<double> gd(0, 1);
  std::vector<double> dx, dg, db, y;
  c.vjp(dx, dg, db);
  std::vector<double> dirX(c.x.size()), dirG(c.F), dirB(c.F);
  for (auto *v : {&dirX, &dirG, &dirB})
    for (double &e : *v)
      e = gd(rng);
  double analytic = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t f = 0; f < c.F; ++f)
        analytic += dx[(b * c.n + i) * c.F + f] * dirX[b * c.sXb + i * c.sXi + f];
  for (int64_t f = 0; f < c.F; ++f)
    analytic += dg[f] * dirG[f] + db[f] * dirB[f];
  auto objective = [&](double h) {
    NormCase<double> s = c;
    for (size_t k = 0; k < s.x.size(); ++k)
      s.x[k] += h * dirX[k];
    for (int64_t f = 0; f < c.F; ++f)
      s.g[f] += h * dirG[f], s.bias[f] += h * dirB[f];
    s.forward(s.x, y);
    double v = 0;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.n; ++i)
        for (int64_t f = 0; f < c.F; ++f)
          v += y[(b * c.n + i) * c.F + f] * c.dy[b * c.sDb + i * c.sDi + f];
    return v;
  };
  double h = 1e-5, fd = (objective(h) - objective(-h)) / (2 * h);
  return std::abs(fd - analytic) / std::max(std::abs(analytic), 1.0);
}

int checkLayerNorm() {
  std::mt19937_64 rng(11);
  double f32 = 0, f64 = 0, v32 = 0, v64 = 0, dir = 0;
  for (int c = 0; c < 60; ++c) {
    auto [a, b] = checkNormOne<float>(rng);
    auto [p, q] = checkNormOne<double>(rng);
    f32 = std::max(f32, a), v32 = std::max(v32, b), f64 = std::max(f64, p), v64 = std::max(v64, q);
    dir = std::max(dir, checkNormDirection(rng));
  }
  bool ok = f32 <= 1e-5 && f64 <= 1e-13 && v32 <= 1e-5 && v64 <= 1e-12 && dir <= 1e-6;
  const char *isa = getenv("UNROLL_GEMM_ISA");
  printf("layer norm (%s) vs plain loops, 60 random sizes/strides each: max rel. error f32 %.2e "
         "(tolerance 1e-05), f64 %.2e (tolerance 1e-13)\n"
         "its VJP vs the formulas in plain loops: f32 %.2e (tolerance 1e-05), f64 %.2e (tolerance "
         "1e-12); vs central differences along random directions (f64): %.2e (tolerance 1e-06)\n"
         "%s\n",
         isa ? isa : "detected ISA", f32, f64, v32, v64, dir, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

/// The median wall time of `repeats` calls of fn, after one to warm up.
template <typename Fn> double medianSeconds(int64_t repeats, Fn fn) {
  std::vector<double> secs;
  for (int64_t r = 0; r <= repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0)
      secs.push_back(s); // the first run warms up
  }
  std::sort(secs.begin(), secs.end());
  return secs[secs.size() / 2];
}

/// NAME(n): n iterations of 14 independent vector FMAs on registers R0-R13
/// (no memory operand; R14 and R15 the factors), the FMA pipes' own rate,
/// which no GEMM can pass. 14 chains cover two pipes of 4-cycle latency
/// with room, and fit AVX2's 16 registers.
#if defined(__x86_64__)
// clang-format off
#define UNROLL_FMA(R, I) "vfmadd231ps %%" R "14, %%" R "15, %%" R #I "\n"
#define UNROLL_FMA_LOOP(NAME, TARGET, R)                                                           \
  __attribute__((target(TARGET))) void NAME(int64_t n) {                                           \
    __asm__ volatile("vxorps %%xmm0, %%xmm0, %%xmm0\n"                                             \
                     "vmovaps %%" R "0, %%" R "14\n"                                               \
                     "vmovaps %%" R "0, %%" R "15\n"                                               \
                     "1:\n"                                                                        \
                     UNROLL_FMA(R, 0) UNROLL_FMA(R, 1) UNROLL_FMA(R, 2) UNROLL_FMA(R, 3)           \
                     UNROLL_FMA(R, 4) UNROLL_FMA(R, 5) UNROLL_FMA(R, 6) UNROLL_FMA(R, 7)           \
                     UNROLL_FMA(R, 8) UNROLL_FMA(R, 9) UNROLL_FMA(R, 10) UNROLL_FMA(R, 11)         \
                     UNROLL_FMA(R, 12) UNROLL_FMA(R, 13)                                           \
                     "dec %0\n"                                                                    \
                     "jnz 1b\n"                                                                    \
                     : "+r"(n)                                                                     \
                     :                                                                             \
                     : "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",   \
                       "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");      \
  }
// clang-format on
UNROLL_FMA_LOOP(fmaLoopAvx512, "avx512f", "zmm")
UNROLL_FMA_LOOP(fmaLoopAvx2, "avx2,fma", "ymm")
#endif

/// --fma-peak [--threads T]: f32 GFLOP/s of the FMA pipes alone on T threads
/// (the instruction set the GEMM uses: AVX-512 where the CPU has it, unless
/// UNROLL_GEMM_ISA says otherwise), the ceiling beside bench/run.sh's GEMM
/// peak, which is this project's own kernel and so moves with it.
int fmaPeak(int argc, char **argv) {
  int64_t threads = 1;
  for (int i = 2; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoll(argv[++i]);
    } else {
      fprintf(stderr, "unroll-gemm-bench: --fma-peak takes only --threads T, not '%s'\n", argv[i]);
      return 2;
    }
  }
  if (threads < 1) {
    fprintf(stderr, "unroll-gemm-bench: --threads must be at least 1\n");
    return 2;
  }
#if defined(__x86_64__)
  // The kernels' own choice (unroll/runtime/CpuIsa.h), UNROLL_GEMM_ISA included.
  const unroll::cpu::Isa isa = unroll::cpu::detectIsa();
  if (isa == unroll::cpu::Isa::Plain) {
    fprintf(stderr, "unroll-gemm-bench: --fma-peak needs AVX2 with FMA or AVX-512 (the kernels "
                    "run their plain variant here)\n");
    return 1;
  }
  const bool avx512 = isa == unroll::cpu::Isa::Avx512;
  // FMAs per iteration and lanes per FMA.
  const int64_t perIter = 14, lanes = avx512 ? 16 : 8, iters = 40'000'000;
  auto once = [&] {
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < threads; ++t)
      pool.emplace_back([&] { avx512 ? fmaLoopAvx512(iters) : fmaLoopAvx2(iters); });
    for (auto &th : pool)
      th.join();
  };
  double secs = medianSeconds(5, once);
  double gflops = 2.0 * lanes * perIter * iters * threads / secs / 1e9;
  printf("{\"fma_peak\": true, \"isa\": \"%s\", \"threads\": %lld, \"gflops\": %.2f}\n",
         avx512 ? "avx512" : "avx2", (long long)threads, gflops);
  return 0;
#else
  fprintf(stderr, "unroll-gemm-bench: --fma-peak is implemented for x86-64 only\n");
  return 1;
#endif
}

/// --time-attention: the f32 kernels at one size (qkv and out dense).
int timeAttention(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: unroll-gemm-bench --time-attention B n H hd [--repeats R]\n");
    return 2;
  }
  int64_t B = atoll(argv[2]), n = atoll(argv[3]), H = atoll(argv[4]), hd = atoll(argv[5]);
  int64_t repeats = argc >= 8 && !strcmp(argv[6], "--repeats") ? atoll(argv[7]) : 20;
  int64_t D = H * hd, sQi = 3 * D, sQb = n * sQi, sOi = D, sOb = n * D;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> qkv(B * sQb), out(B * sOb), dout(B * sOb), grad(B * sQb);
  for (float &x : qkv)
    x = g(rng);
  for (float &x : dout)
    x = g(rng);
  double fwd = medianSeconds(repeats, [&] {
    unroll_attention_f32(B, n, H, hd, qkv.data(), sQb, sQi, out.data(), sOb, sOi);
  });
  double vjp = medianSeconds(repeats, [&] {
    unroll_attention_vjp_f32(B, n, H, hd, qkv.data(), sQb, sQi, dout.data(), sOb, sOi, grad.data(),
                             sQb, sQi);
  });
  // Multiply-adds of one causal product (q kᵀ or P v): Σ_i (i + 1) · hd per
  // head; the forward has two, the VJP five (P again, dP, dq, dk, dv).
  double macs = double(B) * H * (n * (n + 1) / 2) * hd;
  printf("{\"B\": %lld, \"n\": %lld, \"H\": %lld, \"hd\": %lld, \"forward_s\": %.6g, "
         "\"forward_gflops\": %.2f, \"vjp_s\": %.6g, \"vjp_gflops\": %.2f}\n",
         (long long)B, (long long)n, (long long)H, (long long)hd, fwd, 4 * macs / fwd / 1e9, vjp,
         10 * macs / vjp / 1e9);
  return 0;
}

/// --time-layer-norm: the f32 layer norm and its VJP over B x n rows of F
/// (dense), as the paper config calls them (64 x 82 x 256).
int timeLayerNorm(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: unroll-gemm-bench --time-layer-norm B n F [--repeats R]\n");
    return 2;
  }
  int64_t B = atoll(argv[2]), n = atoll(argv[3]), F = atoll(argv[4]);
  int64_t repeats = argc >= 7 && !strcmp(argv[5], "--repeats") ? atoll(argv[6]) : 20;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> x(B * n * F), dy(x.size()), y(x.size()), dx(x.size()), gain(F), bias(F),
      dgain(F), dbias(F);
  for (auto *v : {&x, &dy, &gain, &bias})
    for (float &e : *v)
      e = g(rng);
  double eps = 1e-5;
  int64_t epsBits;
  memcpy(&epsBits, &eps, sizeof eps);
  double fwd = medianSeconds(repeats, [&] {
    unroll_layer_norm_f32(B, n, F, x.data(), n * F, F, gain.data(), bias.data(), y.data(), n * F, F,
                          epsBits);
  });
  double vjp = medianSeconds(repeats, [&] {
    unroll_layer_norm_vjp_f32(B, n, F, x.data(), n * F, F, gain.data(), dy.data(), n * F, F,
                              nullptr, 0, 0, dx.data(), n * F, F, dgain.data(), dbias.data(),
                              epsBits);
  });
  // With an addend (a residual branch's cotangent; y's values here).
  double vjpAdd = medianSeconds(repeats, [&] {
    unroll_layer_norm_vjp_f32(B, n, F, x.data(), n * F, F, gain.data(), dy.data(), n * F, F,
                              y.data(), n * F, F, dx.data(), n * F, F, dgain.data(), dbias.data(),
                              epsBits);
  });
  printf("{\"B\": %lld, \"n\": %lld, \"F\": %lld, \"forward_s\": %.6g, \"vjp_s\": %.6g, "
         "\"vjp_addend_s\": %.6g}\n",
         (long long)B, (long long)n, (long long)F, fwd, vjp, vjpAdd);
  return 0;
}

} // namespace

const char *const kUsage =
    "usage: unroll-gemm-bench MODE\n"
    "  --check                           the GEMM kernel (all transposes, edge tiles, the\n"
    "                                    epilogues) against a plain loop in double\n"
    "  --check-bf16                      the same with bf16 operands (AVX512_BF16) against\n"
    "                                    the loop on the rounded operands\n"
    "  --check-attention                 the attention kernel and its VJP against plain\n"
    "                                    softmax loops and central differences\n"
    "  --check-layer-norm                the layer-norm kernels likewise\n"
    "  --check-help                      --check's cases with a second thread helping\n"
    "                                    (unroll_cpu_help): the same bits as alone\n"
    "  --time-attention B n H hd [--repeats R]\n"
    "                                    median time and GFLOP/s of the f32 attention\n"
    "                                    kernel and its VJP\n"
    "  --time-layer-norm B n F [--repeats R]\n"
    "                                    median times of the f32 layer norm and its VJP\n"
    "                                    (without and with an addend for dx)\n"
    "  M N K [--ta] [--tb] [--repeats R] [--threads T] [--bf16]\n"
    "        [--epilogue bias|gelu|dgelu|residual|rowsum] [--cold] [--packed-b]\n"
    "                                    GFLOP/s of C += A B (f32; --bf16: bf16 operands;\n"
    "                                    --epilogue: C = A B and a model epilogue, gelu =\n"
    "                                    bias+GELU, residual = bias+residual; --cold: the\n"
    "                                    caches flushed before each run, so the operands\n"
    "                                    come from memory as a training step's tape does;\n"
    "                                    --packed-b: B a weight, packed by the first run\n"
    "                                    only, as in a looped model's call):\n"
    "                                    the machine's peak for bench/run.sh's share-of-peak\n"
    "                                    column\n"
    "  --fma-peak [--threads T]          GFLOP/s of the FMA pipes alone (vector FMAs on\n"
    "                                    registers): the ceiling above the GEMM peak\n"
    "UNROLL_GEMM_ISA=avx2|plain forces a narrower instruction set.\n";

int main(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    fputs(kUsage, stdout);
    return 0;
  }
  if (argc >= 2 && !strcmp(argv[1], "--check-layer-norm"))
    return checkLayerNorm();
  if (argc >= 2 && !strcmp(argv[1], "--time-layer-norm"))
    return timeLayerNorm(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "--time-attention"))
    return timeAttention(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "--fma-peak"))
    return fmaPeak(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "--check-bf16"))
    return checkBf16();
  if (argc >= 2 && !strcmp(argv[1], "--check"))
    return check();
  if (argc >= 2 && !strcmp(argv[1], "--check-help"))
    return checkHelp();
  if (argc >= 2 && !strcmp(argv[1], "--check-attention"))
    return checkAttention();
  if (argc < 4) {
    fputs(kUsage, stderr);
    return 2;
  }
  // M N K: positive integers (an unknown --mode would otherwise read as 0).
  int64_t dims[3];
  for (int i = 0; i < 3; ++i) {
    char *end = nullptr;
    dims[i] = strtoll(argv[i + 1], &end, 10);
    if (*argv[i + 1] == '\0' || *end != '\0' || dims[i] < 1) {
      fprintf(stderr, "unroll-gemm-bench: '%s' is not a mode nor a size (M N K are positive)\n%s",
              argv[i + 1], kUsage);
      return 2;
    }
  }
  int64_t M = dims[0], N = dims[1], K = dims[2], repeats = 5, threads = 1;
  bool ta = false, tb = false, bf16 = false, cold = false; // A stored [K, M] / B stored [N, K]
  bool packedB = false; // --packed-b: B is a weight packed once (unroll_cpu_read_only)
  int64_t flags = 0;    // --epilogue: unroll_gemm_ex's flags, as the compiler calls it
  std::string epilogue = "none";
  for (int i = 4; i < argc; ++i) {
    if (!strcmp(argv[i], "--ta"))
      ta = true;
    else if (!strcmp(argv[i], "--tb"))
      tb = true;
    else if (i + 1 < argc && !strcmp(argv[i], "--repeats"))
      repeats = atoll(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
      threads = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--bf16"))
      bf16 = true;
    else if (!strcmp(argv[i], "--cold"))
      cold = true;
    else if (!strcmp(argv[i], "--packed-b"))
      packedB = true;
    else if (i + 1 < argc && !strcmp(argv[i], "--epilogue")) {
      epilogue = argv[++i];
      flags = epilogue == "bias"       ? UNROLL_GEMM_BIAS
              : epilogue == "gelu"     ? UNROLL_GEMM_BIAS | UNROLL_GEMM_GELU_AUX
              : epilogue == "dgelu"    ? UNROLL_GEMM_DGELU
              : epilogue == "residual" ? UNROLL_GEMM_BIAS | UNROLL_GEMM_ADD_D
              : epilogue == "rowsum"   ? UNROLL_GEMM_ROWSUM_A
                                       : -1;
      if (flags < 0) {
        fprintf(stderr,
                "unroll-gemm-bench: unknown epilogue '%s' (bias, gelu, dgelu, residual, "
                "rowsum)\n",
                epilogue.c_str());
        return 2;
      }
    } else {
      fprintf(stderr, "unroll-gemm-bench: unknown option '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }
  if (bf16 && !unroll_cpu_set_precision(1)) {
    fprintf(stderr, "unroll-gemm-bench: --bf16 needs AVX512_BF16 (vdpbf16ps), which this CPU "
                    "lacks\n");
    return 2;
  }
  // Each thread multiplies its own matrices (as unroll's threads over the
  // batch do); GFLOP/s counts all threads.
  // With an epilogue, D is C-sized (the GELU's output or input, the
  // residual; ROWSUM_A's sums need M) and C is overwritten, as the
  // compiler's calls do.
  std::vector<std::vector<float>> As(threads), Bs(threads), Cs(threads), Ds(threads);
  std::vector<float> bias(N, 0.125f);
  for (int64_t t = 0; t < threads; ++t) {
    As[t].assign(M * K, 0.5f);
    Bs[t].assign(K * N, 0.25f);
    Cs[t].assign(M * N, 0.0f);
    if (flags)
      Ds[t].assign(std::max(M * N, M), 0.0625f);
  }
  auto run = [&](int64_t t) {
    // Marked once per thread: the first call packs B, the others reuse it,
    // as a looped model's iterations reuse a weight within one call.
    thread_local const float *marked = nullptr;
    if (packedB && marked != Bs[t].data()) {
      unroll_cpu_read_only(Bs[t].data(), Bs[t].size() * sizeof(float));
      marked = Bs[t].data();
    }
    if (flags)
      unroll_gemm_ex_f32(M, N, K, As[t].data(), ta ? 1 : K, ta ? M : 1, Bs[t].data(), tb ? 1 : N,
                         tb ? K : 1, Cs[t].data(), N, 1, 0, flags,
                         flags & UNROLL_GEMM_BIAS ? bias.data() : nullptr, Ds[t].data());
    else
      unroll_gemm_f32(M, N, K, As[t].data(), ta ? 1 : K, ta ? M : 1, Bs[t].data(), tb ? 1 : N,
                      tb ? K : 1, Cs[t].data(), N, 1, 1);
  };
  // --cold: before each run a buffer larger than the caches is written
  // over, so that the operands come from memory, as a training step's tape
  // does (the run itself is timed alone).
  std::vector<char> flush(cold ? size_t(512) << 20 : 0);
  double med = unroll::bench::medianRoundSeconds(threads, repeats, run, [&](int64_t r) {
    for (size_t i = 0; i < flush.size(); i += 64)
      flush[i] = char(r + i);
  });
  double gflops = 2.0 * M * N * K * threads / med / 1e9;
  printf("{\"M\": %lld, \"N\": %lld, \"K\": %lld, \"A\": \"%s\", \"B\": \"%s\", "
         "\"threads\": %lld, \"operands\": \"%s\", \"epilogue\": \"%s\", \"cold\": %s, "
         "\"median_s\": %.6g, \"gflops\": %.2f}\n",
         (long long)M, (long long)N, (long long)K, ta ? "transposed" : "row-major",
         tb ? "transposed" : "row-major", (long long)threads, bf16 ? "bf16" : "f32",
         epilogue.c_str(), cold ? "true" : "false", med, gflops);
  return 0;
}
