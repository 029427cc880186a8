//===- Baselines.h - classical in-context estimators -----------*- C++ -*-===//
//
// Each takes one prompt (xs [k, d], ys [k]) and returns, for every position
// i = 0 .. k-1, the prediction for y_i from the examples before it
// (x_0, y_0, …, x_{i-1}, y_{i-1}) and x_i: what the transformer sees.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_BASELINES_H
#define UNROLL_TOOLING_BASELINES_H

#include <cstdint>
#include <vector>

namespace unroll {

/// Least squares (minimum-norm when there are fewer examples than d).
std::vector<double> leastSquaresPreds(const double *xs, const double *ys, int64_t k, int64_t d);
/// Averaging (Garg et al.): w = mean_j x_j y_j.
std::vector<double> averagingPreds(const double *xs, const double *ys, int64_t k, int64_t d);
/// Mean of y over the `nn` nearest examples (Euclidean), fewer when fewer exist.
std::vector<double> nearestNeighborPreds(const double *xs, const double *ys, int64_t k, int64_t d,
                                         int nn = 3);

/// Lasso without intercept (sklearn's objective): w minimizing
/// (1/2n)·||y − X w||² + alpha·||w||₁ over n examples X [n, d], by cyclic
/// coordinate descent until no coordinate moves by more than `tol`.
std::vector<double> lasso(const double *xs, const double *ys, int64_t n, int64_t d, double alpha,
                          double tol = 1e-10, int maxSweeps = 10000);
/// Predictions of the Lasso fitted on the examples before each position.
std::vector<double> lassoPreds(const double *xs, const double *ys, int64_t k, int64_t d,
                               double alpha);

/// A regression tree fitted greedily (CART): each node splits on the
/// feature and threshold that most reduce the squared error, the threshold
/// halfway between neighbouring values, x <= threshold going left; leaves
/// predict the mean. Nodes stop splitting at `maxDepth` (< 0: unlimited),
/// below 2 samples, or when no split reduces the error (pure nodes, equal
/// x). The same rule as scikit-learn's DecisionTreeRegressor with
/// criterion="squared_error", which test/Integration/CPU/baselines.test
/// compares against.
class RegressionTree {
public:
  void fit(const double *xs, const double *ys, int64_t n, int64_t d, int maxDepth);
  double predict(const double *x) const;
  int depth() const;
  int64_t leaves() const;

private:
  struct Node {
    int64_t feature = -1; // -1: leaf
    double threshold = 0, value = 0;
    int64_t left = -1, right = -1;
  };
  int64_t grow(const double *xs, const double *ys, std::vector<int64_t> &idx, int64_t begin,
               int64_t end, int64_t d, int depth, int maxDepth);
  int depthOf(int64_t node) const;
  std::vector<Node> nodes_;
};

/// Gradient-boosted trees for the squared error: F_0 = mean(y), then each
/// of `trees` depth-limited trees fits the residuals y - F_{m-1} and
/// F_m = F_{m-1} + lr · tree_m (scikit-learn's GradientBoostingRegressor
/// with subsample 1).
class BoostedTrees {
public:
  void fit(const double *xs, const double *ys, int64_t n, int64_t d, int trees, int maxDepth,
           double lr);
  double predict(const double *x) const;

private:
  double init_ = 0, lr_ = 0.1;
  std::vector<RegressionTree> trees_;
};

/// A 2-layer ReLU network f(x) = sum_h a_h relu(w_h · x + c_h) + b trained
/// on the mean squared error by full-batch Adam. Parameters, flat:
/// W [hidden, d], c [hidden], a [hidden], b.
struct TwoLayerNet {
  int64_t d = 0, hidden = 100;
  std::vector<double> params;
  /// N(0, 1/d) first layer, N(0, 1/hidden) second, zero biases; fixed seed.
  void init(int64_t dim, int64_t hiddenUnits, uint64_t seed);
  double predict(const double *x) const;
  /// Mean squared error over n examples and its gradient (same layout).
  double lossGrad(const double *xs, const double *ys, int64_t n, std::vector<double> &grad) const;
  /// `steps` full-batch Adam steps (betas 0.9, 0.999, eps 1e-8).
  void train(const double *xs, const double *ys, int64_t n, int steps, double lr);
};

/// In-context predictions of the tree baselines and the network, fitted on
/// the examples before each position (position 0 predicts 0). `positions`
/// lists which to fit (the rest are NaN); empty means all.
std::vector<double> treePreds(const double *xs, const double *ys, int64_t k, int64_t d,
                              int maxDepth, const std::vector<int64_t> &positions = {});
std::vector<double> boostedTreePreds(const double *xs, const double *ys, int64_t k, int64_t d,
                                     const std::vector<int64_t> &positions = {}, int trees = 50,
                                     int maxDepth = 4, double lr = 0.1);
std::vector<double> twoLayerNetPreds(const double *xs, const double *ys, int64_t k, int64_t d,
                                     const std::vector<int64_t> &positions = {},
                                     int64_t hidden = 100, int steps = 300, double lr = 5e-3);

/// Solves A w = b for a symmetric positive definite d x d A (Cholesky, in
/// place); false if A is not positive definite.
bool solveSPD(std::vector<double> &a, std::vector<double> &b, int64_t d);

} // namespace unroll

#endif
