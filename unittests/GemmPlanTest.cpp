// The column-major plan of a strided GEMM (runtime/include/unroll/runtime/GemmPlan.h), which
// the cuBLASLt path of GPU libraries follows, executed on the host with the
// BLAS definition of op(X)·op(Y) and compared with the strided definition
// of C = A·B, for every layout the GPU lowering can pass (each operand row-
// or column-major, with padded leading dimensions, and degenerate sizes).
#include "unroll/runtime/GemmPlan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using unroll::gpu::GemmPlan;
using unroll::gpu::planGemm;

namespace {

/// Column-major BLAS: C'[m, n] = op(X) · op(Y), X stored [rowsX, colsX] with
/// leading dimension ldx (and Y likewise).
void blas(const GemmPlan &p, const double *X, const double *Y, double *C) {
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < p.k; ++k) {
        double x = p.transX ? X[k + i * p.ldx] : X[i + k * p.ldx];
        double y = p.transY ? Y[j + k * p.ldy] : Y[k + j * p.ldy];
        acc += x * y;
      }
      C[i + j * p.ldc] = acc;
    }
}

struct Layout {
  bool rowMajor;
  int64_t pad;
};

void check(int64_t M, int64_t N, int64_t K, Layout a, Layout b, Layout c, bool rowMajorC = false) {
  auto strides = [](int64_t rows, int64_t cols, Layout l, int64_t &sr, int64_t &sc) {
    if (l.rowMajor)
      sr = cols + l.pad, sc = 1;
    else
      sr = 1, sc = rows + l.pad;
    return (rows + (l.rowMajor ? 0 : l.pad)) * (cols + (l.rowMajor ? l.pad : 0)) + 1;
  };
  int64_t sAm, sAk, sBk, sBn, sCm, sCn;
  size_t na = strides(M, K, a, sAm, sAk), nb = strides(K, N, b, sBk, sBn),
         nc = strides(M, N, c, sCm, sCn);
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> A(na), B(nb), C(nc, 0), ref(nc, 0);
  for (double &v : A)
    v = u(rng);
  for (double &v : B)
    v = u(rng);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += A[i * sAm + k * sAk] * B[k * sBk + j * sBn];
      ref[i * sCm + j * sCn] = acc;
    }
  GemmPlan p = planGemm(M, N, K, sAm, sAk, sBk, sBn, sCm, sCn, rowMajorC);
  ASSERT_TRUE(p.ok);
  if (rowMajorC) // the bias epilogue's orientation: D's rows are C's columns
    EXPECT_TRUE(p.swap && p.m == N && p.n == M);
  EXPECT_GE(p.ldx, std::max<int64_t>(p.rowsX, 1));
  EXPECT_GE(p.ldy, std::max<int64_t>(p.rowsY, 1));
  EXPECT_GE(p.ldc, std::max<int64_t>(p.m, 1));
  EXPECT_EQ(p.rowsX, p.transX ? p.k : p.m);
  EXPECT_EQ(p.colsY, p.transY ? p.k : p.n);
  blas(p, p.swap ? B.data() : A.data(), p.swap ? A.data() : B.data(), C.data());
  for (size_t i = 0; i < nc; ++i)
    ASSERT_NEAR(C[i], ref[i], 1e-12) << "M " << M << " N " << N << " K " << K << " element " << i;
}

} // namespace

TEST(GemmPlan, EveryLayoutMatchesTheStridedDefinition) {
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{5, 7, 3},
                         {1, 6, 4},
                         {6, 1, 4},
                         {4, 5, 1},
                         {1, 1, 9},
                         {8, 8, 8}})
    for (bool ra : {false, true})
      for (bool rb : {false, true})
        for (bool rc : {false, true})
          for (int64_t pad : {0, 3})
            check(M, N, K, {ra, pad}, {rb, pad}, {rc, 0});
}

TEST(GemmPlan, RowMajorCWhenABiasNeedsIt) {
  // A row-major C, N = 1 included (the read-out: C [M, 1], both strides 1).
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{5, 7, 3}, {6, 1, 4}, {1, 6, 4}})
    for (bool ra : {false, true})
      for (bool rb : {false, true})
        check(M, N, K, {ra, 0}, {rb, 2}, {true, 0}, /*rowMajorC=*/true);
}

TEST(GemmPlan, RejectsOperandsWithoutAUnitStride) {
  EXPECT_FALSE(planGemm(4, 4, 4, 8, 2, 4, 1, 4, 1).ok); // A: strides (8, 2)
  EXPECT_FALSE(planGemm(4, 4, 4, 4, 1, 4, 1, 8, 2).ok); // C: strides (8, 2)
}
