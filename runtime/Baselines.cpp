//===- Baselines.cpp ------------------------------------------------------===//
#include "Baselines.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace unroll;

bool unroll::solveSPD(std::vector<double> &a, std::vector<double> &b, int64_t d) {
  for (int64_t j = 0; j < d; ++j) {
    double s = a[j * d + j];
    for (int64_t k = 0; k < j; ++k) s -= a[j * d + k] * a[j * d + k];
    if (!(s > 0)) return false;
    double l = std::sqrt(s);
    a[j * d + j] = l;
    for (int64_t i = j + 1; i < d; ++i) {
      double t = a[i * d + j];
      for (int64_t k = 0; k < j; ++k) t -= a[i * d + k] * a[j * d + k];
      a[i * d + j] = t / l;
    }
  }
  for (int64_t i = 0; i < d; ++i) { // L z = b
    double t = b[i];
    for (int64_t k = 0; k < i; ++k) t -= a[i * d + k] * b[k];
    b[i] = t / a[i * d + i];
  }
  for (int64_t i = d - 1; i >= 0; --i) { // Lᵀ w = z
    double t = b[i];
    for (int64_t k = i + 1; k < d; ++k) t -= a[k * d + i] * b[k];
    b[i] = t / a[i * d + i];
  }
  return true;
}

std::vector<double> unroll::leastSquaresPreds(const double *xs, const double *ys, int64_t k,
                                              int64_t d) {
  std::vector<double> preds(k, 0.0);
  for (int64_t i = 1; i < k; ++i) {
    // Ridge with a vanishing penalty: the minimum-norm solution for i < d,
    // least squares (to ~1e-10 relative) for i >= d.
    std::vector<double> a(d * d, 0.0), b(d, 0.0);
    double tr = 0;
    for (int64_t j = 0; j < i; ++j)
      for (int64_t p = 0; p < d; ++p) {
        b[p] += xs[j * d + p] * ys[j];
        for (int64_t q = 0; q < d; ++q) a[p * d + q] += xs[j * d + p] * xs[j * d + q];
      }
    for (int64_t p = 0; p < d; ++p) tr += a[p * d + p];
    double lambda = 1e-10 * std::max(tr / d, 1e-300);
    for (int64_t p = 0; p < d; ++p) a[p * d + p] += lambda;
    if (!solveSPD(a, b, d))
      continue; // all-zero examples: predict 0
    for (int64_t p = 0; p < d; ++p) preds[i] += xs[i * d + p] * b[p];
  }
  return preds;
}

std::vector<double> unroll::averagingPreds(const double *xs, const double *ys, int64_t k,
                                           int64_t d) {
  std::vector<double> preds(k, 0.0), w(d, 0.0);
  for (int64_t i = 1; i < k; ++i) {
    for (int64_t p = 0; p < d; ++p) w[p] += xs[(i - 1) * d + p] * ys[i - 1];
    for (int64_t p = 0; p < d; ++p) preds[i] += xs[i * d + p] * w[p] / i;
  }
  return preds;
}

std::vector<double> unroll::nearestNeighborPreds(const double *xs, const double *ys, int64_t k,
                                                 int64_t d, int nn) {
  std::vector<double> preds(k, 0.0);
  std::vector<std::pair<double, int64_t>> dist;
  for (int64_t i = 1; i < k; ++i) {
    dist.clear();
    for (int64_t j = 0; j < i; ++j) {
      double s = 0;
      for (int64_t p = 0; p < d; ++p) s += (xs[i * d + p] - xs[j * d + p]) * (xs[i * d + p] - xs[j * d + p]);
      dist.push_back({s, j});
    }
    int64_t m = std::min<int64_t>(nn, i);
    std::partial_sort(dist.begin(), dist.begin() + m, dist.end());
    double s = 0;
    for (int64_t j = 0; j < m; ++j) s += ys[dist[j].second];
    preds[i] = s / m;
  }
  return preds;
}

std::vector<double> unroll::lasso(const double *xs, const double *ys, int64_t n, int64_t d,
                                  double alpha, double tol, int maxSweeps) {
  std::vector<double> w(d, 0.0), r(ys, ys + n), sq(d, 0.0); // r = y − X w
  for (int64_t j = 0; j < d; ++j)
    for (int64_t i = 0; i < n; ++i) sq[j] += xs[i * d + j] * xs[i * d + j];
  for (int sweep = 0; sweep < maxSweeps; ++sweep) {
    double moved = 0;
    for (int64_t j = 0; j < d; ++j) {
      if (sq[j] == 0)
        continue;
      // Minimize over w_j alone: soft-threshold the partial correlation.
      double rho = 0;
      for (int64_t i = 0; i < n; ++i) rho += xs[i * d + j] * (r[i] + xs[i * d + j] * w[j]);
      double thr = alpha * n, wj = 0;
      if (rho > thr) wj = (rho - thr) / sq[j];
      else if (rho < -thr) wj = (rho + thr) / sq[j];
      double delta = wj - w[j];
      if (delta != 0) {
        for (int64_t i = 0; i < n; ++i) r[i] -= xs[i * d + j] * delta;
        w[j] = wj;
        moved = std::max(moved, std::abs(delta));
      }
    }
    if (moved <= tol)
      break;
  }
  return w;
}

std::vector<double> unroll::lassoPreds(const double *xs, const double *ys, int64_t k, int64_t d,
                                       double alpha) {
  std::vector<double> out(k, 0.0);
  for (int64_t i = 1; i < k; ++i) {
    std::vector<double> w = lasso(xs, ys, i, d, alpha);
    double p = 0;
    for (int64_t c = 0; c < d; ++c) p += w[c] * xs[i * d + c];
    out[i] = p;
  }
  return out;
}
