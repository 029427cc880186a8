//===- Optimization.cpp - sparse coding and Hopfield tasks ----------------===//
//
// The problems are generated here; every step is the energy's compiled
// descent (@E_descend). FISTA is FISTA's extrapolation (Beck & Teboulle's
// t_k) around the same compiled proximal-gradient step.
//
//===----------------------------------------------------------------------===//
#include "unroll/tooling/Optimization.h"
#include "unroll/runtime/Energy.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Plot.h"

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

} // namespace

int unroll::sparseCodingStudy(const Model &m, const nlohmann::json &e,
                              const OptimizationOptions &o, std::string &error) {
  if (e.value("schedule", "") != "ista") {
    error = "--task sparse_coding needs an energy with schedule(ista) (unroll.lsq + unroll.l1), "
            "got schedule '" +
            e.value("schedule", "?") + "'";
    return 2;
  }
  if (!e["dim"].is_number_integer() || !e["input_dim"].is_number_integer()) {
    error = "the energy must have static code and measurement sizes";
    return 2;
  }
  int64_t n = e["dim"], mm = e["input_dim"];
  int64_t samples = o.samples > 0 ? o.samples : 1000;
  int64_t iters = o.iterations >= 0 ? o.iterations : 1000;
  double lambda = termValue(e, "l1", "lambda");
  int64_t aOff = 0;
  if (!paramOffset(e, "lsq", "dict", aOff, error))
    return 2;
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> N01(0.0, 1.0);
  std::bernoulli_distribution support(0.1);
  // A_ij ~ N(0, 1/m), columns scaled to unit norm.
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
  // x* with Bernoulli(0.1) support and N(0, 1) values; b = A x* (+ noise).
  std::vector<double> xs(samples * n), b(samples * mm, 0.0);
  for (double &v : xs)
    v = support(rng) ? N01(rng) : 0.0;
  for (int64_t s = 0; s < samples; ++s)
    for (int64_t i = 0; i < mm; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j)
        acc += A[i * n + j] * xs[s * n + j];
      b[s * mm + i] = acc;
    }
  if (o.snrDb >= 0) {
    double power = 0;
    for (double v : b)
      power += v * v;
    double sigma = std::sqrt(power / b.size() / std::pow(10.0, o.snrDb / 10.0));
    for (double &v : b)
      v += sigma * N01(rng);
  }
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

  // ISTA: one compiled step at a time from x_0 = 0.
  std::vector<double> istaNmse{0.0}, istaE, fistaNmse{0.0}, fistaE;
  std::vector<double> x(samples * n, 0.0);
  EnergyTrace tr;
  auto t0 = std::chrono::steady_clock::now();
  int64_t increases = 0;
  for (int64_t k = 0; k < iters; ++k) {
    in.y0 = x;
    if (!runEnergyDescent(m, e, in, 1, tr, error))
      return 1;
    if (k == 0)
      istaE.push_back(tr.energies[0]);
    istaE.push_back(tr.energies[1]);
    increases += tr.energies[1] > tr.energies[0] * (1 + 1e-12) + 1e-300;
    x = tr.y;
    istaNmse.push_back(nmseDb(x));
  }
  double istaSeconds = seconds(t0);
  std::vector<double> istaFinal = x;

  // FISTA: x_{k+1} = step(x_k + (t_k − 1)/t_{k+1} (x_k − x_{k−1})).
  std::vector<double> prev(samples * n, 0.0), cur = prev, z(samples * n);
  double t = 1.0;
  t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < iters; ++k) {
    double tn = 0.5 * (1.0 + std::sqrt(1.0 + 4.0 * t * t)), mu = (t - 1.0) / tn;
    for (size_t i = 0; i < z.size(); ++i)
      z[i] = cur[i] + mu * (cur[i] - prev[i]);
    in.y0 = z;
    if (!runEnergyDescent(m, e, in, 1, tr, error))
      return 1;
    if (k == 0)
      fistaE.push_back(tr.energies[0]);
    fistaE.push_back(tr.energies[1]);
    prev = cur, cur = tr.y, t = tn;
    fistaNmse.push_back(nmseDb(cur));
  }
  double fistaSeconds = seconds(t0);
  // FISTA's guarantee F(x_k) − F* ≤ 2 L ‖x_0 − x̂‖² / (k + 1)², with F* and x̂
  // the lowest energy reached and its point: the constant it implies.
  double fStar = std::min(*std::min_element(istaE.begin(), istaE.end()),
                          *std::min_element(fistaE.begin(), fistaE.end()));
  const std::vector<double> &xhat = fistaE.back() <= istaE.back() ? cur : istaFinal;
  double xhatNorm = 0;
  for (double v : xhat)
    xhatNorm += v * v;
  // L from a long power method on AᵀA, here (independent of the step's).
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
  double rate = 0;
  for (size_t k = 1; k < fistaE.size(); ++k)
    rate = std::max(rate, (fistaE[k] - fStar) * (k + 1.0) * (k + 1.0) / (2 * L * xhatNorm));

  auto rows = tableRows(iters);
  std::ostringstream csv;
  csv << "iteration,ista_nmse_db,fista_nmse_db,ista_energy,fista_energy\n";
  for (int64_t k = 0; k <= iters; ++k)
    csv << k << ',' << istaNmse[k] << ',' << fistaNmse[k] << ',' << istaE[k] << ',' << fistaE[k]
        << '\n';
  nlohmann::json j{{"task", "sparse_coding"},
                   {"energy", e["name"]},
                   {"m", mm},
                   {"n", n},
                   {"lambda", lambda},
                   {"samples", samples},
                   {"snr_db", o.snrDb >= 0 ? nlohmann::json(o.snrDb) : nlohmann::json(nullptr)},
                   {"iterations", iters},
                   {"seed", o.seed},
                   {"lipschitz", L},
                   {"ista", {{"nmse_db", istaNmse}, {"energy", istaE}, {"seconds", istaSeconds},
                             {"energy_increases", increases}}},
                   {"fista", {{"nmse_db", fistaNmse}, {"energy", fistaE}, {"seconds", fistaSeconds},
                              {"rate_constant", rate}}}};
  if (!writeOut(o, "sparse_coding.csv", csv.str(), error) ||
      !writeOut(o, "sparse_coding.json", j.dump(2) + "\n", error))
    return 1;
  if (!o.out.empty()) {
    PlotSpec spec;
    spec.title = "sparse coding, m = " + std::to_string(mm) + ", n = " + std::to_string(n) +
                 ": NMSE of ISTA and FISTA (compiled step @" + e["name"].get<std::string>() + ")";
    spec.xLabel = "iteration k";
    spec.yLabel = "NMSE (dB)";
    Series si{"ISTA", {}, istaNmse}, sf{"FISTA", {}, fistaNmse};
    for (int64_t k = 0; k <= iters; ++k)
      si.x.push_back(k), sf.x.push_back(k);
    spec.series = {si, sf};
    if (!writeSvg(o.out + "/sparse_coding.svg", spec, error))
      return 1;
  }
  if (o.json) {
    printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  printf("sparse coding @%s: m = %lld, n = %lld, lambda = %g, %lld samples, %s, seed %llu\n",
         e["name"].get<std::string>().c_str(), (long long)mm, (long long)n, lambda,
         (long long)samples,
         o.snrDb >= 0 ? ("SNR " + std::to_string((int)o.snrDb) + " dB").c_str() : "noiseless",
         (unsigned long long)o.seed);
  printf("%10s  %14s  %14s  %16s  %16s\n", "iteration", "ISTA NMSE dB", "FISTA NMSE dB",
         "ISTA energy", "FISTA energy");
  for (int64_t k : rows)
    printf("%10lld  %14.2f  %14.2f  %16.8g  %16.8g\n", (long long)k, istaNmse[k], fistaNmse[k],
           istaE[k], fistaE[k]);
  printf("ISTA: %lld of %lld steps increased the energy; %.2f s. FISTA: %.2f s; "
         "max (F_k - F*)(k+1)^2 / (2 L ||x*||^2) = %.3g (FISTA's bound: <= 1), L = %.6g\n",
         (long long)increases, (long long)iters, istaSeconds, fistaSeconds, rate, L);
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
  nlohmann::json j{{"task", "hopfield"},
                   {"energy", e["name"]},
                   {"beta", beta},
                   {"d", d},
                   {"patterns", N},
                   {"queries", Q},
                   {"corrupt", o.corrupt},
                   {"seed", o.seed},
                   {"retrieval_error", {{"query", wrongs[0]}, {"one_step", wrongs[1]},
                                        {"converged", wrongs.back()}}},
                   {"mean_distance", {{"query", dists[0]}, {"one_step", dists[1]},
                                      {"converged", dists.back()}}},
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
