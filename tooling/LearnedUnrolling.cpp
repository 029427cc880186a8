//===- LearnedUnrolling.cpp - training LISTA, TiLISTA, ALISTA ... --------===//
//
// A learned unrolling (hand-written unroll.lista_step layers) on the sparse
// coding problem: its trained parameters start at ISTA, train with Adam on
// fresh batches through the compiled descent and its VJP (@E_descend,
// @E_descend_vjp), stage-wise as the reference code does or end to end,
// and are reported as NMSE per layer and saved as a checkpoint.
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/Energy.h"
#include "unroll/runtime/ModelInfo.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Distributed.h"
#include "unroll/tooling/OptimizationTasks.h"
#include "unroll/tooling/Plot.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Safetensors.h"

#include "OptimizationCommon.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace key = ::unroll::info;

using namespace unroll;
using namespace unroll::opt;

namespace {

/// The number of layers K of a learned unrolling: the length of its per-layer
/// step sizes (gamma: [K]); 0 when it has none.
int64_t layerCount(const nlohmann::json &e) {
  for (const auto &p : e[key::kParams])
    if (p.value(key::kName, "") == "gamma" && p[key::kShape].size() == 1)
      return p[key::kShape][0].get<int64_t>();
  return 0;
}

/// The layer each entry of θ belongs to: an entry of a per-layer parameter
/// ([K] or [K, ...]) to its layer, an entry of a shared one to layer 0 (the
/// first stage that trains it).
std::vector<int64_t> entryLayers(const nlohmann::json &e, size_t size) {
  std::vector<int64_t> layer(size, 0);
  int64_t K = layerCount(e);
  for (const auto &p : e[key::kParams]) {
    const auto &shape = p[key::kShape];
    int64_t off = p[key::kOffset], numel = 1;
    for (int64_t d : shape)
      numel *= d;
    bool perLayer = K > 1 && !shape.empty() && shape[0].get<int64_t>() == K &&
                    (shape.size() == 1 || shape.size() == 3);
    if (perLayer)
      for (int64_t i = 0; i < numel; ++i)
        layer[off + i] = i / (numel / K);
  }
  return layer;
}

/// Rows [r0, r1) of `in` (samples: a start where `in` has them, a
/// measurement), with its theta.
DescentInputs rowsOf(const DescentInputs &in, int64_t r0, int64_t r1) {
  DescentInputs out;
  out.rows = out.xRows = r1 - r0;
  out.cols = in.cols, out.xCols = in.xCols;
  out.theta = in.theta;
  if ((int64_t)in.y0.size() >= r1 * in.cols)
    out.y0.assign(in.y0.begin() + r0 * in.cols, in.y0.begin() + r1 * in.cols);
  out.x.assign(in.x.begin() + r0 * in.xCols, in.x.begin() + r1 * in.xCols);
  return out;
}

/// The descent of `in`'s rows (and, with `grad`, the gradient of
/// ½ Σ ‖Y_k − target‖² for the parameters) in near-equal row slices, one
/// thread each: the rows are independent samples, so this is the one-thread
/// result up to the order of the sums. `tr.y` holds the rows in order,
/// `tr.energies` and `grad` the sums over the slices. An unrolling written as
/// a model computes the energies only where `energies` asks for them, and
/// a training step in one forward and backward pass (modelDescentGrad);
/// with `everyLayer` (a model) `tr.layers` holds every layer's rows.
bool descendRows(const Model &m, const nlohmann::json &e, const DescentInputs &in, int64_t k,
                 int threads, const std::vector<double> *target, EnergyTrace &tr,
                 std::vector<double> *grad, std::string &error, bool energies = true,
                 bool everyLayer = false) {
  const bool ofModel = isUnrollingOfModel(e);
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, in.rows));
  struct Slice {
    DescentInputs in;
    EnergyTrace tr;
    std::vector<double> dy, dy0, dx, grad;
    std::string error;
    bool ok = false;
  };
  std::vector<Slice> slices(parts);
  auto run = [&](int64_t p) {
    Slice &sl = slices[p];
    int64_t r0 = in.rows * p / parts, r1 = in.rows * (p + 1) / parts;
    sl.in = rowsOf(in, r0, r1);
    if (ofModel && grad) {
      std::vector<double> t(target->begin() + r0 * in.cols, target->begin() + r1 * in.cols);
      sl.ok = modelDescentGrad(m, e, sl.in, k, t, sl.tr, sl.grad, sl.error);
      return;
    }
    if (ofModel ? !runModelDescent(m, e, sl.in, k, sl.tr, sl.error, energies && !grad, everyLayer)
                : !runEnergyDescent(m, e, sl.in, k, sl.tr, sl.error))
      return;
    if (grad) {
      sl.dy.resize(sl.tr.y.size());
      for (size_t i = 0; i < sl.dy.size(); ++i)
        sl.dy[i] = sl.tr.y[i] - (*target)[r0 * in.cols + i];
      if (!energyDescentVJP(m, e, sl.in, k, sl.dy, sl.dy0, sl.dx, sl.grad, sl.error))
        return;
    }
    sl.ok = true;
  };
  std::vector<std::thread> pool;
  for (int64_t p = 1; p < parts; ++p)
    pool.emplace_back(run, p);
  run(0);
  for (std::thread &t : pool)
    t.join();
  tr = EnergyTrace();
  if (grad)
    grad->assign(in.theta.size(), 0.0);
  if (everyLayer)
    tr.layers.assign(k * in.rows * in.cols, 0.0);
  int64_t row = 0;
  for (Slice &sl : slices) {
    if (!sl.ok) {
      error = sl.error;
      return false;
    }
    // Every layer's rows [k, slice rows, cols] into their place in [k, rows, cols].
    const int64_t rows = sl.in.rows;
    for (int64_t l = 0; l < k && everyLayer; ++l)
      std::copy(sl.tr.layers.begin() + l * rows * in.cols,
                sl.tr.layers.begin() + (l + 1) * rows * in.cols,
                tr.layers.begin() + (l * in.rows + row) * in.cols);
    row += rows;
    tr.y.insert(tr.y.end(), sl.tr.y.begin(), sl.tr.y.end());
    if (tr.energies.empty())
      tr.energies.assign(sl.tr.energies.size(), 0.0);
    for (size_t i = 0; i < tr.energies.size() && i < sl.tr.energies.size(); ++i)
      tr.energies[i] += sl.tr.energies[i];
    if (grad)
      for (size_t i = 0; i < grad->size(); ++i)
        (*grad)[i] += sl.grad[i];
  }
  return true;
}

/// --predict: the codes of the measurements in o.input ('b' [B, m]) after
/// every layer, from x_0 = 0, written to o.output as 'x' [B, n] with the
/// dictionary 'A' [m, n] they are codes for.
int predictCodes(const Model &m, const nlohmann::json &e, const OptimizationOptions &o,
                 const std::vector<double> &A, int64_t mm, int64_t n, int64_t layers, int threads,
                 const std::vector<double> &theta, std::string &error) {
  if (o.input.empty() || o.output.empty()) {
    error = "--predict needs --input measurements.safetensors ('b' [B, " + std::to_string(mm) +
            "]) and --output codes.safetensors";
    return 2;
  }
  TensorMap in;
  if (!readSafetensors(o.input, in, error))
    return 2;
  auto it = in.find("b");
  if (it == in.end()) {
    error = o.input + ": has no tensor 'b' (the measurements, [B, " + std::to_string(mm) + "])";
    return 2;
  }
  const Tensor &b = it->second;
  if (b.shape.size() != 2 || b.shape[1] != mm || b.shape[0] < 1) {
    error = o.input + ": tensor 'b' has shape " + nlohmann::json(b.shape).dump() + ", expected [B, " +
            std::to_string(mm) + "] with B >= 1 (m = " + std::to_string(mm) +
            " measurements per sample)";
    return 2;
  }
  if (!checkFinite(b, o.input + ": tensor 'b'", error))
    return 2;
  DescentInputs d;
  d.rows = d.xRows = b.shape[0];
  d.cols = n;
  d.xCols = mm;
  d.x = b.data;
  d.y0.assign(d.rows * n, 0.0);
  d.theta = theta;
  EnergyTrace tr;
  if (!descendRows(m, e, d, layers, threads, nullptr, tr, nullptr, error, /*energies=*/false))
    return 1;
  TensorMap out;
  out["x"] = {{d.rows, n}, tr.y};
  out["A"] = {{mm, n}, A};
  if (!writeSafetensors(o.output, out, "F64", error))
    return 1;
  printf("predicted the codes of %lld measurements after %lld layers: %s ('x' [%lld, %lld], the "
         "dictionary 'A' [%lld, %lld])\n",
         (long long)d.rows, (long long)layers, o.output.c_str(), (long long)d.rows, (long long)n,
         (long long)mm, (long long)n);
  return 0;
}

/// The training curve: the held-out NMSE at each evaluation, one series per
/// stage depth (stage-wise training descends one layer deeper per series).
PlotSpec trainingPlot(const nlohmann::json &e, const nlohmann::json &history) {
  PlotSpec spec;
  spec.title = "learned unrolling @" + e[key::kName].get<std::string>() +
               ": held-out NMSE during training";
  spec.xLabel = "step";
  spec.yLabel = "NMSE (dB) at the stage's depth";
  for (const auto &h : history) {
    std::string name = "layer " + std::to_string(h.value("depth", (int64_t)0));
    if (spec.series.empty() || spec.series.back().name != name)
      spec.series.push_back(Series{name, {}, {}});
    spec.series.back().x.push_back(h.value("step", 0.0));
    spec.series.back().y.push_back(h.value("held_out_nmse_db", 0.0));
  }
  return spec;
}

} // namespace

/// A learned unrolling: fill the fixed parameters, initialize the trained
/// ones at ISTA (W = A / L, W2 = I − AᵀA / L, γ = 1, θ = λ / L), train with Adam on fresh
/// samples (layer by layer, or the whole stack: o.training), then NMSE per
/// layer on the validation set.
int unroll::opt::learnedStudy(const Model &m, const nlohmann::json &e, const OptimizationOptions &o,
                              const std::vector<double> &A, int64_t aOff, int64_t mm, int64_t n,
                              double L, double lambda, const std::vector<double> &valXs,
                              DescentInputs val, std::string &error) {
  int64_t layers = e.value(key::kIterations, (int64_t)1);
  double diagError = -1, coherence = -1;
  std::vector<char> trainable(val.theta.size(), 0);
  std::mt19937_64 init(o.seed + 7);
  std::normal_distribution<double> N01(0.0, 1.0);
  for (const auto &p : e[key::kParams]) {
    std::string name = p[key::kName];
    int64_t off = p[key::kOffset], numel = 1;
    for (int64_t s : p[key::kShape])
      numel *= s;
    bool fixed = p.value(key::kFixed, false);
    auto fillPerLayer = [&](const std::vector<double> &w, double scale) {
      if (numel % (int64_t)w.size())
        return false;
      for (int64_t i = 0; i < numel; ++i)
        val.theta[off + i] = scale * w[i % w.size()];
      return true;
    };
    if (off == aOff) {
      continue; // the dictionary, already in theta
    } else if (fixed && name == "W") {
      std::vector<double> w = analyticWeight(A, mm, n);
      // Its constraint and its coherence max_{i≠j} |(WᵀA)_ij|, for the report.
      for (int64_t i = 0; i < n; ++i)
        for (int64_t jj = 0; jj < n; ++jj) {
          double s = 0;
          for (int64_t r = 0; r < mm; ++r)
            s += w[r * n + i] * A[r * n + jj];
          if (i == jj)
            diagError = std::max(diagError, std::abs(s - 1.0));
          else
            coherence = std::max(coherence, std::abs(s));
        }
      if (!fillPerLayer(w, 1.0)) {
        error = "fixed parameter 'W' must have A's shape, per layer or shared";
        return 2;
      }
    } else if (fixed) {
      error = "--task sparse_coding fills the fixed parameters 'A' (the dictionary) and 'W' "
              "(ALISTA's analytic weight), not '" +
              name + "'";
      return 2;
    } else if (name == "W") {
      if (!fillPerLayer(A, 1.0 / L)) {
        error = "parameter 'W' must have A's shape, per layer or shared";
        return 2;
      }
    } else if (name == "W2") {
      // LISTA's uncoupled form starts at ISTA too: W2 = I − AᵀA / L.
      std::vector<double> w2(n * n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t jj = 0; jj < n; ++jj) {
          double s = 0;
          for (int64_t r = 0; r < mm; ++r)
            s += A[r * n + i] * A[r * n + jj];
          w2[i * n + jj] = (i == jj ? 1.0 : 0.0) - s / L;
        }
      if (!fillPerLayer(w2, 1.0)) {
        error = "parameter 'W2' must be [n, n], per layer or shared";
        return 2;
      }
    } else if (name == "gamma" || name == "theta") {
      for (int64_t i = 0; i < numel; ++i)
        val.theta[off + i] = name == "gamma" ? 1.0 : lambda / L;
    } else {
      std::string kind = p.value(key::kInit, "normal");
      for (int64_t i = 0; i < numel; ++i)
        val.theta[off + i] = kind == "zeros"      ? 0.0
                             : kind == "ones"     ? 1.0
                             : kind == "constant" ? p.value(key::kValue, 0.0)
                                                  : p.value(key::kStd, 0.1) * N01(init);
    }
    if (!fixed)
      std::fill(trainable.begin() + off, trainable.begin() + off + numel, 1);
  }
  int64_t numTrained = std::count(trainable.begin(), trainable.end(), 1);
  // The batches' rows go to this many threads ($UNROLL_THREADS, else every
  // core this process may use).
  const int threads = threadsFromEnvironment() > 0 ? threadsFromEnvironment() : defaultThreads();
  // In a data-parallel job (mpirun) every rank draws the same samples and
  // descends its share of their rows; the sums (gradients, errors) meet in
  // an all-reduce, so the ranks hold the same θ and Adam state at every
  // step, and the run is the one-rank run up to the order of the sums.
  Communicator &w = world();
  auto mine = [&](int64_t rows) {
    return std::make_pair(rows * w.rank() / w.size(), rows * (w.rank() + 1) / w.size());
  };
  // After a part that can fail on one rank: whether it succeeded on all.
  auto together = [&](bool ok, const std::string &what) {
    int bad = w.firstFailure(ok, what);
    if (bad >= 0 && ok)
      error = "rank " + std::to_string(bad) + " failed in " + what + " (its message is above)";
    return bad < 0;
  };
  if (o.batch < w.size()) {
    error = "--batch " + std::to_string(o.batch) + " is smaller than the job's " +
            std::to_string(w.size()) + " ranks";
    return 2;
  }
  // NMSE (dB) at layer k of the samples `in` against their codes, and their
  // energy E(x_k) summed over them.
  auto measure = [&](const DescentInputs &in, const std::vector<double> &codes, int64_t k,
                     double &nmse, double *energy) {
    auto [r0, r1] = mine(in.rows);
    DescentInputs part = rowsOf(in, r0, r1);
    part.y0.assign(part.rows * n, 0.0);
    EnergyTrace tr;
    std::vector<double> sums(3, 0.0); // squared error, squared code norm, energy
    bool ok = part.rows == 0 ||
              descendRows(m, e, part, k, threads, nullptr, tr, nullptr, error, energy != nullptr);
    if (ok && part.rows > 0) {
      for (size_t i = 0; i < tr.y.size(); ++i) {
        double c = codes[r0 * n + i];
        sums[0] += (tr.y[i] - c) * (tr.y[i] - c);
        sums[1] += c * c;
      }
      sums[2] = tr.energies.empty() ? 0.0 : tr.energies.back();
    }
    if (!together(ok, "a validation at layer " + std::to_string(k)))
      return false;
    w.allreduceSum(sums, "the validation's sums at layer " + std::to_string(k));
    nmse = 10.0 * std::log10(std::max(sums[0], 1e-300) / sums[1]);
    if (energy)
      *energy = sums[2];
    return true;
  };
  // NMSE per layer on the reported samples (`val`: --samples of --seed).
  auto validate = [&](int64_t k, double &nmse, double &energy) {
    return measure(val, valXs, k, nmse, &energy);
  };
  // ... at every layer 0 … K: an energy descends to each depth in turn; a
  // model gives every layer's codes, and their energies, in one pass.
  auto validateAll = [&](std::vector<double> &nmse, std::vector<double> &energy) {
    if (!isUnrollingOfModel(e)) {
      for (int64_t k = 0; k <= layers; ++k)
        if (!validate(k, nmse[k], energy[k]))
          return false;
      return true;
    }
    auto [r0, r1] = mine(val.rows);
    DescentInputs part = rowsOf(val, r0, r1);
    part.y0.assign(part.rows * n, 0.0);
    EnergyTrace tr;
    // Per layer: squared error, squared code norm, energy.
    std::vector<double> sums(3 * (layers + 1), 0.0);
    bool ok = part.rows == 0 || descendRows(m, e, part, layers, threads, nullptr, tr, nullptr,
                                            error, /*energies=*/true, /*everyLayer=*/true);
    for (int64_t k = 0; ok && part.rows > 0 && k <= layers; ++k) {
      for (int64_t i = 0; i < part.rows * n; ++i) {
        double c = valXs[r0 * n + i], x = k == 0 ? 0.0 : tr.layers[(k - 1) * part.rows * n + i];
        sums[3 * k] += (x - c) * (x - c);
        sums[3 * k + 1] += c * c;
      }
      sums[3 * k + 2] = tr.energies[k];
    }
    if (!together(ok, "the validation of every layer"))
      return false;
    w.allreduceSum(sums, "the validation's sums per layer");
    for (int64_t k = 0; k <= layers; ++k) {
      nmse[k] = 10.0 * std::log10(std::max(sums[3 * k], 1e-300) / sums[3 * k + 1]);
      energy[k] = sums[3 * k + 2];
    }
    return true;
  };
  // The stages choose their best point on samples of their own (--held-out,
  // from a stream of their own), so that the reported NMSE is not the one
  // the choice was made on.
  DescentInputs held = val;
  std::vector<double> heldXs;
  if (o.checkpoint.empty()) {
    if (!checkMemory(8.0 * o.heldOut * (n + mm) * 2,
                     std::to_string(o.heldOut) + " held-out samples", "--held-out", error))
      return 2;
    std::mt19937_64 heldRng(o.seed + 2);
    held.rows = held.xRows = o.heldOut;
    drawSamples(heldRng, A, mm, n, held.rows, o.snrDb, heldXs, held.x);
  }
  auto heldOut = [&](int64_t k, double &nmse) {
    held.theta = val.theta;
    return measure(held, heldXs, k, nmse, nullptr);
  };

  // Training: fresh samples from their own stream; the loss of a stage at
  // depth t is log Σ over the batch of ‖x_t − x*‖² (x_t: the output of
  // layer t; --loss log, the default), or ½ Σ ‖x_t − x*‖², the reference
  // code's l2_loss (--loss l2). Adam ignores the l2 loss's scale except
  // through its ε, which a mean over the batch would reach 32x sooner at
  // the small errors of deep layers.
  std::mt19937_64 rng(o.seed + 1);
  DescentInputs batch = val;
  batch.rows = batch.xRows = o.batch;
  std::vector<double> xs, partXs, grad;
  EnergyTrace tr;
  double initNmse, initEnergy;
  if (!validate(layers, initNmse, initEnergy))
    return 1;
  const std::vector<int64_t> layerOf = entryLayers(e, val.theta.size());
  const int64_t K = std::max<int64_t>(1, layerCount(e));
  nlohmann::json history = nlohmann::json::array();
  auto t0 = std::chrono::steady_clock::now();
  int64_t step = 0; // over every stage

  // The schedule, every stage in order. Stage-wise, as the LISTA/ALISTA
  // reference code trains: for each layer t, first its own new parameters
  // alone at lr with the loss at layer t, then every parameter of layers ≤ t
  // at 0.2 lr and 0.02 lr, a parameter of layer j at that rate times
  // layer_decay^(t − j); the last layer's stages train the whole stack, and
  // --finetune-steps adds the whole stack again at finetune_lr, 0.2 and 0.02
  // times it. End to end: the whole stack at lr, then 0.2 lr and 0.02 lr.
  struct Stage {
    std::string name;
    int64_t depth;
    int64_t layer; // -1: every trained parameter alike (end to end)
    bool own;      // layer t's own parameters alone
    double lr;
    int64_t maxSteps;
  };
  std::vector<Stage> stages;
  const double decays[] = {1.0, 0.2, 0.02};
  if (o.training == "end-to-end") {
    for (double d : decays)
      stages.push_back({"end-to-end", layers, -1, false, o.lr * d, o.steps});
  } else {
    for (int64_t t = 0; t < std::min(K, layers); ++t) {
      int64_t depth = t + 1 == std::min(K, layers) ? layers : t + 1;
      std::string layer = "layer " + std::to_string(t + 1) + "/" + std::to_string(K);
      bool hasOwn = false;
      for (size_t i = 0; i < trainable.size(); ++i)
        hasOwn |= trainable[i] && layerOf[i] == t;
      if (hasOwn)
        stages.push_back({layer + " new", depth, t, true, o.lr, o.stageSteps});
      stages.push_back({layer + " all x0.2", depth, t, false, o.lr * decays[1], o.stageSteps});
      stages.push_back({layer + " all x0.02", depth, t, false, o.lr * decays[2], o.stageSteps});
    }
    const std::pair<const char *, double> finetunes[] = {
        {"fine-tune", 1.0}, {"fine-tune x0.2", 0.2}, {"fine-tune x0.02", 0.02}};
    if (o.finetuneSteps > 0)
      for (const auto &[name, d] : finetunes)
        stages.push_back({name, layers, -1, false, o.finetuneLr * d, o.finetuneSteps});
  }
  // A stage's learning-rate scale per entry of θ (0: the entry stays).
  auto scaleOf = [&](const Stage &st) {
    std::vector<double> scale(val.theta.size(), 0.0);
    for (size_t i = 0; i < scale.size(); ++i)
      if (!trainable[i] || (st.layer >= 0 && layerOf[i] > st.layer))
        scale[i] = 0.0;
      else if (st.layer < 0)
        scale[i] = 1.0;
      else if (st.own)
        scale[i] = layerOf[i] == st.layer ? 1.0 : 0.0;
      else
        scale[i] = std::pow(o.layerDecay, double(st.layer - layerOf[i]));
    return scale;
  };

  // One stage: the library's compiled Adam (@E_adam) with fresh moments at
  // the stage's rate on the entries with scale[i] > 0, each entry's step
  // times scale[i] (the others have zero gradients and moments, so Adam
  // leaves them). The scale goes on the step, not the gradient: Adam's
  // m / √v does not see a gradient's scale, so a scaled gradient would move
  // every layer at the full rate. Validated at the stage's depth every
  // evalEvery steps. It ends when the validation NMSE has not improved by
  // 0.01 dB for `patience` evaluations, after its most steps, or when the
  // run's --steps are spent, and keeps its best validated point, which may
  // be its start: a stage whose rate is too high for the unrolling (the
  // fine-tune's for a LISTA-CP(SS)) leaves the parameters as it found them.
  const Fault fault = Fault::fromEnvironment();
  std::ofstream metrics; // the root's metrics.jsonl, when the run has --out
  // The held-out NMSE of batch.theta at a depth, when known (depth >= 0):
  // the next stage at that depth starts from it without measuring it again.
  struct {
    int64_t depth = -1;
    double nmse = 0;
  } start;
  auto runStage = [&](const Stage &st) -> bool {
    const std::vector<double> scale = scaleOf(st);
    AdamStep adam;
    adam.lr = st.lr;
    adam.step = 0;
    std::vector<double> mom, vel, before;
    double best = start.nmse, normSq = 0;
    if (start.depth != st.depth) {
      val.theta = batch.theta;
      if (!heldOut(st.depth, best))
        return false;
    }
    const double startNmse = best;
    std::vector<double> bestTheta = batch.theta;
    int sinceBest = 0;
    bool done = false, improved = false; // done: no improvement for `patience` evaluations
    for (int64_t s = 0; s < st.maxSteps && step < o.steps; ++s, ++step) {
      if (fault.at("die", 0, step + 1))
        raise(SIGKILL); // the tests' crash mid-stage ($UNROLL_FAULT=die:0:STEP)
      // Every rank draws the whole batch (the stream stays the same) and
      // differentiates its rows.
      drawSamples(rng, A, mm, n, o.batch, o.snrDb, xs, batch.x);
      batch.y0.assign(o.batch * n, 0.0);
      auto [r0, r1] = mine(o.batch);
      partXs.assign(xs.begin() + r0 * n, xs.begin() + r1 * n);
      bool ok = descendRows(m, e, rowsOf(batch, r0, r1), st.depth, threads, &partXs, tr, &grad,
                            error);
      if (!together(ok, "step " + std::to_string(step + 1)))
        return false;
      // The batch's squared error and squared code norm ride with the
      // gradient in its all-reduce, for the step's row in metrics.jsonl.
      double errSq = 0, codeSq = 0;
      for (size_t i = 0; i < tr.y.size(); ++i) {
        errSq += (tr.y[i] - partXs[i]) * (tr.y[i] - partXs[i]);
        codeSq += partXs[i] * partXs[i];
      }
      grad.push_back(errSq);
      grad.push_back(codeSq);
      w.allreduceSum(grad, "the gradient all-reduce of step " + std::to_string(step + 1));
      codeSq = grad.back(), grad.pop_back();
      errSq = grad.back(), grad.pop_back();
      // The gradient is that of ½ Σ‖x_t − x*‖²; log Σ‖x_t − x*‖²'s is it
      // times 2 / Σ‖x_t − x*‖² (over the whole batch, every rank's rows).
      const bool logLoss = o.loss == "log";
      if (logLoss && errSq > 0)
        for (double &g : grad)
          g *= 2.0 / errSq;
      nlohmann::json row{{"step", step + 1},
                         {"stage", st.name},
                         {"depth", st.depth},
                         {"lr", st.lr},
                         {"loss", logLoss ? std::log(std::max(errSq, 1e-300)) : 0.5 * errSq},
                         {"batch_nmse_db", 10.0 * std::log10(std::max(errSq, 1e-300) / codeSq)},
                         {"elapsed_s", seconds(t0)}};
      for (size_t i = 0; i < grad.size(); ++i) {
        if (!std::isfinite(grad[i])) {
          error = "non-finite gradient at step " + std::to_string(step + 1) + " (" + st.name +
                  "; try a smaller --lr)";
          return false;
        }
        if (scale[i] == 0.0)
          grad[i] = 0.0;
      }
      ++adam.step;
      before = batch.theta;
      if (!energyAdamStep(m, e, adam, batch.theta, grad, mom, vel, normSq, error))
        return false;
      // Adam's step is lr times a function of the moments alone: scaling
      // it is a learning rate per entry.
      for (size_t i = 0; i < scale.size(); ++i)
        if (scale[i] != 1.0)
          batch.theta[i] = before[i] + scale[i] * (batch.theta[i] - before[i]);
      if ((s + 1) % o.evalEvery == 0 || s + 1 == st.maxSteps || step + 1 == o.steps) {
        val.theta = batch.theta;
        double nmse;
        if (!heldOut(st.depth, nmse))
          return false;
        row["held_out_nmse_db"] = nmse;
        history.push_back({{"step", step + 1},
                           {"stage", st.name},
                           {"depth", st.depth},
                           {"lr", st.lr},
                           {"held_out_nmse_db", nmse}});
        if (w.root())
          fprintf(stderr,
                  "  %-22s step %7lld  lr %.1e  held-out NMSE at layer %2lld %8.2f dB  %7.1f s\n",
                  st.name.c_str(), (long long)step + 1, st.lr, (long long)st.depth, nmse,
                  seconds(t0));
        if (nmse < best - 0.01)
          best = nmse, sinceBest = 0, bestTheta = batch.theta, improved = true;
        else
          done = ++sinceBest >= o.patience;
      }
      metrics << row.dump() << "\n";
      if (done) {
        ++step;
        break;
      }
    }
    metrics.flush();
    if (!improved && w.root())
      fprintf(stderr,
              "  %-22s no evaluation improved on the stage's start (%.2f dB at layer %lld): "
              "keeping it\n",
              st.name.c_str(), startNmse, (long long)st.depth);
    batch.theta = bestTheta;
    start.depth = st.depth;
    start.nmse = best;
    return true;
  };
  // The trained parameters alone, for their checkpoint: the fixed ones (A,
  // ALISTA's W) are the task's, drawn again from --dict-seed (or read again
  // from --dictionary: the checkpoint keeps its fingerprint).
  nlohmann::json trainedInfo = e;
  trainedInfo[key::kParams] = nlohmann::json::array();
  for (const auto &p : e[key::kParams])
    if (!p.value(key::kFixed, false) && p[key::kOffset].get<int64_t>() != aOff)
      trainedInfo[key::kParams].push_back(p);
  const nlohmann::json dictionary = dictionaryIdentity(o, A);
  nlohmann::json problem{{"task", "sparse_coding"}, {"energy", e[key::kName]}, {"m", mm}, {"n", n},
                         {"lambda", lambda}};
  problem.update(dictionary);
  // What a resumed run must share with the run it continues: the problem,
  // and everything that decides the stages and their samples (--steps may
  // grow).
  nlohmann::json training = problem;
  training["training"] = o.training;
  training["stage_steps"] = o.stageSteps;
  training["patience"] = o.patience;
  training["layer_decay"] = o.layerDecay;
  training["loss"] = o.loss;
  training["finetune_steps"] = o.finetuneSteps;
  training["finetune_lr"] = o.finetuneLr;
  training["lr"] = o.lr;
  training["batch"] = o.batch;
  training["seed"] = o.seed;
  training["log_every"] = o.evalEvery;
  training["snr_db"] = o.snrDb;
  training["held_out"] = o.heldOut;
  const std::string ckptDir = o.out + "/checkpoint";
  // Each stage ends with a checkpoint (the theta it kept, the sample
  // stream's state, the stages done): --resume goes on from the stage after
  // it, and gives the uninterrupted run's result exactly.
  auto saveStages = [&](size_t done) {
    TrainState state;
    state.step = step;
    state.theta = batch.theta;
    std::ostringstream r;
    r << rng;
    state.rng = r.str();
    nlohmann::json config = training;
    config["steps"] = o.steps == INT64_MAX ? nlohmann::json(nullptr) : nlohmann::json(o.steps);
    config["stages_done"] = done;
    config["stages"] = stages.size();
    config["history"] = history;
    if (!o.dictionary.empty())
      config["dictionary_file"] = o.dictionary; // for messages; the fingerprint decides
    return saveCheckpoint(ckptDir, trainedInfo, state, config, error);
  };
  auto loadParams = [&](const std::string &stepDir) {
    std::vector<double> loaded;
    if (!loadSnapshotParameters(stepDir, trainedInfo, loaded, error))
      return false;
    for (size_t i = 0; i < loaded.size(); ++i)
      if (trainable[i])
        batch.theta[i] = loaded[i];
    return true;
  };
  size_t firstStage = 0;
  if (!o.checkpoint.empty()) {
    // Evaluation only: the trained parameters from the checkpoint, on this
    // seed's samples of the dictionary the checkpoint was trained for.
    nlohmann::json c;
    std::string stepDir;
    if (!checkpointConfig(o.checkpoint, c, stepDir, error))
      return 2;
    for (const char *k : {"energy", "m", "n", "lambda"})
      if (c.contains(k) && c[k] != problem[k]) {
        error = stepDir + "/state.json: trained with " + k + " = " + c[k].dump() +
                ", this run has " + problem[k].dump();
        return 2;
      }
    if (!sameDictionary(c, dictionary, stepDir + "/state.json", error))
      return 2;
    if (!loadParams(stepDir))
      return 2;
    if (o.predict)
      return predictCodes(m, e, o, A, mm, n, layers, threads, batch.theta, error);
    firstStage = stages.size();
  } else if (o.resume) {
    nlohmann::json c;
    std::string stepDir;
    if (!checkpointConfig(ckptDir, c, stepDir, error)) {
      error = "--resume: " + error;
      return 2;
    }
    // A checkpoint written before a setting existed trained as its absence
    // implies: the l2 loss, no fine-tune (whose rate then does not matter).
    const nlohmann::json implied = {{"loss", "l2"}, {"finetune_steps", 0}, {"held_out", 1000}};
    if (!sameDictionary(c, dictionary, "--resume: " + stepDir + "/state.json", error))
      return 2;
    for (auto &[k, v] : training.items()) {
      if (dictionary.contains(k))
        continue; // compared above
      nlohmann::json had = c.contains(k) ? c[k] : implied.value(k, nlohmann::json());
      if (k == "finetune_lr" && !c.contains(k) && o.finetuneSteps == 0)
        continue;
      if (had != v) {
        error = "--resume: " + stepDir + "/state.json was written with " + k + " = " +
                (had.is_null() ? std::string("(none)") : had.dump()) + ", this run has " +
                v.dump() + " (resume with the settings it was trained with)";
        return 2;
      }
    }
    std::ifstream f(stepDir + "/state.json");
    nlohmann::json st = nlohmann::json::parse(f, nullptr, false);
    std::istringstream r(st.value("rng", std::string()));
    r >> rng;
    if (!r || !loadParams(stepDir)) {
      if (error.empty())
        error = stepDir + "/state.json: no sample-stream state to resume from";
      return 2;
    }
    step = st.value("step", (int64_t)0);
    firstStage = c.value("stages_done", (size_t)0);
    history = c.value("history", nlohmann::json::array());
    if (firstStage > stages.size()) {
      error = "--resume: " + stepDir + " has " + std::to_string(firstStage) +
              " stages done, this schedule has " + std::to_string(stages.size());
      return 2;
    }
    if (w.root() && firstStage < stages.size())
      fprintf(stderr, "  resuming %s at stage %zu of %zu (%s), step %lld\n", ckptDir.c_str(),
              firstStage + 1, stages.size(), stages[firstStage].name.c_str(), (long long)step);
    else if (w.root())
      fprintf(stderr, "  resuming %s: its %zu stages are done (step %lld); evaluating\n",
              ckptDir.c_str(), stages.size(), (long long)step);
  }
  // metrics.jsonl: one row per step (the root's; a resumed run keeps the
  // rows up to its checkpoint's step and goes on after them).
  if (firstStage < stages.size() && !o.out.empty() && w.root() &&
      !openMetrics(o.out + "/metrics.jsonl", o.resume ? step : 0, metrics, error))
    return 2;
  for (size_t i = firstStage; i < stages.size() && step < o.steps; ++i)
    if (!runStage(stages[i]) ||
        (!o.out.empty() && !together(!w.root() || saveStages(i + 1), "the checkpoint")))
      return 1;
  val.theta = batch.theta;
  double trainSeconds = seconds(t0);

  std::vector<double> nmse(layers + 1), energy(layers + 1);
  if (!validateAll(nmse, energy))
    return 1;
  if (!w.root())
    return 0; // the root reports
  std::ostringstream csv;
  csv << "layer,nmse_db,energy\n";
  for (int64_t k = 0; k <= layers; ++k)
    csv << k << ',' << nmse[k] << ',' << energy[k] << '\n';
  nlohmann::json gammas = nlohmann::json::array(), thetas = nlohmann::json::array();
  for (const auto &p : e[key::kParams]) {
    std::string name = p[key::kName];
    if (name != "gamma" && name != "theta")
      continue;
    int64_t off = p[key::kOffset], k = p[key::kShape][0];
    for (int64_t i = 0; i < k; ++i)
      (name == "gamma" ? gammas : thetas).push_back(val.theta[off + i]);
  }
  nlohmann::json j{
      {"task", "sparse_coding"},
      {"energy", e[key::kName]},
      {"learned", true},
      {"analytic_w", diagError < 0
                         ? nlohmann::json(nullptr)
                         : nlohmann::json{{"diag_max_error", diagError}, {"coherence", coherence}}},
      {"m", mm},
      {"n", n},
      {"lambda", lambda},
      {"layers", layers},
      {"samples", val.rows},
      {"seed", o.seed},
      {"lipschitz", L},
      {"trained_parameters", numTrained},
      {"steps", step},
      {"batch", o.batch},
      {"ranks", w.size()},
      {"lr", o.lr},
      {"training", o.checkpoint.empty() ? nlohmann::json(o.training) : nlohmann::json(nullptr)},
      {"checkpoint", o.checkpoint.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.checkpoint)},
      {"dict_seed", o.dictionary.empty() ? nlohmann::json(o.dictSeed) : nlohmann::json(nullptr)},
      {"dictionary", o.dictionary.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.dictionary)},
      {"stage_steps", o.stageSteps},
      {"patience", o.patience},
      {"held_out", o.checkpoint.empty() ? nlohmann::json(o.heldOut) : nlohmann::json(nullptr)},
      {"layer_decay", o.layerDecay},
      {"loss", o.loss},
      {"finetune_steps", o.finetuneSteps},
      {"finetune_lr", o.finetuneLr},
      {"train_seconds", trainSeconds},
      {"history", history},
      {"init_nmse_db", initNmse},
      {"nmse_db", nmse},
      {"energy", energy},
      {"gamma", gammas},
      {"theta", thetas}};
  if (!writeOut(o, "sparse_coding.csv", csv.str(), error) ||
      !writeOut(o, "sparse_coding.json", j.dump(2) + "\n", error))
    return 1;
  if (!o.out.empty()) {
    PlotSpec spec;
    spec.title =
        "learned unrolling @" + e[key::kName].get<std::string>() + ": validation NMSE per layer";
    spec.xLabel = "layer k";
    spec.yLabel = "NMSE (dB)";
    Series s{e[key::kName].get<std::string>(), {}, nmse};
    for (int64_t k = 0; k <= layers; ++k)
      s.x.push_back(k);
    spec.series = {s};
    if (!writeSvg(o.out + "/sparse_coding.svg", spec, error))
      return 1;
    if (!history.empty() && !writeSvg(o.out + "/training.svg", trainingPlot(e, history), error))
      return 1;
  }
  if (o.json) {
    printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  printf("learned unrolling @%s: m = %lld, n = %lld, %lld layers, %lld trained parameters, "
         "%s, sample seed %llu\n",
         e[key::kName].get<std::string>().c_str(), (long long)mm, (long long)n, (long long)layers,
         (long long)numTrained, dictionaryName(o).c_str(), (unsigned long long)o.seed);
  if (o.checkpoint.empty())
    printf("trained %s: %lld steps of batch %lld in %.1f s%s%s%s\n", o.training.c_str(),
           (long long)step, (long long)o.batch, trainSeconds,
           w.distributed() ? (" on " + std::to_string(w.size()) + " ranks").c_str() : "",
           o.out.empty() ? "" : "; checkpoint ", o.out.empty() ? "" : (o.out + "/checkpoint").c_str());
  else
    printf("parameters from %s (not trained here)\n", o.checkpoint.c_str());
  printf("validation NMSE at layer %lld: %.2f dB at the start (gamma = 1, theta = lambda / L), "
         "%.2f dB %s\n",
         (long long)layers, initNmse, nmse[layers],
         o.checkpoint.empty() ? "trained" : "with the checkpoint");
  if (diagError >= 0)
    printf("analytic W: max |diag(W^T A) - 1| = %.2e, coherence max |(W^T A)_ij| = %.4f\n",
           diagError, coherence);
  printf("%6s  %14s  %16s\n", "layer", "NMSE dB", "energy");
  for (int64_t k = 0; k <= layers; ++k)
    printf("%6lld  %14.2f  %16.8g\n", (long long)k, nmse[k], energy[k]);
  if (!o.out.empty())
    printf("wrote %s/sparse_coding.{csv,json,svg}%s\n", o.out.c_str(),
           history.empty() ? "" : ", training.svg, metrics.jsonl");
  return 0;
}
