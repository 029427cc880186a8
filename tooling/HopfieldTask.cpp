//===- HopfieldTask.cpp - --task hopfield ---------------------------------===//
//
// Retrieval of stored patterns from corrupted queries with the energy's
// compiled CCCP step, and the descent count over single-query cases.
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/Energy.h"
#include "unroll/runtime/ModelInfo.h"
#include "unroll/tooling/OptimizationTasks.h"
#include "unroll/tooling/Plot.h"
#include "unroll/tooling/Process.h"

#include "OptimizationCommon.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

namespace key = ::unroll::info;

using namespace unroll;
using namespace unroll::opt;

int unroll::hopfieldStudy(const Model &m, const nlohmann::json &e, const OptimizationOptions &o,
                          std::string &error) {
  if (!o.checkpoint.empty()) {
    error = "--checkpoint does not apply to --task hopfield (its energy has no trained parameters)";
    return 2;
  }
  if (e.value(key::kSchedule, "") != "cccp") {
    error = "--task hopfield needs an energy with schedule(cccp) (unroll.lse + unroll.sqnorm), "
            "got schedule '" +
            e.value(key::kSchedule, "?") + "'";
    return 2;
  }
  if (!e[key::kDim].is_number_integer()) {
    error = "the energy must have a static pattern size";
    return 2;
  }
  if (o.corrupt != "mask" && o.corrupt != "noise") {
    error = "--corrupt expects mask or noise, got '" + o.corrupt + "'";
    return 2;
  }
  int64_t d = e[key::kDim];
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
  in.theta.assign(e.value(key::kNumParams, (int64_t)0), 0.0);
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
      {"energy", e[key::kName]},
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
         e[key::kName].get<std::string>().c_str(), beta, (long long)N, (long long)d, (long long)Q,
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
