//===- Baselines.h - classical in-context estimators -----------*- C++ -*-===//
//
// Each takes one prompt (xs [k, d], ys [k]) and returns, for every position
// i = 0 .. k-1, the prediction for y_i from the examples before it
// (x_0, y_0, …, x_{i-1}, y_{i-1}) and x_i: what the transformer sees.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_BASELINES_H
#define UNROLL_RUNTIME_BASELINES_H

#include <cstdint>
#include <vector>

namespace unroll {

/// Least squares (minimum-norm when there are fewer examples than d).
std::vector<double> leastSquaresPreds(const double *xs, const double *ys, int64_t k, int64_t d);
/// Averaging (Garg et al.): w = mean_j x_j y_j.
std::vector<double> averagingPreds(const double *xs, const double *ys, int64_t k, int64_t d);
/// Mean of y over the `nn` nearest examples (Euclidean), fewer when fewer exist.
std::vector<double> nearestNeighborPreds(const double *xs, const double *ys, int64_t k,
                                         int64_t d, int nn = 3);

/// Lasso without intercept (sklearn's objective): w minimizing
/// (1/2n)·||y − X w||² + alpha·||w||₁ over n examples X [n, d], by cyclic
/// coordinate descent until no coordinate moves by more than `tol`.
std::vector<double> lasso(const double *xs, const double *ys, int64_t n, int64_t d, double alpha,
                          double tol = 1e-10, int maxSweeps = 10000);
/// Predictions of the Lasso fitted on the examples before each position.
std::vector<double> lassoPreds(const double *xs, const double *ys, int64_t k, int64_t d,
                               double alpha);

/// Solves A w = b for a symmetric positive definite d x d A (Cholesky, in
/// place); false if A is not positive definite.
bool solveSPD(std::vector<double> &a, std::vector<double> &b, int64_t d);

} // namespace unroll

#endif
