//===- TrainingTest.cpp - Adam, baselines, curricula, checkpoints ---------===//
#include "unroll/tooling/Adam.h"
#include "unroll/tooling/Baselines.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Safetensors.h"
#include "unroll/tooling/Tasks.h"
#include "unroll/tooling/Evaluate.h"
#include "unroll/tooling/Train.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <unistd.h>

using namespace unroll;

// Three steps against torch.optim.Adam(lr=0.1, betas=(0.9, 0.999), eps=1e-8)
// in float64 (PyTorch 1.13), numbers printed by PyTorch.
TEST(Adam, MatchesPyTorch) {
  Adam a;
  a.lr = 0.1;
  std::vector<double> th{0.5, -1.0, 2.0};
  std::vector<std::vector<double>> g{{0.3, -0.2, 0.0}, {0.1, 0.4, -1.0}, {-0.5, 0.05, 2.0}};
  std::vector<std::vector<double>> want{
      {0.4000000033333332, -0.9000000049999998, 2.0},
      {0.3128936121571956, -0.9366103565460369, 2.074413681304593},
      {0.33093103329816115, -0.9718369601785837, 2.0429850645985463}};
  for (int s = 0; s < 3; ++s) {
    a.update(th, g[s]);
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(th[i], want[s][i], 1e-15) << "step " << s + 1 << " entry " << i;
  }
}

// The first step is -lr·g/(|g| + eps) by hand: bias correction cancels
// (1 - β1) and (1 - β2), so |step| = lr whatever |g|, up to eps.
TEST(Adam, FirstStepIsSignStep) {
  Adam a;
  a.lr = 0.01;
  std::vector<double> th{0, 0}, g{1e-3, -50};
  a.update(th, g);
  EXPECT_NEAR(th[0], -0.01 * 1e-3 / (1e-3 + 1e-8), 1e-15);
  EXPECT_NEAR(th[1], 0.01 * 50 / (50 + 1e-8), 1e-15);
}

TEST(Baselines, SolveSPD) {
  // A = [[4, 2], [2, 3]], b = A [1, -2] = [0, -4].
  std::vector<double> a{4, 2, 2, 3}, b{0, -4};
  ASSERT_TRUE(solveSPD(a, b, 2));
  EXPECT_NEAR(b[0], 1, 1e-14);
  EXPECT_NEAR(b[1], -2, 1e-14);
}

// Noiseless linear data: least squares is exact once it has d examples.
TEST(Baselines, LeastSquaresIsExactFromDExamples) {
  Rng rng(3);
  int64_t d = 5, k = 12;
  Prompts p = sampleLinear(1, k, d, d, 0.0, rng);
  auto pred = leastSquaresPreds(p.xs.data(), p.ys.data(), k, d);
  for (int64_t i = d; i < k; ++i)
    EXPECT_NEAR(pred[i], p.ys[i], 1e-6 * (1 + std::abs(p.ys[i]))) << "k = " << i;
  // With fewer examples it is the minimum-norm solution: in the span of the
  // examples, so it predicts 0 for an x orthogonal to them.
  std::vector<double> xs{1, 0, 0, 0, 1, 0}, ys{2, 0};
  auto q = leastSquaresPreds(xs.data(), ys.data(), 2, 3);
  EXPECT_NEAR(q[1], 0.0, 1e-9);
}

TEST(Baselines, AveragingAndNearestNeighbours) {
  // d = 1: x = 1, 2, 3, 4; y = 2x.
  std::vector<double> xs{1, 2, 3, 4}, ys{2, 4, 6, 8};
  auto av = averagingPreds(xs.data(), ys.data(), 4, 1);
  // w after i examples = mean(x y) = mean(2x²): i=1: 2, i=2: 5, i=3: 28/3.
  EXPECT_DOUBLE_EQ(av[0], 0.0);
  EXPECT_DOUBLE_EQ(av[1], 2.0 * 2);
  EXPECT_DOUBLE_EQ(av[2], 5.0 * 3);
  EXPECT_NEAR(av[3], 28.0 / 3 * 4, 1e-12);
  auto nn = nearestNeighborPreds(xs.data(), ys.data(), 4, 1, 3);
  EXPECT_DOUBLE_EQ(nn[1], 2.0); // the only example
  EXPECT_DOUBLE_EQ(nn[2], 3.0); // mean of 2, 4
  EXPECT_DOUBLE_EQ(nn[3], 4.0); // mean of 2, 4, 6
}

TEST(Tasks, CurriculumAndInactiveDims) {
  Curriculum c{5, 20, 1, 2000};
  EXPECT_EQ(c.at(0), 5);
  EXPECT_EQ(c.at(1999), 5);
  EXPECT_EQ(c.at(2000), 6);
  EXPECT_EQ(c.at(10000000), 20);
  Rng rng(1);
  Prompts p = sampleLinear(2, 3, 6, 4, 0.0, rng);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c2 = 4; c2 < 6; ++c2)
      EXPECT_EQ(p.xs[r * 6 + c2], 0.0) << "inactive coordinates are zero";
}

TEST(Tasks, RngStateRoundTrip) {
  Rng a(42);
  for (int i = 0; i < 10; ++i)
    a.normal();
  std::string s = a.save();
  Rng b;
  ASSERT_TRUE(b.restore(s));
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(a.normal(), b.normal());
}

namespace {
nlohmann::json twoParams() {
  return {{"num_params", 6},
          {"params",
           {{{"name", "a.weight"}, {"shape", {2, 2}}, {"offset", 0}},
            {{"name", "a.bias"}, {"shape", {2}}, {"offset", 4}}}}};
}
} // namespace

TEST(Checkpoint, RoundTripIsBitExactAndKeepsOnlyTheLatest) {
  std::string dir = ::testing::TempDir() + "unroll_ckpt_" + std::to_string(getpid()), err;
  auto info = twoParams();
  TrainState s;
  s.step = 7;
  s.theta = {0.1, 1.0 / 3, -2.5, 1e-9, 3.0, -0.25};
  s.adam.lr = 0.01;
  s.adam.update(s.theta, {1, 2, 3, 4, 5, 6});
  Rng rng(9);
  rng.normal();
  s.rng = rng.save();
  ASSERT_TRUE(saveCheckpoint(dir, info, s, {{"steps", 10}}, err)) << err;
  s.step = 8;
  ASSERT_TRUE(saveCheckpoint(dir, info, s, {{"steps", 10}}, err)) << err;
  TrainState r;
  nlohmann::json cfg;
  ASSERT_TRUE(loadCheckpoint(dir, info, r, cfg, err)) << err;
  EXPECT_EQ(r.step, 8);
  EXPECT_EQ(r.theta, s.theta); // F64 master weights: exact
  EXPECT_EQ(r.adam.m, s.adam.m);
  EXPECT_EQ(r.adam.v, s.adam.v);
  EXPECT_EQ(r.adam.step, s.adam.step);
  EXPECT_EQ(r.rng, s.rng);
  EXPECT_EQ(cfg["steps"], 10);
  EXPECT_NE(access((dir + "/ckpt-0000008/model.safetensors").c_str(), F_OK), -1);
  EXPECT_EQ(access((dir + "/ckpt-0000007").c_str(), F_OK), -1) << "older steps are removed";
  // The model file holds P2-named F32 tensors.
  std::vector<double> theta;
  ASSERT_TRUE(loadParameters(dir, info, theta, err)) << err;
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(theta[i], (double)(float)s.theta[i]);
}

TEST(Checkpoint, ErrorsNameTheProblem) {
  std::string dir = ::testing::TempDir() + "unroll_ckpt_bad_" + std::to_string(getpid()), err;
  auto info = twoParams();
  TrainState r;
  nlohmann::json cfg;
  EXPECT_FALSE(loadCheckpoint(dir, info, r, cfg, err));
  EXPECT_NE(err.find("no checkpoint here"), std::string::npos) << err;
  // A model file missing a parameter.
  std::string f = dir + ".safetensors";
  TensorMap t;
  t["a.weight"] = {{2, 2}, {1, 2, 3, 4}};
  ASSERT_TRUE(writeSafetensors(f, t, "F32", err));
  std::vector<double> theta;
  EXPECT_FALSE(loadParameters(f, info, theta, err));
  EXPECT_NE(err.find("has no tensor 'a.bias'"), std::string::npos) << err;
  // A wrong shape.
  t["a.bias"] = {{3}, {1, 2, 3}};
  ASSERT_TRUE(writeSafetensors(f, t, "F32", err));
  EXPECT_FALSE(loadParameters(f, info, theta, err));
  EXPECT_NE(err.find("tensor 'a.bias' has shape [3], the model expects [2]"), std::string::npos)
      << err;
  // An extra tensor.
  t["a.bias"] = {{2}, {1, 2}};
  t["extra"] = {{1}, {0}};
  ASSERT_TRUE(writeSafetensors(f, t, "F32", err));
  EXPECT_FALSE(loadParameters(f, info, theta, err));
  EXPECT_NE(err.find("has tensor 'extra' that the model does not have"), std::string::npos) << err;
  // NaN weights.
  t.erase("extra");
  t["a.bias"] = {{2}, {NAN, 0}};
  ASSERT_TRUE(writeSafetensors(f, t, "F32", err));
  EXPECT_FALSE(loadParameters(f, info, theta, err));
  EXPECT_NE(err.find("tensor 'a.bias' holds nan at [0]"), std::string::npos) << err;
  unlink(f.c_str());
}

// P2's other tasks, checked through properties of the functions they sample
// (computed here, not by the samplers): the zero predictor's error E[y^2]
// that evaluation divides by, sparsity, sign-split trees.
TEST(Tasks, ZeroPredictorErrorMatchesMonteCarlo) {
  std::string known;
  for (const char *name : {"icl_linear", "icl_noisy_linear", "icl_sparse_linear",
                           "icl_decision_tree", "icl_relu2nn"}) {
    const TaskSpec *t = findTask(name, known);
    ASSERT_NE(t, nullptr) << name;
    Rng rng(3);
    int64_t active = 8;
    Prompts p = t->sample(4000, 8, 10, active, t->noise, rng);
    double m = 0;
    for (double y : p.ys)
      m += y * y;
    m /= p.ys.size();
    // 32,000 draws (4,000 functions): within 6% of the task's constant.
    EXPECT_NEAR(m / t->zeroError(active, t->noise), 1.0, 0.06) << name;
    for (int64_t i = 0; i < p.batch * p.points; ++i)
      for (int64_t c = active; c < 10; ++c)
        ASSERT_EQ(p.xs[i * 10 + c], 0.0) << name << ": inactive coordinate";
  }
  EXPECT_EQ(findTask("icl_sorting", known), nullptr);
  EXPECT_NE(known.find("icl_relu2nn"), std::string::npos);
}

TEST(Tasks, SparseLinearHasThreeNonzeroWeights) {
  Rng rng(5);
  int64_t d = 12, n = 40;
  Prompts p = sampleSparseLinear(20, n, d, d, 3, rng);
  for (int64_t b = 0; b < p.batch; ++b) {
    // Least squares recovers w exactly from n > d noiseless points.
    std::vector<double> A(d * d, 0.0), rhs(d, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double *x = &p.xs[(b * n + i) * d];
      for (int64_t r = 0; r < d; ++r) {
        rhs[r] += x[r] * p.ys[b * n + i];
        for (int64_t c = 0; c < d; ++c)
          A[r * d + c] += x[r] * x[c];
      }
    }
    ASSERT_TRUE(solveSPD(A, rhs, d)); // rhs becomes w
    int nonzero = 0;
    for (double v : rhs)
      nonzero += std::abs(v) > 1e-8;
    EXPECT_EQ(nonzero, 3) << "prompt " << b;
  }
}

TEST(Tasks, DecisionTreeDependsOnlyOnSigns) {
  Rng rng(7);
  int64_t d = 3, n = 400; // 8 sign patterns, 400 points: every pattern repeats
  Prompts p = sampleDecisionTree(10, n, d, d, 4, rng);
  for (int64_t b = 0; b < p.batch; ++b) {
    std::map<int, double> byPattern;
    std::set<double> values;
    for (int64_t i = 0; i < n; ++i) {
      const double *x = &p.xs[(b * n + i) * d];
      int pat = (x[0] > 0) | (x[1] > 0) << 1 | (x[2] > 0) << 2;
      double y = p.ys[b * n + i];
      values.insert(y);
      auto [it, fresh] = byPattern.emplace(pat, y);
      EXPECT_TRUE(fresh || it->second == y) << "same signs, different leaves";
    }
    EXPECT_LE(values.size(), 16u); // depth 4: at most 16 leaves
  }
}

TEST(Evaluation, BootstrapBandsMatchTheNormalApproximation) {
  // Bernoulli(0.5) errors over 1000 prompts: the mean's 5–95% interval is
  // 0.5 ± 1.645·sqrt(0.25/1000) = 0.5 ± 0.026.
  int64_t prompts = 1000, k = 2;
  std::vector<double> errs(prompts * k);
  Rng rng(11);
  for (int64_t p = 0; p < prompts; ++p) {
    errs[p * k] = rng.uniform() < 0.5 ? 1.0 : 0.0;
    errs[p * k + 1] = 2.0; // constant: the band collapses to the mean
  }
  double mean = 0;
  for (int64_t p = 0; p < prompts; ++p)
    mean += errs[p * k];
  mean /= prompts;
  std::vector<double> lo, hi;
  bootstrapBands(errs, prompts, k, 1.0, 1000, 0, lo, hi);
  EXPECT_NEAR(mean - lo[0], 0.026, 0.005);
  EXPECT_NEAR(hi[0] - mean, 0.026, 0.005);
  EXPECT_DOUBLE_EQ(lo[1], 2.0);
  EXPECT_DOUBLE_EQ(hi[1], 2.0);
}

// The Lasso solution is characterized by its KKT conditions (independent of
// how it was found): with r = y − Xw and g = Xᵀr / n, g_j = alpha·sign(w_j)
// where w_j ≠ 0 and |g_j| <= alpha where w_j = 0.
TEST(Baselines, LassoSatisfiesKKT) {
  Rng rng(13);
  int64_t n = 30, d = 10;
  for (double alpha : {0.01, 0.1, 0.5}) {
    Prompts p = sampleSparseLinear(1, n, d, d, 3, rng);
    for (double &y : p.ys)
      y += 0.1 * rng.normal();
    std::vector<double> w = lasso(p.xs.data(), p.ys.data(), n, d, alpha);
    std::vector<double> r(p.ys);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c)
        r[i] -= p.xs[i * d + c] * w[c];
    int zeros = 0;
    for (int64_t c = 0; c < d; ++c) {
      double g = 0;
      for (int64_t i = 0; i < n; ++i)
        g += p.xs[i * d + c] * r[i];
      g /= n;
      if (w[c] != 0)
        EXPECT_NEAR(g, alpha * (w[c] > 0 ? 1 : -1), 1e-8) << "alpha " << alpha << ", w_" << c;
      else {
        EXPECT_LE(std::abs(g), alpha + 1e-8) << "alpha " << alpha << ", w_" << c;
        ++zeros;
      }
    }
    if (alpha == 0.5) {
      EXPECT_GT(zeros, 0) << "a large alpha zeroes coordinates";
    }
  }
  // alpha -> 0 with n > d: the least-squares solution.
  Prompts p = sampleLinear(1, 40, 5, 5, 0.0, rng);
  std::vector<double> w = lasso(p.xs.data(), p.ys.data(), 40, 5, 1e-12, 1e-14, 100000);
  std::vector<double> ls = leastSquaresPreds(p.xs.data(), p.ys.data(), 40, 5);
  double pred = 0;
  for (int64_t c = 0; c < 5; ++c)
    pred += w[c] * p.xs[39 * 5 + c];
  EXPECT_NEAR(pred, ls[39], 1e-6);
}

TEST(Baselines, TwoLayerNetGradientMatchesFiniteDifferences) {
  // Central differences of the loss against the analytic gradient, at a
  // point where no hidden unit sits on the ReLU kink.
  int64_t d = 4, n = 7;
  std::vector<double> xs(n * d), ys(n);
  for (int64_t i = 0; i < n * d; ++i)
    xs[i] = std::sin(1.7 * i + 0.3);
  for (int64_t i = 0; i < n; ++i)
    ys[i] = std::cos(0.9 * i);
  TwoLayerNet net;
  net.init(d, 6, 3);
  for (size_t i = net.hidden * d; i < net.params.size(); ++i)
    net.params[i] += 0.1; // biases too
  std::vector<double> g, dummy;
  net.lossGrad(xs.data(), ys.data(), n, g);
  double worst = 0;
  for (size_t i = 0; i < net.params.size(); ++i) {
    double h = 1e-6, keep = net.params[i];
    net.params[i] = keep + h;
    double up = net.lossGrad(xs.data(), ys.data(), n, dummy);
    net.params[i] = keep - h;
    double down = net.lossGrad(xs.data(), ys.data(), n, dummy);
    net.params[i] = keep;
    worst = std::max(worst, std::abs((up - down) / (2 * h) - g[i]) / (std::abs(g[i]) + 1e-3));
  }
  EXPECT_LT(worst, 1e-6);
}

TEST(Baselines, TreesSplitExactlyWhereAStumpWould) {
  // Depth 1 by brute force: every feature and every midpoint, the split
  // with the smallest squared error; the tree must predict the same means.
  int64_t n = 30, d = 3;
  std::vector<double> xs(n * d), ys(n);
  for (int64_t i = 0; i < n * d; ++i)
    xs[i] = std::sin(2.3 * i * i + 1.1);
  for (int64_t i = 0; i < n; ++i)
    ys[i] = (xs[i * d + 1] > 0.2 ? 2.0 : -1.0) + 0.1 * std::cos(3.1 * i);
  double bestErr = 1e300, bestT = 0, lMean = 0, rMean = 0;
  int64_t bestF = -1;
  for (int64_t f = 0; f < d; ++f)
    for (int64_t a = 0; a < n; ++a) {
      double t = xs[a * d + f]; // splitting at a value puts it left: same partition as a midpoint
      double sl = 0, sr = 0, nl = 0, nr = 0;
      for (int64_t i = 0; i < n; ++i)
        (xs[i * d + f] <= t ? (sl += ys[i], nl += 1) : (sr += ys[i], nr += 1));
      if (nl == 0 || nr == 0)
        continue;
      double err = 0;
      for (int64_t i = 0; i < n; ++i) {
        double m = xs[i * d + f] <= t ? sl / nl : sr / nr;
        err += (ys[i] - m) * (ys[i] - m);
      }
      if (err < bestErr - 1e-12)
        bestErr = err, bestF = f, bestT = t, lMean = sl / nl, rMean = sr / nr;
    }
  RegressionTree tree;
  tree.fit(xs.data(), ys.data(), n, d, 1);
  EXPECT_EQ(tree.depth(), 1);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(tree.predict(&xs[i * d]), xs[i * d + bestF] <= bestT ? lMean : rMean, 1e-12);
  // Unlimited depth fits distinct inputs exactly; boosting's training error
  // shrinks with every tree.
  RegressionTree full;
  full.fit(xs.data(), ys.data(), n, d, -1);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(full.predict(&xs[i * d]), ys[i], 1e-12);
  double prev = 1e300;
  for (int trees : {1, 5, 20, 50}) {
    BoostedTrees bt;
    bt.fit(xs.data(), ys.data(), n, d, trees, 2, 0.1);
    double err = 0;
    for (int64_t i = 0; i < n; ++i)
      err += std::pow(bt.predict(&xs[i * d]) - ys[i], 2);
    EXPECT_LT(err, prev);
    prev = err;
  }
}

// Training prompts depend on (seed, step, index) only: any split of a
// step's batch over ranks or chunks draws the same prompts.
TEST(Tasks, PromptsOfAStepDoNotDependOnTheSplit) {
  std::string known;
  for (const char *name : {"icl_linear", "icl_sparse_linear", "icl_decision_tree", "icl_relu2nn"}) {
    const TaskSpec *t = findTask(name, known);
    ASSERT_NE(t, nullptr);
    Prompts whole = t->sampleAt(7, 12, 0, 8, 11, 5, 5, 0.0);
    Prompts a = t->sampleAt(7, 12, 0, 3, 11, 5, 5, 0.0),
            b = t->sampleAt(7, 12, 3, 5, 11, 5, 5, 0.0);
    std::vector<double> xs = a.xs, ys = a.ys;
    xs.insert(xs.end(), b.xs.begin(), b.xs.end());
    ys.insert(ys.end(), b.ys.begin(), b.ys.end());
    EXPECT_EQ(xs, whole.xs) << name;
    EXPECT_EQ(ys, whole.ys) << name;
    // Another step, seed or index draws other prompts.
    EXPECT_NE(t->sampleAt(7, 13, 0, 8, 11, 5, 5, 0.0).xs, whole.xs) << name;
    EXPECT_NE(t->sampleAt(8, 12, 0, 8, 11, 5, 5, 0.0).xs, whole.xs) << name;
    EXPECT_NE(t->sampleAt(7, 12, 1, 8, 11, 5, 5, 0.0).xs, whole.xs) << name;
  }
}

// The learning-rate schedule against its closed forms.
TEST(Training, LearningRateSchedules) {
  TrainConfig c;
  c.lr = 3e-3;
  c.lrMin = 1e-5;
  c.steps = 1000;
  c.warmupSteps = 100;
  EXPECT_DOUBLE_EQ(c.lrAt(0), 3e-3 / 100); // the warm-up's first step
  EXPECT_DOUBLE_EQ(c.lrAt(49), 3e-3 * 50 / 100);
  EXPECT_DOUBLE_EQ(c.lrAt(99), 3e-3);
  EXPECT_DOUBLE_EQ(c.lrAt(500), 3e-3); // constant after the warm-up
  c.lrSchedule = "cosine";
  EXPECT_DOUBLE_EQ(c.lrAt(100), 3e-3);
  EXPECT_NEAR(c.lrAt(999), 1e-5, 1e-18); // the last step ends at lr_min
  // Halfway through the decay: the mean of the two ends.
  double t = (c.lrAt(549) + c.lrAt(550)) / 2;
  EXPECT_NEAR(t, (3e-3 + 1e-5) / 2, 1e-5);
  for (int64_t s = 101; s < 1000; ++s)
    EXPECT_LE(c.lrAt(s), c.lrAt(s - 1)); // never rises again
  c.lrSchedule = "linear";
  EXPECT_NEAR(c.lrAt(549), 3e-3 + (1e-5 - 3e-3) * 449.0 / 899, 1e-15);
  EXPECT_NEAR(c.lrAt(999), 1e-5, 1e-18);
}

// Micro-batches: the plan covers the batch in order, with non-empty chunks
// of at most the token target (where a prompt fits it) that differ by at
// most one prompt within a thread's share, and livePrompts (computed, not
// planned) is each share's largest chunk summed over the shares.
TEST(MicroBatches, PlanCoversTheBatch) {
  for (int threads : {1, 2, 3, 8})
    for (int64_t tokens : {0, 1, 16, 100, 1536})
      for (int64_t batch : {1, 2, 5, 7, 64, 100})
        for (int64_t points : {1, 4, 11, 41}) {
          ModelRunner run;
          run.setThreads(threads);
          run.setMicroBatchTokens(tokens);
          Prompts p{batch, points, 1, {}, {}};
          auto plan = run.plan(p);
          ASSERT_LE((int64_t)plan.size(), std::min<int64_t>(threads, batch));
          int64_t next = 0, live = 0;
          for (const auto &share : plan) {
            int64_t most = 0, least = batch;
            for (auto [b0, b1] : share) {
              ASSERT_EQ(b0, next);
              ASSERT_GT(b1, b0);
              if (tokens > 0 && 2 * points <= tokens)
                EXPECT_LE((b1 - b0) * 2 * points, tokens);
              most = std::max(most, b1 - b0);
              least = std::min(least, b1 - b0);
              next = b1;
            }
            EXPECT_LE(most - least, 1);
            if (tokens == 0)
              EXPECT_EQ(share.size(), 1u);
            live += most;
          }
          EXPECT_EQ(next, batch);
          size_t calls = 0;
          for (const auto &share : plan)
            calls += share.size();
          EXPECT_EQ(run.oneCall(p), calls == 1);
          EXPECT_EQ(run.livePrompts(batch, points), live)
              << "threads " << threads << ", tokens " << tokens << ", batch " << batch
              << ", points " << points;
        }
}

// A hostile batch is estimated, never planned.
TEST(MicroBatches, LivePromptsOfAHugeBatch) {
  ModelRunner run;
  run.setThreads(2);
  run.setMicroBatchTokens(1536);
  EXPECT_EQ(run.livePrompts(100000000000, 11), 2 * 69); // 1536 / 22 = 69 prompts per chunk
}
