//===- energy-check.cpp - independent reference for compiled energies -----===//
//
// Recomputes what a compiled.so claims with plain loops written from the
// math (P1), not from the compiler's lowering:
//   * pair distances by explicit differences ½‖(y_i − y_j) W_a‖² (the
//     lowering uses the Gram-matrix identity),
//   * the FFN step as Y − α ∇E2 (the lowering folds it into W_fˢ),
//   * the certified step from its gradient by pair loops.
//
//   unroll-energy-check --compare M.so [--cases N] [--seed S] [--tol T]
//       traces and attention weights of random cases vs the reference
//   unroll-energy-check --study M.so [--cases N] [--expect-no-increase]
//       one step from random (n, d, scale): does E increase? (descent study)
//
//===----------------------------------------------------------------------===//
#include "EnergyReference.h"
#include "KernelReference.h"
#include "unroll/runtime/Energy.h"
#include "unroll/runtime/Model.h"
#include "unroll/tooling/Flags.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>

using namespace unroll;
using namespace unroll::testing;

namespace {

double relErr(double got, double want) {
  if (std::isinf(want) || std::isinf(got))
    return got == want ? 0 : INFINITY;
  return std::abs(got - want) / std::max(std::abs(want), 1e-12);
}

struct Args {
  std::string mode, model, energy;
  int64_t cases = 100;
  uint64_t seed = 0;
  double tol = -1;
  bool expectNoIncrease = false;
};

int fail(const std::string &m) {
  fprintf(stderr, "unroll-energy-check: error: %s\n", m.c_str());
  return 2;
}

/// Random case: sizes (fixed ones from the info), X, theta.
void drawCase(const nlohmann::json &e, std::mt19937_64 &rng, bool nonneg, double scale,
              EnergyInputs &in) {
  std::uniform_int_distribution<int64_t> nd(2, 12), dd(1, 8);
  std::normal_distribution<double> N(0, 1);
  in.n = e.contains("graph")       ? (int64_t)e["graph"].size()
         : e["tokens"].is_number() ? e["tokens"].get<int64_t>()
                                   : nd(rng);
  in.d = e["dim"].is_number() ? e["dim"].get<int64_t>() : dd(rng);
  in.x.resize(in.n * in.d);
  for (double &v : in.x)
    v = scale * (nonneg ? std::abs(N(rng)) : N(rng));
  in.theta.assign(e["num_params"].get<int64_t>(), 0.0);
  for (auto &p : e["params"]) {
    int64_t off = p["offset"], numel = 1;
    for (int64_t s : p["shape"])
      numel *= s;
    // A learnable step size starts at its value (perturbed, so that its
    // gradient is checked away from the initial point).
    for (int64_t i = 0; i < numel; ++i)
      in.theta[off + i] = p.value("init", "normal") == "constant"
                              ? p["value"].get<double>() * (1 + 0.1 * N(rng))
                              : p["std"].get<double>() * N(rng);
  }
}

/// Kernel energies: the trace against KernelRef (Y_prev = Y_0 at the first
/// step, as the compiled descent takes it).
int compareKernel(const Args &a, const Model &m, const nlohmann::json &e) {
  KernelRef ref(e, e["params"]);
  bool f32 = m.info()["element_type"] == "f32";
  double tol = a.tol > 0 ? a.tol : f32 ? 1e-4 : 1e-9;
  std::mt19937_64 rng(a.seed);
  int64_t iters = e["iterations"];
  double worstE = 0, worstY = 0;
  for (int64_t c = 0; c < a.cases; ++c) {
    EnergyInputs in;
    drawCase(e, rng, false, 1.0, in);
    EnergyTrace tr;
    std::string err;
    if (!runEnergyTrace(m, e, in, iters, tr, err))
      return fail(err);
    Mat y = in.x, prev = in.x;
    // Energies are compared against the larger of E(Y_0) and themselves:
    // they fall to zero, where a relative error means nothing.
    double e0 = std::abs(ref.energy(y, in.x, in.n, in.d, in.theta));
    for (int64_t t = 0; t <= iters; ++t) {
      if (t > 0) {
        Mat next = ref.step(y, in.x, prev, t - 1, in.n, in.d, in.theta);
        prev = y;
        y = next;
      }
      double want = ref.energy(y, in.x, in.n, in.d, in.theta);
      worstE =
          std::max(worstE, std::abs(tr.energies[t] - want) / std::max({e0, std::abs(want), 1e-12}));
    }
    double ymax = 0;
    for (double v : y)
      ymax = std::max(ymax, std::abs(v));
    for (size_t i = 0; i < y.size(); ++i)
      worstY = std::max(worstY, std::abs(tr.y[i] - y[i]) / std::max(ymax, 1e-12));
  }
  bool ok = worstE <= tol && worstY <= tol;
  printf("energy @%s (schedule %s, kernel %s, mask %s): %lld cases x %lld iterations: max error "
         "E %.3g (relative to max(|E(Y_0)|, |E|)), Y %.3g (tolerance %.0e)\n",
         e["name"].get<std::string>().c_str(), ref.schedule.c_str(), ref.kernel.c_str(),
         ref.mask.c_str(), (long long)a.cases, (long long)iters, worstE, worstY, tol);
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int compare(const Args &a, const Model &m, const nlohmann::json &e) {
  if (KernelRef::isKernelSchedule(e["schedule"]))
    return compareKernel(a, m, e);
  Ref ref(e, e["params"]);
  bool f32 = m.info()["element_type"] == "f32";
  double tol = a.tol > 0 ? a.tol : f32 ? 1e-4 : 1e-9;
  std::mt19937_64 rng(a.seed);
  int64_t iters = e["iterations"];
  double worstE = 0, worstY = 0, worstA = 0;
  for (int64_t c = 0; c < a.cases; ++c) {
    EnergyInputs in;
    drawCase(e, rng, ref.hasNonNeg, 1.0, in);
    EnergyTrace tr;
    std::string err;
    if (!runEnergyTrace(m, e, in, iters, tr, err))
      return fail(err);
    if (getenv("UNROLL_CHECK_VERBOSE")) {
      fprintf(stderr, "X =");
      for (double v : in.x)
        fprintf(stderr, " %.17g", v);
      fprintf(stderr, "\n");
    }
    Mat y = in.x;
    for (int64_t t = 0; t <= iters; ++t) {
      if (t > 0)
        y = ref.step(y, in.x, in.n, in.d, in.theta);
      double want = ref.energy(y, in.x, in.n, in.d, in.theta);
      worstE = std::max(worstE, relErr(tr.energies[t], want));
      if (getenv("UNROLL_CHECK_VERBOSE"))
        fprintf(stderr, "case %lld (n %lld, d %lld) t %lld: compiled %.17g reference %.17g\n",
                (long long)c, (long long)in.n, (long long)in.d, (long long)t, tr.energies[t], want);
    }
    double ymax = 0;
    for (double v : y)
      ymax = std::max(ymax, std::abs(v));
    for (size_t i = 0; i < y.size(); ++i)
      worstY = std::max(worstY, std::abs(tr.y[i] - y[i]) / std::max(ymax, 1e-12));
    // Attention weights at X, element-wise relative.
    std::vector<double> got;
    if (!attentionWeights(m, e, in, got, err))
      return fail(err);
    Mat want = ref.attentionMatrix(in.x, in.n, in.d, in.theta);
    for (size_t i = 0; i < want.size(); ++i)
      if (want[i] > 1e-200 || got[i] != 0)
        worstA = std::max(worstA, relErr(got[i], want[i]));
  }
  bool ok = worstE <= tol && worstY <= tol && worstA <= std::max(tol, 1e-6 * (f32 ? 100 : 1));
  printf("energy @%s: %lld cases x %lld iterations: max rel. error E %.3g, Y %.3g, "
         "attention weights %.3g (tolerance %.0e)\n",
         e["name"].get<std::string>().c_str(), (long long)a.cases, (long long)iters, worstE, worstY,
         worstA, tol);
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int study(const Args &a, const Model &m, const nlohmann::json &e) {
  Ref ref(e, e["params"]);
  // Rounding scales of the model's element type: a step may deviate from the
  // reference by `stepTol`, and an increase of E below `roundTol` relative
  // is rounding, not a failure to descend.
  bool f32 = m.info()["element_type"] == "f32";
  double stepTol = a.tol > 0 ? a.tol : f32 ? 1e-4 : 1e-8;
  double roundTol = f32 ? 1e-6 : 1e-12;
  std::mt19937_64 rng(a.seed);
  std::uniform_real_distribution<double> logScale(std::log(0.1), std::log(4.0));
  int64_t increases = 0, beyondRounding = 0, mismatches = 0;
  double worst = 0, worstStep = 0;
  for (int64_t c = 0; c < a.cases; ++c) {
    EnergyInputs in;
    drawCase(e, rng, ref.hasNonNeg, std::exp(logScale(rng)), in);
    EnergyTrace tr;
    std::string err;
    if (!runEnergyTrace(m, e, in, 1, tr, err))
      return fail(err);
    // The compiled step must be the reference step ...
    Mat want = ref.step(in.x, in.x, in.n, in.d, in.theta);
    double ymax = 0, dev = 0;
    for (double v : want)
      ymax = std::max(ymax, std::abs(v));
    for (size_t i = 0; i < want.size(); ++i)
      dev = std::max(dev, std::abs(tr.y[i] - want[i]) / std::max(ymax, 1e-12));
    worstStep = std::max(worstStep, dev);
    if (dev > stepTol)
      ++mismatches;
    // ... and E is judged by the reference energy, not the compiled one.
    double e0 = ref.energy(in.x, in.x, in.n, in.d, in.theta);
    double e1 = ref.energy(tr.y, in.x, in.n, in.d, in.theta);
    if (e1 > e0) {
      ++increases;
      double rel = (e1 - e0) / std::max(std::abs(e0), 1e-300);
      worst = std::max(worst, rel);
      if (rel > roundTol)
        ++beyondRounding;
    }
  }
  printf("descent study @%s (rho %s, attention %s, mask %s): %lld random cases "
         "(n 2-12, d 1-8, scale 0.1-4)\n",
         e["name"].get<std::string>().c_str(), ref.rho.c_str(), ref.attention.c_str(),
         ref.mask.c_str(), (long long)a.cases);
  printf("  steps that increased E: %lld (beyond %.0e relative: %lld; largest relative "
         "increase %.3g)\n",
         (long long)increases, roundTol, (long long)beyondRounding, worst);
  printf("  compiled step vs reference step: max rel. deviation %.3g, mismatches %lld\n", worstStep,
         (long long)mismatches);
  nlohmann::json j{{"energy", e["name"]},
                   {"rho", ref.rho},
                   {"attention", ref.attention},
                   {"cases", a.cases},
                   {"increases", increases},
                   {"increases_beyond_rounding", beyondRounding},
                   {"max_relative_increase", worst},
                   {"step_mismatches", mismatches}};
  printf("  json: %s\n", j.dump().c_str());
  bool ok = mismatches == 0 && (!a.expectNoIncrease || beyondRounding == 0);
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

/// Central differences of f(theta, X) = <C, Y_T> against the compiled VJP.
int gradcheck(const Args &a, const Model &m, const nlohmann::json &e) {
  if (m.info()["element_type"] != "f64")
    return fail("--gradcheck needs an energy compiled in f64");
  bool kernelEnergy = KernelRef::isKernelSchedule(e["schedule"]);
  bool nonneg = !kernelEnergy && Ref(e, e["params"]).hasNonNeg;
  std::string rho = e["rho"].is_string() ? e["rho"].get<std::string>() : "-";
  std::mt19937_64 rng(a.seed);
  std::normal_distribution<double> N(0, 1);
  int64_t iters = e["iterations"];
  double tol = a.tol > 0 ? a.tol : 1e-6, worstAll = 0;
  for (int64_t c = 0; c < a.cases; ++c) {
    EnergyInputs in;
    drawCase(e, rng, nonneg, 1.0, in);
    std::vector<double> cot(in.x.size());
    for (double &v : cot)
      v = N(rng);
    std::string err;
    auto f = [&](const EnergyInputs &q) {
      EnergyTrace tr;
      if (!runEnergyTrace(m, e, q, iters, tr, err)) {
        fail(err);
        exit(2);
      }
      double s = 0;
      for (size_t i = 0; i < cot.size(); ++i)
        s += cot[i] * tr.y[i];
      return s;
    };
    std::vector<double> dx, grad;
    if (!energyVJP(m, e, in, iters, cot, dx, grad, err))
      return fail(err);
    // Every parameter tensor, then X; up to 8 entries each.
    std::vector<
        std::tuple<std::string, std::vector<double> *, int64_t, int64_t, std::vector<double> *>>
        tensors;
    for (auto &p : e["params"]) {
      int64_t off = p["offset"], numel = 1;
      for (int64_t s : p["shape"])
        numel *= s;
      tensors.push_back({p["name"], &in.theta, off, numel, &grad});
    }
    tensors.push_back({"X", &in.x, 0, (int64_t)in.x.size(), &dx});
    for (auto &[name, vec, off, numel, g] : tensors) {
      double worst = 0, scale = 0;
      for (int64_t k = 0; k < std::min<int64_t>(numel, 8); ++k) {
        int64_t i = off + (numel <= 8 ? k : (int64_t)(rng() % numel));
        double keep = (*vec)[i], h = 1e-6 * std::max(1.0, std::abs(keep));
        (*vec)[i] = keep + h;
        double fp = f(in);
        (*vec)[i] = keep - h;
        double fm = f(in);
        (*vec)[i] = keep;
        double fd = (fp - fm) / (2 * h), got = (*g)[i];
        scale = std::max({scale, std::abs(fd), std::abs(got)});
        worst = std::max(worst, std::abs(fd - got));
      }
      double rel = worst / std::max(scale, 1e-8);
      worstAll = std::max(worstAll, rel);
      if (c == 0)
        printf("  %-10s max |fd - vjp| / max |vjp| = %.3g\n", name.c_str(), rel);
    }
  }
  bool ok = worstAll <= tol;
  printf("gradient check @%s (rho %s, %lld iterations, %lld cases): max relative error %.3g "
         "(tolerance %.0e)\n",
         e["name"].get<std::string>().c_str(), rho.c_str(), (long long)iters, (long long)a.cases,
         worstAll, tol);
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  Args a;
  auto mode = [&a](const char *name) {
    return [&a, name](const std::string &v, std::string &) {
      a.mode = name;
      a.model = v;
      return true;
    };
  };
  FlagTable t("unroll-energy-check",
              "unroll-energy-check (--compare|--study|--gradcheck) MODEL.so [options]",
              "Checks a compiled energy against the plain reference loops of this tool.");
  t.section("Modes")
      .option("--compare", "MODEL.so",
              "traces and attention weights of random cases against the reference", mode("compare"))
      .option("--study", "MODEL.so",
              "one step from random (n, d, scale): does E increase? (descent study)", mode("study"))
      .option("--gradcheck", "MODEL.so", "the descent's VJP against central differences",
              mode("gradcheck"))
      .section("Options")
      .option("--cases", "N", "random cases", setInteger("--cases", 1, a.cases))
      .option("--seed", "S", "random seed", setSeed("--seed", a.seed))
      .option("--tol", "T", "tolerance (default: the mode's)", setPositive("--tol", a.tol))
      .option("--energy", "NAME", "which energy of the library", setText(a.energy))
      .flag("--expect-no-increase", "--study: fail if any step increases E",
            [&a] { a.expectNoIncrease = true; });
  if (FlagTable::wantsHelp(argc, argv)) {
    fputs(t.usage().c_str(), stdout);
    return 0;
  }
  std::vector<std::string> positional;
  std::string parseErr;
  if (!t.parse(argc, argv, positional, parseErr))
    return fail(parseErr);
  if (a.mode.empty() || !positional.empty())
    return fail(t.usage());
  Model m;
  std::string err;
  if (!m.load(a.model, err))
    return fail(err);
  const nlohmann::json *e = findEnergy(m, a.energy, err);
  if (!e)
    return fail(err);
  if (a.mode == "gradcheck")
    return gradcheck(a, m, *e);
  return a.mode == "compare" ? compare(a, m, *e) : study(a, m, *e);
}
