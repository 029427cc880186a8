//===- GemmPlan.h - a strided GEMM as a column-major BLAS call ---*- C++ -*-===//
//
// cuBLASLt (like every BLAS) takes column-major matrices with a leading
// dimension and a transpose flag. unroll_gpu_gemm_* receives C = A · B with
// a row and a column stride per operand, one of them 1. This header maps the
// one to the other (unittests/GemmPlanTest.cpp runs the plans on the host
// against the strided definition):
//
//  * C column-major (sCm = 1): C = op(A) · op(B) directly, ldc = sCn;
//  * C row-major (sCn = 1): Cᵀ (column-major, ldc = sCm) = op(Bᵀ) · op(Aᵀ),
//    i.e. the operands swap;
//  * an operand whose row stride is 1 is column-major (op = N, ld = its
//    column stride); one whose column stride is 1 is the transpose of a
//    column-major matrix (op = T, ld = its row stride).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_GPU_GEMMPLAN_H
#define UNROLL_RUNTIME_GPU_GEMMPLAN_H

#include <algorithm>
#include <cstdint>

namespace unroll::gpu {

struct GemmPlan {
  bool ok = false;   // false: some operand has no unit stride
  bool swap = false; // the first operand is B (C row-major), else A
  bool transX = false, transY = false;
  int64_t m = 0, n = 0, k = 0; // column-major C'[m, n] = op(X)[m, k] · op(Y)[k, n]
  int64_t ldx = 1, ldy = 1, ldc = 1;
  int64_t rowsX = 0, colsX = 0, rowsY = 0, colsY = 0; // X and Y as stored
};

/// A matrix [rows, cols] with strides (sr, sc) as a stored column-major
/// matrix and a transpose: false if neither stride is 1 (and both dims > 1).
inline bool asColumnMajor(int64_t rows, int64_t cols, int64_t sr, int64_t sc, bool &trans,
                          int64_t &ld, int64_t &storedRows, int64_t &storedCols) {
  if (sr == 1 || rows <= 1) {
    trans = false, storedRows = rows, storedCols = cols;
    ld = cols <= 1 ? std::max<int64_t>(rows, 1) : sc;
  } else if (sc == 1 || cols <= 1) {
    trans = true, storedRows = cols, storedCols = rows;
    ld = rows <= 1 ? std::max<int64_t>(cols, 1) : sr;
  } else {
    return false;
  }
  return ld >= std::max<int64_t>(storedRows, 1);
}

/// `rowMajorC`: C must be taken row-major (swap) when its column stride is
/// 1, even if its row stride is 1 too (N = 1): a bias epilogue adds along
/// the rows of the column-major result, i.e. along C's columns only then.
inline GemmPlan planGemm(int64_t M, int64_t N, int64_t K, int64_t sAm, int64_t sAk, int64_t sBk,
                         int64_t sBn, int64_t sCm, int64_t sCn, bool rowMajorC = false) {
  GemmPlan p;
  bool cTrans;
  int64_t ldc, cRows, cCols;
  if (rowMajorC && sCn == 1) {
    cTrans = true, cRows = N, cCols = M;
    ldc = M <= 1 ? std::max<int64_t>(N, 1) : sCm;
    if (ldc < std::max<int64_t>(N, 1))
      return p;
  } else if (!asColumnMajor(M, N, sCm, sCn, cTrans, ldc, cRows, cCols)) {
    return p;
  }
  p.swap = cTrans;
  p.ldc = ldc;
  p.k = K;
  if (!p.swap) { // C = A · B
    p.m = M, p.n = N;
    p.ok = asColumnMajor(M, K, sAm, sAk, p.transX, p.ldx, p.rowsX, p.colsX) &&
           asColumnMajor(K, N, sBk, sBn, p.transY, p.ldy, p.rowsY, p.colsY);
  } else { // Cᵀ = Bᵀ · Aᵀ
    p.m = N, p.n = M;
    p.ok = asColumnMajor(N, K, sBn, sBk, p.transX, p.ldx, p.rowsX, p.colsX) &&
           asColumnMajor(K, M, sAk, sAm, p.transY, p.ldy, p.rowsY, p.colsY);
  }
  return p;
}

} // namespace unroll::gpu

#endif
