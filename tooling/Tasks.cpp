//===- Tasks.cpp ----------------------------------------------------------===//
#include "unroll/tooling/Tasks.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

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

uint64_t unroll::promptSeed(uint64_t seed, int64_t step, int64_t index) {
  // splitmix64 over the three words: nearby (step, index) pairs give
  // unrelated engine seeds.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(seed) ^ static_cast<uint64_t>(step)) ^ static_cast<uint64_t>(index));
}

namespace {
/// x ~ N(0, I) on the first `active` coordinates, 0 elsewhere.
void drawX(double *x, int64_t dim, int64_t active, Rng &rng) {
  for (int64_t c = 0; c < dim; ++c)
    x[c] = c < active ? rng.normal() : 0.0;
}

// One prompt each: xs [points, dim] and ys [points], zero-initialized.

void linearPrompt(double *xs, double *ys, int64_t points, int64_t dim, int64_t active, double noise,
                  std::vector<double> &w, Rng &rng) {
  w.resize(dim);
  for (int64_t c = 0; c < dim; ++c)
    w[c] = c < active ? rng.normal() : 0.0;
  for (int64_t i = 0; i < points; ++i) {
    double y = 0;
    double *x = &xs[i * dim];
    for (int64_t c = 0; c < active; ++c) {
      x[c] = rng.normal();
      y += x[c] * w[c];
    }
    ys[i] = y + (noise > 0 ? noise * rng.normal() : 0.0);
  }
}

void sparseLinearPrompt(double *xs, double *ys, int64_t points, int64_t dim, int64_t active,
                        int64_t nonzero, std::vector<double> &w, std::vector<int64_t> &idx,
                        Rng &rng) {
  // A uniform `nonzero`-subset of the active coordinates (partial shuffle).
  w.assign(dim, 0.0);
  idx.resize(active);
  for (int64_t c = 0; c < active; ++c)
    idx[c] = c;
  for (int64_t j = 0; j < std::min(nonzero, active); ++j) {
    int64_t r = j + rng.below(active - j);
    std::swap(idx[j], idx[r]);
    w[idx[j]] = rng.normal();
  }
  for (int64_t i = 0; i < points; ++i) {
    double *x = &xs[i * dim];
    drawX(x, dim, active, rng);
    double y = 0;
    for (int64_t c = 0; c < active; ++c)
      y += x[c] * w[c];
    ys[i] = y;
  }
}

void decisionTreePrompt(double *xs, double *ys, int64_t points, int64_t dim, int64_t active,
                        int64_t depth, std::vector<int64_t> &split, std::vector<double> &leaf,
                        Rng &rng) {
  int64_t internal = (int64_t(1) << depth) - 1, leaves = int64_t(1) << depth;
  split.resize(internal);
  leaf.resize(leaves);
  for (int64_t &s : split)
    s = rng.below(active);
  for (double &v : leaf)
    v = rng.normal();
  for (int64_t i = 0; i < points; ++i) {
    double *x = &xs[i * dim];
    drawX(x, dim, active, rng);
    int64_t node = 0; // heap order: children of n are 2n+1 (x <= 0), 2n+2
    for (int64_t l = 0; l < depth; ++l)
      node = 2 * node + (x[split[node]] <= 0 ? 1 : 2);
    ys[i] = leaf[node - internal];
  }
}

void reluNetPrompt(double *xs, double *ys, int64_t points, int64_t dim, int64_t active,
                   int64_t hidden, std::vector<double> &w1, std::vector<double> &w2, Rng &rng) {
  w1.resize(active * hidden);
  w2.resize(hidden);
  double scale = std::sqrt(2.0 / hidden);
  for (double &v : w1)
    v = rng.normal();
  for (double &v : w2)
    v = rng.normal();
  for (int64_t i = 0; i < points; ++i) {
    double *x = &xs[i * dim];
    drawX(x, dim, active, rng);
    double y = 0;
    for (int64_t h = 0; h < hidden; ++h) {
      double z = 0;
      for (int64_t c = 0; c < active; ++c)
        z += x[c] * w1[c * hidden + h];
      y += std::max(z, 0.0) * w2[h];
    }
    ys[i] = scale * y;
  }
}

/// A task's prompt family, with its parameter (nonzero weights, tree depth,
/// hidden units) and the scratch its draws reuse: one prompt per call.
struct Drawer {
  enum Kind { Linear, Sparse, Tree, Relu } kind;
  int64_t points, dim, active, param = 0;
  double noise = 0;
  std::vector<double> a, b;
  std::vector<int64_t> idx;
  void operator()(double *x, double *y, Rng &r) {
    switch (kind) {
    case Linear:
      return linearPrompt(x, y, points, dim, active, noise, a, r);
    case Sparse:
      return sparseLinearPrompt(x, y, points, dim, active, param, a, idx, r);
    case Tree:
      return decisionTreePrompt(x, y, points, dim, active, param, idx, a, r);
    case Relu:
      return reluNetPrompt(x, y, points, dim, active, param, a, b, r);
    }
  }
};

Drawer drawerFor(const std::string &task, int64_t points, int64_t dim, int64_t active,
                 double noise) {
  if (task == "icl_sparse_linear")
    return {Drawer::Sparse, points, dim, active, 3};
  if (task == "icl_decision_tree")
    return {Drawer::Tree, points, dim, active, 4};
  if (task == "icl_relu2nn")
    return {Drawer::Relu, points, dim, active, 100};
  return {Drawer::Linear, points, dim, active, 0, noise};
}

/// `batch` prompts, prompt b drawn from rngFor(b).
template <typename RngFor> Prompts batchOf(int64_t batch, Drawer d, RngFor rngFor) {
  Prompts p{batch, d.points, d.dim, std::vector<double>(batch * d.points * d.dim, 0.0),
            std::vector<double>(batch * d.points, 0.0)};
  for (int64_t b = 0; b < batch; ++b)
    d(&p.xs[b * d.points * d.dim], &p.ys[b * d.points], rngFor(b));
  return p;
}

/// One after another from one engine.
Prompts sequential(int64_t batch, Drawer d, Rng &rng) {
  return batchOf(batch, std::move(d), [&](int64_t) -> Rng & { return rng; });
}
} // namespace

Prompts unroll::sampleLinear(int64_t batch, int64_t points, int64_t dim, int64_t active,
                             double noise, Rng &rng) {
  return sequential(batch, {Drawer::Linear, points, dim, active, 0, noise}, rng);
}

Prompts unroll::sampleSparseLinear(int64_t batch, int64_t points, int64_t dim, int64_t active,
                                   int64_t nonzero, Rng &rng) {
  return sequential(batch, {Drawer::Sparse, points, dim, active, nonzero}, rng);
}

Prompts unroll::sampleDecisionTree(int64_t batch, int64_t points, int64_t dim, int64_t active,
                                   int64_t depth, Rng &rng) {
  return sequential(batch, {Drawer::Tree, points, dim, active, depth}, rng);
}

Prompts unroll::sampleReluNet(int64_t batch, int64_t points, int64_t dim, int64_t active,
                              int64_t hidden, Rng &rng) {
  return sequential(batch, {Drawer::Relu, points, dim, active, hidden}, rng);
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
  return sequential(batch, drawerFor(name, points, dim, active, noise), rng);
}

Prompts TaskSpec::sampleAt(uint64_t seed, int64_t step, int64_t first, int64_t count,
                           int64_t points, int64_t dim, int64_t active, double noise) const {
  // Each prompt from its own engine: the same prompt whichever rank or
  // chunk of the batch draws it.
  Rng rng;
  return batchOf(count, drawerFor(name, points, dim, active, noise), [&](int64_t b) -> Rng & {
    rng = Rng(promptSeed(seed, step, first + b));
    return rng;
  });
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
