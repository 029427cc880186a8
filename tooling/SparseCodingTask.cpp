//===- SparseCodingTask.cpp - --task sparse_coding ------------------------===//
//
// The problem (a Gaussian dictionary with unit columns, Bernoulli-Gaussian
// codes) is generated here; every step is the energy's compiled descent
// (@E_descend): ISTA, FISTA (schedule fista: the momentum is in the compiled
// loop); learned unrollings go to LearnedUnrolling.cpp.
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/Energy.h"
#include "unroll/runtime/ModelInfo.h"
#include "unroll/tooling/Distributed.h"
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

namespace {

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

int unroll::sparseCodingStudy(const Model &m, const nlohmann::json &e, const OptimizationOptions &o,
                              std::string &error) {
  if (e.value(key::kSchedule, "") != "ista" && e.value(key::kSchedule, "") != "fista") {
    error = "--task sparse_coding needs an energy with schedule(ista) or schedule(fista) "
            "(unroll.lsq + unroll.l1), got schedule '" +
            e.value(key::kSchedule, "?") + "'";
    return 2;
  }
  if (!e[key::kDim].is_number_integer() || !e[key::kInputDim].is_number_integer()) {
    error = "the energy must have static code and measurement sizes";
    return 2;
  }
  int64_t n = e[key::kDim], mm = e[key::kInputDim];
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
  // The dictionary (--dictionary's, or drawn from --dict-seed's stream),
  // then the validation set from --seed's (the same for every energy of
  // these sizes and seeds).
  std::vector<double> A;
  if (!problemDictionary(o, mm, n, A, error))
    return 2;
  std::mt19937_64 rng(o.seed);
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
  in.theta.assign(e.value(key::kNumParams, (int64_t)0), 0.0);
  std::copy(A.begin(), A.end(), in.theta.begin() + aOff);
  double L = lipschitz(A, mm, n);
  // The dictionary is the problem's (fixed or not in the IR); any other
  // parameter not marked fixed is trained.
  bool learned = false;
  for (const auto &p : e[key::kParams])
    learned |= !p.value(key::kFixed, false) && p[key::kOffset].get<int64_t>() != aOff;
  if (!learned && (!o.checkpoint.empty() || o.resume)) {
    error = std::string(o.resume ? "--resume" : "--checkpoint") + ": energy @" +
            e[key::kName].get<std::string>() +
            " has no trained parameters (a learned unrolling has some)";
    return 2;
  }
  if (!learned && world().distributed()) {
    // Only training is data-parallel: rank 0 does the rest alone.
    if (!world().root())
      return 0;
    fprintf(stderr, "note: only training runs on several ranks; rank 0 does this alone\n");
  }
  if (learned)
    return learnedStudy(m, e, o, A, aOff, mm, n, L, lambda, xs, in, error);

  // ISTA is memoryless: one compiled step at a time from x_0 = 0 gives every
  // iterate. FISTA carries the previous iterate inside its descent: one call
  // per reported k (0 … 16, then powers of two, then the last), and the
  // energy trace of the longest call for every k.
  bool fista = e.value(key::kSchedule, "") == "fista";
  std::vector<int64_t> ks;
  std::vector<double> nmse, energy, trace;
  EnergyTrace tr;
  auto t0 = std::chrono::steady_clock::now();
  // An increase counts past the round-off of the library's energy (a sum of
  // rows × n terms): 1e-5 relative in f32, 1e-12 in f64. Smaller ones are
  // counted apart.
  bool f32 = m.info().value(key::kElementType, "") == "f32";
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
                   {"energy", e[key::kName]},
                   {"schedule", sched},
                   {"m", mm},
                   {"n", n},
                   {"lambda", lambda},
                   {"samples", samples},
                   {"snr_db", o.snrDb >= 0 ? nlohmann::json(o.snrDb) : nlohmann::json(nullptr)},
                   {"iterations", ks},
                   {"seed", o.seed},
                   {"dict_seed", o.dictionary.empty() ? nlohmann::json(o.dictSeed) : nlohmann::json(nullptr)},
                   {"dictionary", o.dictionary.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.dictionary)},
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
                 upper + " (compiled @" + e[key::kName].get<std::string>() + ")";
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
  printf("sparse coding @%s (%s): m = %lld, n = %lld, lambda = %g, %lld samples, %s, seed %llu%s\n",
         e[key::kName].get<std::string>().c_str(), upper.c_str(), (long long)mm, (long long)n,
         lambda, (long long)samples,
         o.snrDb >= 0 ? ("SNR " + std::to_string((int)o.snrDb) + " dB").c_str() : "noiseless",
         (unsigned long long)o.seed,
         o.dictionary.empty() ? "" : (", " + dictionaryName(o)).c_str());
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
