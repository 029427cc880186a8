//===- OptimizationTasks.cpp - sparse coding and Hopfield tasks -----------===//
//
// The problems are generated here; every step is the energy's compiled
// descent (@E_descend): ISTA, FISTA (schedule fista: the momentum is in the
// compiled loop), the learned unrollings (trained here with @E_descend_vjp),
// the Hopfield CCCP step.
//
//===----------------------------------------------------------------------===//
#include "unroll/tooling/OptimizationTasks.h"
#include "unroll/runtime/Energy.h"
#include "unroll/tooling/Adam.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Plot.h"
#include "unroll/tooling/Process.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>

using namespace unroll;

namespace {

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Writes `name` into the output folder (atomically); no-op without one.
bool writeOut(const OptimizationOptions &o, const std::string &name, const std::string &text,
              std::string &error) {
  if (o.out.empty())
    return true;
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) {
    error = "cannot create " + o.out + ": " + ec.message();
    return false;
  }
  return writeFileAtomic(o.out + "/" + name, text, error);
}

/// The one parameter of an energy whose terms name it under `key`.
bool paramOffset(const nlohmann::json &e, const char *op, const char *key, int64_t &offset,
                 std::string &error) {
  for (const auto &t : e["terms"])
    if (t.value("op", "") == op && t.contains(key) && t[key].is_string())
      for (const auto &p : e["params"])
        if (p.value("name", "") == t[key].get<std::string>()) {
          offset = p["offset"];
          return true;
        }
  error = "the energy's '" + std::string(op) + "' term has no parameter '" + key + "'";
  return false;
}

double termValue(const nlohmann::json &e, const char *op, const char *key) {
  for (const auto &t : e["terms"])
    if (t.value("op", "") == op && t.contains(key))
      return t[key].get<double>();
  return 0;
}

/// Iterations at which the tables print: 0, 1, 2, 4, …, and the last.
std::vector<int64_t> tableRows(int64_t k) {
  std::vector<int64_t> r{0};
  for (int64_t i = 1; i < k; i *= 2)
    r.push_back(i);
  if (k > 16 && std::find(r.begin(), r.end(), 16) == r.end())
    r.push_back(16);
  std::sort(r.begin(), r.end());
  r.push_back(k);
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

/// λ_max(AᵀA) by a long power method (independent of the compiled step's).
double lipschitz(const std::vector<double> &A, int64_t mm, int64_t n) {
  std::vector<double> v(n, 1.0), w(mm);
  double L = 0;
  for (int it = 0; it < 2000; ++it) {
    for (int64_t i = 0; i < mm; ++i) {
      w[i] = 0;
      for (int64_t j = 0; j < n; ++j)
        w[i] += A[i * n + j] * v[j];
    }
    double s = 0;
    for (int64_t j = 0; j < n; ++j) {
      v[j] = 0;
      for (int64_t i = 0; i < mm; ++i)
        v[j] += A[i * n + j] * w[i];
      s += v[j] * v[j];
    }
    L = std::sqrt(s); // ‖AᵀA v‖ with ‖v‖ = 1 → λ_max
    for (double &vj : v)
      vj /= L;
  }
  return L;
}

/// ALISTA's analytic weight for the Frobenius coherence: W minimizing
/// ‖WᵀA‖_F subject to diag(WᵀA) = 1, column by column
/// w_j = (AAᵀ)⁻¹ a_j / (a_jᵀ (AAᵀ)⁻¹ a_j) (Cholesky of AAᵀ).
std::vector<double> analyticWeight(const std::vector<double> &A, int64_t mm, int64_t n) {
  std::vector<double> G(mm * mm, 0.0), Z = A, W(mm * n);
  for (int64_t i = 0; i < mm; ++i)
    for (int64_t k = 0; k <= i; ++k) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j)
        s += A[i * n + j] * A[k * n + j];
      G[i * mm + k] = G[k * mm + i] = s;
    }
  for (int64_t j = 0; j < mm; ++j) { // G = C Cᵀ in place (lower)
    for (int64_t k = 0; k < j; ++k)
      G[j * mm + j] -= G[j * mm + k] * G[j * mm + k];
    G[j * mm + j] = std::sqrt(G[j * mm + j]);
    for (int64_t i = j + 1; i < mm; ++i) {
      for (int64_t k = 0; k < j; ++k)
        G[i * mm + j] -= G[i * mm + k] * G[j * mm + k];
      G[i * mm + j] /= G[j * mm + j];
    }
  }
  for (int64_t c = 0; c < n; ++c) { // Z[:, c] = G⁻¹ a_c
    for (int64_t i = 0; i < mm; ++i) {
      double s = Z[i * n + c];
      for (int64_t k = 0; k < i; ++k)
        s -= G[i * mm + k] * Z[k * n + c];
      Z[i * n + c] = s / G[i * mm + i];
    }
    for (int64_t i = mm - 1; i >= 0; --i) {
      double s = Z[i * n + c];
      for (int64_t k = i + 1; k < mm; ++k)
        s -= G[k * mm + i] * Z[k * n + c];
      Z[i * n + c] = s / G[i * mm + i];
    }
    double d = 0;
    for (int64_t i = 0; i < mm; ++i)
      d += A[i * n + c] * Z[i * n + c];
    for (int64_t i = 0; i < mm; ++i)
      W[i * n + c] = Z[i * n + c] / d;
  }
  return W;
}

/// Draws `count` samples of the problem: x* (Bernoulli(0.1) × N(0, 1)) and
/// b = A x*, plus Gaussian noise at `snrDb` dB (the batch's signal power)
/// when snrDb >= 0.
void drawSamples(std::mt19937_64 &rng, const std::vector<double> &A, int64_t mm, int64_t n,
                 int64_t count, double snrDb, std::vector<double> &xs, std::vector<double> &b) {
  std::normal_distribution<double> N01(0.0, 1.0);
  std::bernoulli_distribution support(0.1);
  xs.assign(count * n, 0.0);
  b.assign(count * mm, 0.0);
  for (double &v : xs)
    v = support(rng) ? N01(rng) : 0.0;
  for (int64_t s = 0; s < count; ++s)
    for (int64_t i = 0; i < mm; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j)
        acc += A[i * n + j] * xs[s * n + j];
      b[s * mm + i] = acc;
    }
  if (snrDb < 0)
    return;
  double power = 0;
  for (double v : b)
    power += v * v;
  double sigma = std::sqrt(power / b.size() / std::pow(10.0, snrDb / 10.0));
  for (double &v : b)
    v += sigma * N01(rng);
}

/// A learned unrolling: fill the fixed parameters, initialize the trained
/// ones at ISTA (W = A / L, W2 = I − AᵀA / L, γ = 1, θ = λ / L), train with Adam on fresh
/// samples (stage-wise lr), then NMSE per layer on the validation set.
template <typename NmseFn>
int learnedStudy(const Model &m, const nlohmann::json &e, const OptimizationOptions &o,
                 const std::vector<double> &A, int64_t aOff, int64_t mm, int64_t n, double L,
                 double lambda, const std::vector<double> &valXs, DescentInputs val, NmseFn nmseDb,
                 std::string &error) {
  int64_t layers = e.value("iterations", (int64_t)1);
  double diagError = -1, coherence = -1;
  std::vector<char> trainable(val.theta.size(), 0);
  std::mt19937_64 init(o.seed + 7);
  std::normal_distribution<double> N01(0.0, 1.0);
  for (const auto &p : e["params"]) {
    std::string name = p["name"];
    int64_t off = p["offset"], numel = 1;
    for (int64_t s : p["shape"])
      numel *= s;
    bool fixed = p.value("fixed", false);
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
      std::string kind = p.value("init", "normal");
      for (int64_t i = 0; i < numel; ++i)
        val.theta[off + i] = kind == "zeros"      ? 0.0
                             : kind == "ones"     ? 1.0
                             : kind == "constant" ? p.value("value", 0.0)
                                                  : p.value("std", 0.1) * N01(init);
    }
    if (!fixed)
      std::fill(trainable.begin() + off, trainable.begin() + off + numel, 1);
  }
  int64_t numTrained = std::count(trainable.begin(), trainable.end(), 1);
  auto validate = [&](int64_t k, double &nmse, double &energy) {
    EnergyTrace tr;
    val.y0.assign(val.rows * n, 0.0);
    if (!runEnergyDescent(m, e, val, k, tr, error))
      return false;
    nmse = k == 0 ? 0.0 : nmseDb(tr.y);
    energy = tr.energies.back();
    return true;
  };

  // Training: fresh samples from their own stream; loss = mean ‖x_K − x*‖².
  std::mt19937_64 rng(o.seed + 1);
  Adam adam;
  adam.lr = o.lr;
  const double stages[] = {1.0, 0.2, 0.02};
  int stage = 0, sinceBest = 0;
  double best = 1e300;
  std::vector<double> bestTheta = val.theta;
  nlohmann::json history = nlohmann::json::array();
  DescentInputs batch = val;
  batch.rows = batch.xRows = o.batch;
  std::vector<double> xs, dy0, dx, grad;
  EnergyTrace tr;
  double initNmse, initEnergy;
  if (!validate(layers, initNmse, initEnergy))
    return 1;
  auto t0 = std::chrono::steady_clock::now();
  int64_t step = 0;
  for (; step < o.steps; ++step) {
    drawSamples(rng, A, mm, n, o.batch, o.snrDb, xs, batch.x);
    batch.y0.assign(o.batch * n, 0.0);
    if (!runEnergyDescent(m, e, batch, layers, tr, error))
      return 1;
    std::vector<double> dy(tr.y.size());
    for (size_t i = 0; i < dy.size(); ++i)
      dy[i] = 2.0 * (tr.y[i] - xs[i]) / o.batch;
    if (!energyDescentVJP(m, e, batch, layers, dy, dy0, dx, grad, error))
      return 1;
    for (size_t i = 0; i < grad.size(); ++i)
      if (!trainable[i])
        grad[i] = 0.0;
    for (double g : grad)
      if (!std::isfinite(g)) {
        error = "non-finite gradient at step " + std::to_string(step + 1) + " (try a smaller --lr)";
        return 1;
      }
    adam.lr = o.lr * stages[stage];
    adam.update(batch.theta, grad);
    for (size_t i = 0; i < grad.size(); ++i)
      if (!trainable[i])
        batch.theta[i] = val.theta[i];
    if ((step + 1) % o.evalEvery == 0 || step + 1 == o.steps) {
      val.theta = batch.theta;
      double nmse, energy;
      if (!validate(layers, nmse, energy))
        return 1;
      history.push_back({{"step", step + 1}, {"lr", adam.lr}, {"val_nmse_db", nmse}});
      fprintf(stderr, "  step %6lld  lr %.1e  validation NMSE %8.2f dB  %6.1f s\n",
              (long long)step + 1, adam.lr, nmse, seconds(t0));
      if (nmse < best - 0.01) {
        best = nmse, sinceBest = 0, bestTheta = batch.theta;
      } else if (++sinceBest >= o.patience) {
        if (++stage == 3) {
          ++step;
          break;
        }
        sinceBest = 0;
      }
    }
  }
  double trainSeconds = seconds(t0);
  val.theta = bestTheta;

  std::vector<double> nmse(layers + 1), energy(layers + 1);
  for (int64_t k = 0; k <= layers; ++k)
    if (!validate(k, nmse[k], energy[k]))
      return 1;
  std::ostringstream csv;
  csv << "layer,nmse_db,energy\n";
  for (int64_t k = 0; k <= layers; ++k)
    csv << k << ',' << nmse[k] << ',' << energy[k] << '\n';
  nlohmann::json gammas = nlohmann::json::array(), thetas = nlohmann::json::array();
  for (const auto &p : e["params"]) {
    std::string name = p["name"];
    if (name != "gamma" && name != "theta")
      continue;
    int64_t off = p["offset"], k = p["shape"][0];
    for (int64_t i = 0; i < k; ++i)
      (name == "gamma" ? gammas : thetas).push_back(val.theta[off + i]);
  }
  nlohmann::json j{{"task", "sparse_coding"},
                   {"energy", e["name"]},
                   {"learned", true},
                   {"analytic_w", diagError < 0 ? nlohmann::json(nullptr)
                                                : nlohmann::json{{"diag_max_error", diagError},
                                                                 {"coherence", coherence}}},
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
                   {"lr", o.lr},
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
        "learned unrolling @" + e["name"].get<std::string>() + ": validation NMSE per layer";
    spec.xLabel = "layer k";
    spec.yLabel = "NMSE (dB)";
    Series s{e["name"].get<std::string>(), {}, nmse};
    for (int64_t k = 0; k <= layers; ++k)
      s.x.push_back(k);
    spec.series = {s};
    if (!writeSvg(o.out + "/sparse_coding.svg", spec, error))
      return 1;
  }
  if (o.json) {
    printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  printf("learned unrolling @%s: m = %lld, n = %lld, %lld layers, %lld trained parameters; "
         "%lld steps of batch %lld in %.1f s, seed %llu\n",
         e["name"].get<std::string>().c_str(), (long long)mm, (long long)n, (long long)layers,
         (long long)numTrained, (long long)step, (long long)o.batch, trainSeconds,
         (unsigned long long)o.seed);
  printf("validation NMSE at layer %lld: %.2f dB at the start (gamma = 1, theta = lambda / L), "
         "%.2f dB "
         "trained\n",
         (long long)layers, initNmse, nmse[layers]);
  if (diagError >= 0)
    printf("analytic W: max |diag(W^T A) - 1| = %.2e, coherence max |(W^T A)_ij| = %.4f\n",
           diagError, coherence);
  printf("%6s  %14s  %16s\n", "layer", "NMSE dB", "energy");
  for (int64_t k = 0; k <= layers; ++k)
    printf("%6lld  %14.2f  %16.8g\n", (long long)k, nmse[k], energy[k]);
  if (!o.out.empty())
    printf("wrote %s/sparse_coding.{csv,json,svg}\n", o.out.c_str());
  return 0;
}

} // namespace

int unroll::sparseCodingStudy(const Model &m, const nlohmann::json &e, const OptimizationOptions &o,
                              std::string &error) {
  if (e.value("schedule", "") != "ista" && e.value("schedule", "") != "fista") {
    error = "--task sparse_coding needs an energy with schedule(ista) or schedule(fista) "
            "(unroll.lsq + unroll.l1), got schedule '" +
            e.value("schedule", "?") + "'";
    return 2;
  }
  if (!e["dim"].is_number_integer() || !e["input_dim"].is_number_integer()) {
    error = "the energy must have static code and measurement sizes";
    return 2;
  }
  int64_t n = e["dim"], mm = e["input_dim"];
  int64_t samples = o.samples > 0 ? o.samples : 1000;
  // The samples (x*, b), the iterates and their converted copies.
  if (!checkMemory(8.0 * samples * (n + mm) * 8,
                   "sparse coding on " + std::to_string(samples) + " samples", "--samples", error))
    return 2;
  int64_t iters = o.iterations >= 0 ? o.iterations : 1000;
  double lambda = termValue(e, "l1", "lambda");
  int64_t aOff = 0;
  if (!paramOffset(e, "lsq", "dict", aOff, error))
    return 2;
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> N01(0.0, 1.0);
  // A_ij ~ N(0, 1/m), columns scaled to unit norm; then the validation set
  // (the same for every energy of these sizes and seed).
  std::vector<double> A(mm * n);
  for (double &v : A)
    v = N01(rng) / std::sqrt((double)mm);
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t i = 0; i < mm; ++i)
      s += A[i * n + j] * A[i * n + j];
    for (int64_t i = 0; i < mm; ++i)
      A[i * n + j] /= std::sqrt(s);
  }
  std::vector<double> xs, b;
  drawSamples(rng, A, mm, n, samples, o.snrDb, xs, b);
  double xsNorm = 0;
  for (double v : xs)
    xsNorm += v * v;
  auto nmseDb = [&](const std::vector<double> &x) {
    double err = 0;
    for (size_t i = 0; i < x.size(); ++i)
      err += (x[i] - xs[i]) * (x[i] - xs[i]);
    return 10.0 * std::log10(std::max(err, 1e-300) / xsNorm);
  };

  DescentInputs in;
  in.rows = samples, in.cols = n, in.xRows = samples, in.xCols = mm;
  in.x = b;
  in.theta.assign(e.value("num_params", (int64_t)0), 0.0);
  std::copy(A.begin(), A.end(), in.theta.begin() + aOff);
  double L = lipschitz(A, mm, n);
  // The dictionary is the problem's (fixed or not in the IR); any other
  // parameter not marked fixed is trained.
  bool learned = false;
  for (const auto &p : e["params"])
    learned |= !p.value("fixed", false) && p["offset"].get<int64_t>() != aOff;
  if (learned)
    return learnedStudy(m, e, o, A, aOff, mm, n, L, lambda, xs, in, nmseDb, error);

  // ISTA is memoryless: one compiled step at a time from x_0 = 0 gives every
  // iterate. FISTA carries the previous iterate inside its descent: one call
  // per reported k (0 … 16, then powers of two, then the last), and the
  // energy trace of the longest call for every k.
  bool fista = e.value("schedule", "") == "fista";
  std::vector<int64_t> ks;
  std::vector<double> nmse, energy, trace;
  EnergyTrace tr;
  auto t0 = std::chrono::steady_clock::now();
  // An increase counts past the round-off of the library's energy (a sum of
  // rows × n terms): 1e-5 relative in f32, 1e-12 in f64. Smaller ones are
  // counted apart.
  bool f32 = m.info().value("element_type", "") == "f32";
  double tol = f32 ? 1e-5 : 1e-12, largestSmall = 0;
  int64_t increases = 0, roundoff = 0;
  std::vector<double> last(samples * n, 0.0);
  if (!fista) {
    ks.push_back(0), nmse.push_back(0.0);
    std::vector<double> x(samples * n, 0.0);
    for (int64_t k = 0; k < iters; ++k) {
      in.y0 = x;
      if (!runEnergyDescent(m, e, in, 1, tr, error))
        return 1;
      if (k == 0)
        trace.push_back(tr.energies[0]);
      trace.push_back(tr.energies[1]);
      double rise = (tr.energies[1] - tr.energies[0]) / std::max(std::abs(tr.energies[0]), 1e-300);
      if (rise > tol)
        ++increases;
      else if (rise > 0)
        ++roundoff, largestSmall = std::max(largestSmall, rise);
      x = tr.y;
      ks.push_back(k + 1), nmse.push_back(nmseDb(x));
    }
    last = x;
    energy = trace;
  } else {
    for (int64_t k = 0; k <= iters; k = k < 16 ? k + 1 : 2 * k)
      ks.push_back(k);
    if (ks.back() != iters)
      ks.push_back(iters);
    for (int64_t k : ks) {
      in.y0.assign(samples * n, 0.0);
      if (!runEnergyDescent(m, e, in, k, tr, error))
        return 1;
      nmse.push_back(k == 0 ? 0.0 : nmseDb(tr.y));
      energy.push_back(tr.energies.back());
      if (k == iters)
        trace = tr.energies, last = tr.y;
    }
  }
  double secs = seconds(t0);
  // The guarantees F(x_k) − F* ≤ 2 L ‖x_0 − x̂‖² / (k + 1)² (FISTA) and
  // ≤ L ‖x_0 − x̂‖² / (2 k) (ISTA), x_0 = 0, with F* and x̂ the lowest energy
  // reached and its point: the largest constant they imply (≤ 1 holds them).
  double fStar = *std::min_element(trace.begin(), trace.end()), xhatNorm = 0;
  for (double v : last)
    xhatNorm += v * v;
  double rate = 0;
  for (size_t k = 1; k < trace.size(); ++k)
    rate = std::max(rate, fista ? (trace[k] - fStar) * (k + 1.0) * (k + 1.0) / (2 * L * xhatNorm)
                                : (trace[k] - fStar) * 2.0 * k / (L * xhatNorm));

  std::ostringstream csv;
  csv << "iteration,nmse_db,energy\n";
  for (size_t i = 0; i < ks.size(); ++i)
    csv << ks[i] << ',' << nmse[i] << ',' << energy[i] << '\n';
  std::string sched = fista ? "fista" : "ista";
  nlohmann::json j{{"task", "sparse_coding"},
                   {"energy", e["name"]},
                   {"schedule", sched},
                   {"m", mm},
                   {"n", n},
                   {"lambda", lambda},
                   {"samples", samples},
                   {"snr_db", o.snrDb >= 0 ? nlohmann::json(o.snrDb) : nlohmann::json(nullptr)},
                   {"iterations", ks},
                   {"seed", o.seed},
                   {"lipschitz", L},
                   {"nmse_db", nmse},
                   {"energy", energy},
                   {"energy_trace", trace},
                   {"seconds", secs},
                   {"rate_constant", rate}};
  if (!fista)
    j.update({{"energy_increases", increases},
              {"increase_tolerance", tol},
              {"roundoff_increases", roundoff},
              {"largest_roundoff_increase", largestSmall}});
  if (!writeOut(o, "sparse_coding.csv", csv.str(), error) ||
      !writeOut(o, "sparse_coding.json", j.dump(2) + "\n", error))
    return 1;
  std::string upper = fista ? "FISTA" : "ISTA";
  if (!o.out.empty()) {
    PlotSpec spec;
    spec.title = "sparse coding, m = " + std::to_string(mm) + ", n = " + std::to_string(n) + ": " +
                 upper + " (compiled @" + e["name"].get<std::string>() + ")";
    spec.xLabel = "iteration k";
    spec.yLabel = "NMSE (dB)";
    Series sr{upper, {}, nmse};
    for (int64_t k : ks)
      sr.x.push_back(k);
    spec.series = {sr};
    if (!writeSvg(o.out + "/sparse_coding.svg", spec, error))
      return 1;
  }
  if (o.json) {
    printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  printf("sparse coding @%s (%s): m = %lld, n = %lld, lambda = %g, %lld samples, %s, seed %llu\n",
         e["name"].get<std::string>().c_str(), upper.c_str(), (long long)mm, (long long)n, lambda,
         (long long)samples,
         o.snrDb >= 0 ? ("SNR " + std::to_string((int)o.snrDb) + " dB").c_str() : "noiseless",
         (unsigned long long)o.seed);
  printf("%10s  %10s  %16s\n", "iteration", "NMSE dB", "energy");
  auto rows = tableRows(iters);
  for (size_t i = 0; i < ks.size(); ++i)
    if (std::find(rows.begin(), rows.end(), ks[i]) != rows.end())
      printf("%10lld  %10.2f  %16.8g\n", (long long)ks[i], nmse[i], energy[i]);
  if (!fista)
    printf("%lld of %lld steps increased the energy by more than %g relative (%lld by less, at "
           "most %.2g: round-off)\n",
           (long long)increases, (long long)iters, tol, (long long)roundoff, largestSmall);
  printf("%s = %.3g (the %s bound: <= 1), L = %.6g; %.2f s\n",
         fista ? "max (F_k - F*)(k+1)^2 / (2 L ||x*||^2)" : "max (F_k - F*) 2k / (L ||x*||^2)",
         rate, upper.c_str(), L, secs);
  if (!o.out.empty())
    printf("wrote %s/sparse_coding.{csv,json,svg}\n", o.out.c_str());
  return 0;
}

int unroll::hopfieldStudy(const Model &m, const nlohmann::json &e, const OptimizationOptions &o,
                          std::string &error) {
  if (e.value("schedule", "") != "cccp") {
    error = "--task hopfield needs an energy with schedule(cccp) (unroll.lse + unroll.sqnorm), "
            "got schedule '" +
            e.value("schedule", "?") + "'";
    return 2;
  }
  if (!e["dim"].is_number_integer()) {
    error = "the energy must have a static pattern size";
    return 2;
  }
  if (o.corrupt != "mask" && o.corrupt != "noise") {
    error = "--corrupt expects mask or noise, got '" + o.corrupt + "'";
    return 2;
  }
  int64_t d = e["dim"];
  int64_t N = o.patterns > 0 ? o.patterns : 1000, Q = o.samples > 0 ? o.samples : 1000;
  int64_t maxSteps = o.iterations > 0 ? o.iterations : 100;
  // The memory, the queries and the step's Q x N score matrices.
  if (!checkMemory(8.0 * (4.0 * (N + Q) * d + 4.0 * Q * N),
                   "retrieval of " + std::to_string(Q) + " queries from " + std::to_string(N) +
                       " patterns",
                   "--samples or --patterns", error))
    return 2;
  double beta = termValue(e, "lse", "beta");
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> N01(0.0, 1.0);
  auto unitRows = [&](int64_t rows) {
    std::vector<double> x(rows * d);
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c)
        s += (x[r * d + c] = N01(rng)) * x[r * d + c];
      for (int64_t c = 0; c < d; ++c)
        x[r * d + c] /= std::sqrt(s);
    }
    return x;
  };
  std::vector<double> X = unitRows(N);
  // Queries: a stored pattern with half its entries zeroed (mask), or with
  // noise of the same norm as the pattern (noise).
  std::vector<int64_t> source(Q);
  std::vector<double> q(Q * d);
  std::uniform_int_distribution<int64_t> pick(0, N - 1);
  for (int64_t i = 0; i < Q; ++i) {
    source[i] = pick(rng);
    std::vector<int64_t> idx(d);
    for (int64_t c = 0; c < d; ++c)
      idx[c] = c;
    std::shuffle(idx.begin(), idx.end(), rng);
    for (int64_t c = 0; c < d; ++c) {
      double v = X[source[i] * d + c];
      q[i * d + c] = o.corrupt == "mask" ? v : v + N01(rng) / std::sqrt((double)d);
    }
    if (o.corrupt == "mask")
      for (int64_t c = 0; c < d / 2; ++c)
        q[i * d + idx[c]] = 0.0;
  }
  // Retrieval error: the nearest stored pattern (largest dot product) is
  // not the source; distance: mean ‖ξ − x_src‖ / ‖x_src‖ (= ‖ξ − x_src‖).
  auto retrieval = [&](const std::vector<double> &xi, double &wrong, double &dist) {
    int64_t bad = 0;
    double dsum = 0;
    for (int64_t i = 0; i < Q; ++i) {
      int64_t best = 0;
      double bestDot = -1e300, dd = 0;
      for (int64_t p = 0; p < N; ++p) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += xi[i * d + c] * X[p * d + c];
        if (dot > bestDot)
          bestDot = dot, best = p;
      }
      for (int64_t c = 0; c < d; ++c)
        dd += std::pow(xi[i * d + c] - X[source[i] * d + c], 2);
      bad += best != source[i];
      dsum += std::sqrt(dd);
    }
    wrong = (double)bad / Q, dist = dsum / Q;
  };

  DescentInputs in;
  in.rows = Q, in.cols = d, in.xRows = N, in.xCols = d;
  in.x = X;
  in.theta.assign(e.value("num_params", (int64_t)0), 0.0);
  std::vector<double> xi = q, energies, wrongs, dists;
  std::vector<int64_t> stepsTo(Q, -1);
  double w0, d0;
  retrieval(xi, w0, d0);
  wrongs.push_back(w0), dists.push_back(d0);
  EnergyTrace tr;
  auto t0 = std::chrono::steady_clock::now();
  int64_t steps = 0;
  for (; steps < maxSteps; ++steps) {
    in.y0 = xi;
    if (!runEnergyDescent(m, e, in, 1, tr, error))
      return 1;
    if (steps == 0)
      energies.push_back(tr.energies[0]);
    energies.push_back(tr.energies[1]);
    bool all = true;
    for (int64_t i = 0; i < Q; ++i) {
      double delta = 0;
      for (int64_t c = 0; c < d; ++c)
        delta = std::max(delta, std::abs(tr.y[i * d + c] - xi[i * d + c]));
      if (stepsTo[i] < 0 && delta <= 1e-8)
        stepsTo[i] = steps + 1;
      all &= stepsTo[i] >= 0;
    }
    xi = tr.y;
    double w, dd;
    retrieval(xi, w, dd);
    wrongs.push_back(w), dists.push_back(dd);
    if (all) {
      ++steps;
      break;
    }
  }
  double seconds0 = seconds(t0);
  int64_t unconverged = std::count(stepsTo.begin(), stepsTo.end(), -1);
  double meanSteps = 0;
  for (int64_t s : stepsTo)
    meanSteps += s < 0 ? maxSteps : s;
  meanSteps /= Q;

  // Descent over 10,000 single-query cases: 10 memories × 1,000 queries
  // (half corrupted patterns, half random directions), 10 steps each.
  int64_t cases = 0, increases = 0, caseSteps = 10;
  double worst = 0;
  for (int memory = 0; memory < 10; ++memory) {
    DescentInputs one;
    one.rows = 1, one.cols = d, one.xRows = N, one.xCols = d;
    one.x = memory == 0 ? X : unitRows(N);
    one.theta = in.theta;
    for (int64_t i = 0; i < 1000; ++i, ++cases) {
      one.y0.resize(d);
      int64_t p = pick(rng);
      for (int64_t c = 0; c < d; ++c)
        one.y0[c] = i % 2 ? N01(rng) : one.x[p * d + c] + 0.5 * N01(rng) / std::sqrt((double)d);
      if (!runEnergyDescent(m, e, one, caseSteps, tr, error))
        return 1;
      for (size_t k = 1; k < tr.energies.size(); ++k) {
        double inc = tr.energies[k] - tr.energies[k - 1];
        if (inc > 1e-12 * std::max(1.0, std::abs(tr.energies[k - 1]))) {
          ++increases;
          worst = std::max(worst, inc / std::max(1e-300, std::abs(tr.energies[k - 1])));
        }
      }
    }
  }

  std::ostringstream csv;
  csv << "step,energy,retrieval_error,mean_distance\n";
  for (size_t k = 0; k < energies.size(); ++k)
    csv << k << ',' << energies[k] << ',' << wrongs[k] << ',' << dists[k] << '\n';
  nlohmann::json j{
      {"task", "hopfield"},
      {"energy", e["name"]},
      {"beta", beta},
      {"d", d},
      {"patterns", N},
      {"queries", Q},
      {"corrupt", o.corrupt},
      {"seed", o.seed},
      {"retrieval_error",
       {{"query", wrongs[0]}, {"one_step", wrongs[1]}, {"converged", wrongs.back()}}},
      {"mean_distance", {{"query", dists[0]}, {"one_step", dists[1]}, {"converged", dists.back()}}},
      {"steps", steps},
      {"mean_steps_to_converge", meanSteps},
      {"unconverged", unconverged},
      {"energy", energies},
      {"seconds", seconds0},
      {"descent_cases", cases},
      {"descent_steps", cases * caseSteps},
      {"energy_increases", increases},
      {"max_relative_increase", worst}};
  if (!writeOut(o, "hopfield.csv", csv.str(), error) ||
      !writeOut(o, "hopfield.json", j.dump(2) + "\n", error))
    return 1;
  if (!o.out.empty()) {
    PlotSpec spec;
    spec.title = "modern Hopfield retrieval, beta = " + std::to_string(beta).substr(0, 6) +
                 ", N = " + std::to_string(N) + ", d = " + std::to_string(d);
    spec.xLabel = "CCCP step";
    spec.yLabel = "fraction of queries retrieving the wrong pattern";
    Series s{"retrieval error", {}, wrongs};
    for (size_t k = 0; k < wrongs.size(); ++k)
      s.x.push_back(k);
    spec.series = {s};
    if (!writeSvg(o.out + "/hopfield.svg", spec, error))
      return 1;
  }
  if (o.json) {
    printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  printf("Hopfield retrieval @%s: beta = %g, %lld patterns of d = %lld, %lld queries (%s), "
         "seed %llu\n",
         e["name"].get<std::string>().c_str(), beta, (long long)N, (long long)d, (long long)Q,
         o.corrupt == "mask" ? "half the entries zeroed" : "noise of the pattern's norm",
         (unsigned long long)o.seed);
  printf("%6s  %18s  %16s  %18s\n", "step", "energy (sum)", "retrieval error", "mean |xi - x_src|");
  for (size_t k = 0; k < energies.size(); ++k)
    if (k < 4 || k + 1 == energies.size())
      printf("%6zu  %18.10g  %16.4f  %18.6f\n", k, energies[k], wrongs[k], dists[k]);
  printf("converged (max |change| <= 1e-8) in %.2f steps on average, %lld of %lld queries not "
         "within %lld steps; %.2f s\n",
         meanSteps, (long long)unconverged, (long long)Q, (long long)maxSteps, seconds0);
  printf("descent: %lld of %lld steps increased the energy over %lld single-query cases\n",
         (long long)increases, (long long)(cases * caseSteps), (long long)cases);
  if (!o.out.empty())
    printf("wrote %s/hopfield.{csv,json,svg}\n", o.out.c_str());
  return 0;
}
