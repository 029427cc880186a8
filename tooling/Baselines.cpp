//===- Baselines.cpp ------------------------------------------------------===//
#include "unroll/tooling/Baselines.h"

#include "unroll/tooling/Adam.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

using namespace unroll;

bool unroll::solveSPD(std::vector<double> &a, std::vector<double> &b, int64_t d) {
  for (int64_t j = 0; j < d; ++j) {
    double s = a[j * d + j];
    for (int64_t k = 0; k < j; ++k)
      s -= a[j * d + k] * a[j * d + k];
    if (!(s > 0))
      return false;
    double l = std::sqrt(s);
    a[j * d + j] = l;
    for (int64_t i = j + 1; i < d; ++i) {
      double t = a[i * d + j];
      for (int64_t k = 0; k < j; ++k)
        t -= a[i * d + k] * a[j * d + k];
      a[i * d + j] = t / l;
    }
  }
  for (int64_t i = 0; i < d; ++i) { // L z = b
    double t = b[i];
    for (int64_t k = 0; k < i; ++k)
      t -= a[i * d + k] * b[k];
    b[i] = t / a[i * d + i];
  }
  for (int64_t i = d - 1; i >= 0; --i) { // Lᵀ w = z
    double t = b[i];
    for (int64_t k = i + 1; k < d; ++k)
      t -= a[k * d + i] * b[k];
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
        for (int64_t q = 0; q < d; ++q)
          a[p * d + q] += xs[j * d + p] * xs[j * d + q];
      }
    for (int64_t p = 0; p < d; ++p)
      tr += a[p * d + p];
    double lambda = 1e-10 * std::max(tr / d, 1e-300);
    for (int64_t p = 0; p < d; ++p)
      a[p * d + p] += lambda;
    if (!solveSPD(a, b, d))
      continue; // all-zero examples: predict 0
    for (int64_t p = 0; p < d; ++p)
      preds[i] += xs[i * d + p] * b[p];
  }
  return preds;
}

std::vector<double> unroll::averagingPreds(const double *xs, const double *ys, int64_t k,
                                           int64_t d) {
  std::vector<double> preds(k, 0.0), w(d, 0.0);
  for (int64_t i = 1; i < k; ++i) {
    for (int64_t p = 0; p < d; ++p)
      w[p] += xs[(i - 1) * d + p] * ys[i - 1];
    for (int64_t p = 0; p < d; ++p)
      preds[i] += xs[i * d + p] * w[p] / i;
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
      for (int64_t p = 0; p < d; ++p)
        s += (xs[i * d + p] - xs[j * d + p]) * (xs[i * d + p] - xs[j * d + p]);
      dist.push_back({s, j});
    }
    int64_t m = std::min<int64_t>(nn, i);
    std::partial_sort(dist.begin(), dist.begin() + m, dist.end());
    double s = 0;
    for (int64_t j = 0; j < m; ++j)
      s += ys[dist[j].second];
    preds[i] = s / m;
  }
  return preds;
}

std::vector<double> unroll::lasso(const double *xs, const double *ys, int64_t n, int64_t d,
                                  double alpha, double tol, int maxSweeps) {
  std::vector<double> w(d, 0.0), r(ys, ys + n), sq(d, 0.0); // r = y − X w
  for (int64_t j = 0; j < d; ++j)
    for (int64_t i = 0; i < n; ++i)
      sq[j] += xs[i * d + j] * xs[i * d + j];
  for (int sweep = 0; sweep < maxSweeps; ++sweep) {
    double moved = 0;
    for (int64_t j = 0; j < d; ++j) {
      if (sq[j] == 0)
        continue;
      // Minimize over w_j alone: soft-threshold the partial correlation.
      double rho = 0;
      for (int64_t i = 0; i < n; ++i)
        rho += xs[i * d + j] * (r[i] + xs[i * d + j] * w[j]);
      double thr = alpha * n, wj = 0;
      if (rho > thr)
        wj = (rho - thr) / sq[j];
      else if (rho < -thr)
        wj = (rho + thr) / sq[j];
      double delta = wj - w[j];
      if (delta != 0) {
        for (int64_t i = 0; i < n; ++i)
          r[i] -= xs[i * d + j] * delta;
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
    for (int64_t c = 0; c < d; ++c)
      p += w[c] * xs[i * d + c];
    out[i] = p;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Trees
//===----------------------------------------------------------------------===//

void RegressionTree::fit(const double *xs, const double *ys, int64_t n, int64_t d, int maxDepth) {
  nodes_.clear();
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  grow(xs, ys, idx, 0, n, d, 0, maxDepth);
}

int64_t RegressionTree::grow(const double *xs, const double *ys, std::vector<int64_t> &idx,
                             int64_t begin, int64_t end, int64_t d, int depth, int maxDepth) {
  int64_t self = nodes_.size();
  nodes_.push_back({});
  int64_t n = end - begin;
  double sum = 0, sumSq = 0;
  for (int64_t i = begin; i < end; ++i) {
    sum += ys[idx[i]];
    sumSq += ys[idx[i]] * ys[idx[i]];
  }
  nodes_[self].value = n ? sum / n : 0.0;
  if (n < 2 || (maxDepth >= 0 && depth >= maxDepth) || sumSq - sum * sum / n <= 1e-12 * sumSq)
    return self;
  // Best split: maximize sum_l^2/n_l + sum_r^2/n_r (the squared error's
  // reduction up to a constant), scanning each feature in sorted order.
  double best = sum * sum / n * (1 + 1e-12) + 1e-300;
  int64_t bestF = -1;
  double bestT = 0;
  std::vector<int64_t> order(idx.begin() + begin, idx.begin() + end);
  for (int64_t f = 0; f < d; ++f) {
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return xs[a * d + f] < xs[b * d + f]; });
    double left = 0;
    for (int64_t i = 0; i + 1 < n; ++i) {
      left += ys[order[i]];
      double xa = xs[order[i] * d + f], xb = xs[order[i + 1] * d + f];
      if (!(xb > xa))
        continue; // no threshold between equal values
      double nl = i + 1, nr = n - nl, right = sum - left;
      double gain = left * left / nl + right * right / nr;
      if (gain > best) {
        best = gain;
        bestF = f;
        bestT = xa / 2 + xb / 2;
        if (bestT >= xb) // rounding: keep the threshold strictly below xb
          bestT = xa;
      }
    }
  }
  if (bestF < 0)
    return self;
  auto mid = std::partition(idx.begin() + begin, idx.begin() + end,
                            [&](int64_t i) { return xs[i * d + bestF] <= bestT; });
  int64_t split = mid - idx.begin();
  int64_t l = grow(xs, ys, idx, begin, split, d, depth + 1, maxDepth);
  int64_t r = grow(xs, ys, idx, split, end, d, depth + 1, maxDepth);
  nodes_[self].feature = bestF;
  nodes_[self].threshold = bestT;
  nodes_[self].left = l;
  nodes_[self].right = r;
  return self;
}

double RegressionTree::predict(const double *x) const {
  if (nodes_.empty())
    return 0.0;
  int64_t i = 0;
  while (nodes_[i].feature >= 0)
    i = x[nodes_[i].feature] <= nodes_[i].threshold ? nodes_[i].left : nodes_[i].right;
  return nodes_[i].value;
}

int RegressionTree::depthOf(int64_t node) const {
  const Node &nd = nodes_[node];
  return nd.feature < 0 ? 0 : 1 + std::max(depthOf(nd.left), depthOf(nd.right));
}
int RegressionTree::depth() const { return nodes_.empty() ? 0 : depthOf(0); }
int64_t RegressionTree::leaves() const {
  return std::count_if(nodes_.begin(), nodes_.end(), [](const Node &n) { return n.feature < 0; });
}

void BoostedTrees::fit(const double *xs, const double *ys, int64_t n, int64_t d, int trees,
                       int maxDepth, double lr) {
  lr_ = lr;
  init_ = n ? std::accumulate(ys, ys + n, 0.0) / n : 0.0;
  std::vector<double> f(n, init_), r(n);
  trees_.assign(trees, RegressionTree());
  for (int m = 0; m < trees; ++m) {
    for (int64_t i = 0; i < n; ++i)
      r[i] = ys[i] - f[i];
    trees_[m].fit(xs, r.data(), n, d, maxDepth);
    for (int64_t i = 0; i < n; ++i)
      f[i] += lr * trees_[m].predict(xs + i * d);
  }
}

double BoostedTrees::predict(const double *x) const {
  double f = init_;
  for (const RegressionTree &t : trees_)
    f += lr_ * t.predict(x);
  return f;
}

//===----------------------------------------------------------------------===//
// 2-layer ReLU network
//===----------------------------------------------------------------------===//

void TwoLayerNet::init(int64_t dim, int64_t hiddenUnits, uint64_t seed) {
  d = dim;
  hidden = hiddenUnits;
  params.assign(hidden * d + 2 * hidden + 1, 0.0);
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (int64_t i = 0; i < hidden * d; ++i)
    params[i] = nd(gen) / std::sqrt((double)d);
  for (int64_t h = 0; h < hidden; ++h)
    params[hidden * d + hidden + h] = nd(gen) / std::sqrt((double)hidden);
}

double TwoLayerNet::predict(const double *x) const {
  const double *w = params.data(), *c = w + hidden * d, *a = c + hidden;
  double out = a[hidden];
  for (int64_t h = 0; h < hidden; ++h) {
    double z = c[h];
    for (int64_t p = 0; p < d; ++p)
      z += w[h * d + p] * x[p];
    if (z > 0)
      out += a[h] * z;
  }
  return out;
}

double TwoLayerNet::lossGrad(const double *xs, const double *ys, int64_t n,
                             std::vector<double> &grad) const {
  grad.assign(params.size(), 0.0);
  const double *w = params.data(), *c = w + hidden * d, *a = c + hidden;
  double *gw = grad.data(), *gc = gw + hidden * d, *ga = gc + hidden;
  std::vector<double> z(hidden);
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double *x = xs + i * d;
    double out = a[hidden];
    for (int64_t h = 0; h < hidden; ++h) {
      double s = c[h];
      for (int64_t p = 0; p < d; ++p)
        s += w[h * d + p] * x[p];
      z[h] = s;
      if (s > 0)
        out += a[h] * s;
    }
    double e = out - ys[i];
    loss += e * e / n;
    double g = 2 * e / n; // d loss / d out
    ga[hidden] += g;
    for (int64_t h = 0; h < hidden; ++h) {
      if (z[h] <= 0)
        continue;
      ga[h] += g * z[h];
      double gz = g * a[h];
      gc[h] += gz;
      for (int64_t p = 0; p < d; ++p)
        gw[h * d + p] += gz * x[p];
    }
  }
  return loss;
}

void TwoLayerNet::train(const double *xs, const double *ys, int64_t n, int steps, double lr) {
  Adam opt;
  opt.lr = lr;
  std::vector<double> g;
  for (int s = 0; s < steps; ++s) {
    lossGrad(xs, ys, n, g);
    opt.update(params, g);
  }
}

namespace {
/// preds[i] = fitAndPredict(i) for the listed positions (all when empty),
/// NaN elsewhere; position 0 (no examples) predicts 0.
template <typename Fn>
std::vector<double> atPositions(int64_t k, const std::vector<int64_t> &positions, Fn fn) {
  std::vector<double> out(k, positions.empty() ? 0.0 : std::numeric_limits<double>::quiet_NaN());
  auto one = [&](int64_t i) {
    if (i >= 0 && i < k)
      out[i] = i == 0 ? 0.0 : fn(i);
  };
  if (positions.empty())
    for (int64_t i = 0; i < k; ++i)
      one(i);
  else
    for (int64_t i : positions)
      one(i);
  return out;
}
} // namespace

std::vector<double> unroll::treePreds(const double *xs, const double *ys, int64_t k, int64_t d,
                                      int maxDepth, const std::vector<int64_t> &positions) {
  return atPositions(k, positions, [&](int64_t i) {
    RegressionTree t;
    t.fit(xs, ys, i, d, maxDepth);
    return t.predict(xs + i * d);
  });
}

std::vector<double> unroll::boostedTreePreds(const double *xs, const double *ys, int64_t k,
                                             int64_t d, const std::vector<int64_t> &positions,
                                             int trees, int maxDepth, double lr) {
  return atPositions(k, positions, [&](int64_t i) {
    BoostedTrees bt;
    bt.fit(xs, ys, i, d, trees, maxDepth, lr);
    return bt.predict(xs + i * d);
  });
}

std::vector<double> unroll::twoLayerNetPreds(const double *xs, const double *ys, int64_t k,
                                             int64_t d, const std::vector<int64_t> &positions,
                                             int64_t hidden, int steps, double lr) {
  return atPositions(k, positions, [&](int64_t i) {
    TwoLayerNet net;
    net.init(d, hidden, 0x2a7e7 + i);
    net.train(xs, ys, i, steps, lr);
    return net.predict(xs + i * d);
  });
}
