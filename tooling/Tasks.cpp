//===- Tasks.cpp ----------------------------------------------------------===//
#include "unroll/tooling/Tasks.h"

#include <algorithm>
#include <cmath>
#include <sstream>

using namespace unroll;

std::string Rng::save() const {
  std::ostringstream os;
  os << eng_;
  return os.str();
}

bool Rng::restore(const std::string &s) {
  std::istringstream is(s);
  is >> eng_;
  return !is.fail();
}

Prompts unroll::sampleLinear(int64_t batch, int64_t points, int64_t dim, int64_t active,
                             double noise, Rng &rng) {
  Prompts p{batch, points, dim, std::vector<double>(batch * points * dim, 0.0),
            std::vector<double>(batch * points, 0.0)};
  std::vector<double> w(dim);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < dim; ++c)
      w[c] = c < active ? rng.normal() : 0.0;
    for (int64_t i = 0; i < points; ++i) {
      double y = 0;
      double *x = &p.xs[(b * points + i) * dim];
      for (int64_t c = 0; c < active; ++c) {
        x[c] = rng.normal();
        y += x[c] * w[c];
      }
      p.ys[b * points + i] = y + (noise > 0 ? noise * rng.normal() : 0.0);
    }
  }
  return p;
}

namespace {
/// x ~ N(0, I) on the first `active` coordinates, 0 elsewhere.
void drawX(double *x, int64_t dim, int64_t active, Rng &rng) {
  for (int64_t c = 0; c < dim; ++c)
    x[c] = c < active ? rng.normal() : 0.0;
}
} // namespace

Prompts unroll::sampleSparseLinear(int64_t batch, int64_t points, int64_t dim, int64_t active,
                                   int64_t nonzero, Rng &rng) {
  Prompts p{batch, points, dim, std::vector<double>(batch * points * dim, 0.0),
            std::vector<double>(batch * points, 0.0)};
  std::vector<double> w(dim);
  std::vector<int64_t> idx(active);
  for (int64_t b = 0; b < batch; ++b) {
    // A uniform `nonzero`-subset of the active coordinates (partial shuffle).
    for (int64_t c = 0; c < active; ++c)
      idx[c] = c;
    std::fill(w.begin(), w.end(), 0.0);
    for (int64_t j = 0; j < std::min(nonzero, active); ++j) {
      int64_t r = j + rng.below(active - j);
      std::swap(idx[j], idx[r]);
      w[idx[j]] = rng.normal();
    }
    for (int64_t i = 0; i < points; ++i) {
      double *x = &p.xs[(b * points + i) * dim];
      drawX(x, dim, active, rng);
      double y = 0;
      for (int64_t c = 0; c < active; ++c)
        y += x[c] * w[c];
      p.ys[b * points + i] = y;
    }
  }
  return p;
}

Prompts unroll::sampleDecisionTree(int64_t batch, int64_t points, int64_t dim, int64_t active,
                                   int64_t depth, Rng &rng) {
  Prompts p{batch, points, dim, std::vector<double>(batch * points * dim, 0.0),
            std::vector<double>(batch * points, 0.0)};
  int64_t internal = (int64_t(1) << depth) - 1, leaves = int64_t(1) << depth;
  std::vector<int64_t> split(internal);
  std::vector<double> leaf(leaves);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t &s : split)
      s = rng.below(active);
    for (double &v : leaf)
      v = rng.normal();
    for (int64_t i = 0; i < points; ++i) {
      double *x = &p.xs[(b * points + i) * dim];
      drawX(x, dim, active, rng);
      int64_t node = 0; // heap order: children of n are 2n+1 (x <= 0), 2n+2
      for (int64_t l = 0; l < depth; ++l)
        node = 2 * node + (x[split[node]] <= 0 ? 1 : 2);
      p.ys[b * points + i] = leaf[node - internal];
    }
  }
  return p;
}

Prompts unroll::sampleReluNet(int64_t batch, int64_t points, int64_t dim, int64_t active,
                              int64_t hidden, Rng &rng) {
  Prompts p{batch, points, dim, std::vector<double>(batch * points * dim, 0.0),
            std::vector<double>(batch * points, 0.0)};
  std::vector<double> w1(active * hidden), w2(hidden);
  double scale = std::sqrt(2.0 / hidden);
  for (int64_t b = 0; b < batch; ++b) {
    for (double &v : w1)
      v = rng.normal();
    for (double &v : w2)
      v = rng.normal();
    for (int64_t i = 0; i < points; ++i) {
      double *x = &p.xs[(b * points + i) * dim];
      drawX(x, dim, active, rng);
      double y = 0;
      for (int64_t h = 0; h < hidden; ++h) {
        double z = 0;
        for (int64_t c = 0; c < active; ++c)
          z += x[c] * w1[c * hidden + h];
        y += std::max(z, 0.0) * w2[h];
      }
      p.ys[b * points + i] = scale * y;
    }
  }
  return p;
}

// Defaults from P2 (PAPERS.md): points curricula at d = 20, noise, and the
// zero predictor's error used for normalization.
static const TaskSpec kTasks[] = {
    {"icl_linear", 11, 41, 2, 0.0},        {"icl_noisy_linear", 11, 41, 2, 0.1},
    {"icl_sparse_linear", 11, 41, 2, 0.0}, {"icl_decision_tree", 26, 101, 5, 0.0},
    {"icl_relu2nn", 26, 101, 5, 0.0},
};

double TaskSpec::zeroError(int64_t active, double noise) const {
  if (name == "icl_sparse_linear")
    return std::min<int64_t>(3, active); // Σ of 3 N(0,1)^2 weights
  if (name == "icl_decision_tree")
    return 1.0; // a N(0,1) leaf
  // Linear: E[(x·w)^2] = active; ReLU net: (2/h)·h·E[relu(z)^2], z ~ N(0, active),
  // = active as well.
  return active + noise * noise;
}

Prompts TaskSpec::sample(int64_t batch, int64_t points, int64_t dim, int64_t active, double noise,
                         Rng &rng) const {
  if (name == "icl_sparse_linear")
    return sampleSparseLinear(batch, points, dim, active, 3, rng);
  if (name == "icl_decision_tree")
    return sampleDecisionTree(batch, points, dim, active, 4, rng);
  if (name == "icl_relu2nn")
    return sampleReluNet(batch, points, dim, active, 100, rng);
  return sampleLinear(batch, points, dim, active, noise, rng);
}

const TaskSpec *unroll::findTask(const std::string &name, std::string &known) {
  known.clear();
  for (const TaskSpec &t : kTasks) {
    if (t.name == name)
      return &t;
    known += (known.empty() ? "" : ", ") + t.name;
  }
  return nullptr;
}
