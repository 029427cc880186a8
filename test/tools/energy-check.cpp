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
#include "unroll/runtime/Energy.h"
#include "unroll/runtime/Model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>

using namespace unroll;
using Mat = std::vector<double>; // row-major

namespace {

struct Ref {
  const nlohmann::json &e;
  std::string rho, mask, form, schedule, attention;
  std::vector<std::vector<int>> graph;
  double alpha = 0;
  // The terms: names of parameters (empty = absent).
  std::string proj, quadW;
  bool hasSq = false, sqCenterX = false, hasNonNeg = false;
  double sqCoeff = 0;

  explicit Ref(const nlohmann::json &e) : e(e) {
    rho = e["rho"];
    mask = e["mask"];
    form = e.value("weight_form", "general");
    schedule = e["schedule"];
    attention = e["attention"];
    alpha = e.value("alpha", 0.0);
    if (e.contains("graph"))
      graph = e["graph"].get<std::vector<std::vector<int>>>();
    for (auto &t : e["terms"]) {
      std::string op = t["op"];
      if (op == "pairwise" && t["proj"].is_string())
        proj = t["proj"];
      if (op == "quadratic")
        quadW = t["weight"];
      if (op == "sqnorm") {
        hasSq = true;
        sqCoeff = t["coeff"];
        sqCenterX = t["center"] == "X";
      }
      if (op == "nonneg")
        hasNonNeg = true;
    }
  }

  /// A parameter as a matrix view (rows, cols, data).
  struct P {
    int64_t r = 0, c = 0;
    const double *v = nullptr;
  };
  P param(const std::string &name, const Mat &theta) const {
    for (auto &p : e["params"])
      if (p["name"] == name)
        return {p["shape"][0], p["shape"][1], theta.data() + p["offset"].get<int64_t>()};
    return {};
  }

  double rhoOf(double z) const {
    if (rho == "neg_exp")
      return -std::exp(-z);
    if (rho == "log_plus_two")
      return std::log(z + 2);
    if (rho == "log_plus_one")
      return std::log(z + 1);
    if (rho == "custom")
      return 2 * std::sqrt(1 + z); // examples/custom_rho_energy.mlir
    abort();
  }
  double rhoPrime(double z) const {
    if (rho == "neg_exp")
      return std::exp(-z);
    if (rho == "log_plus_two")
      return 1 / (z + 2);
    if (rho == "log_plus_one")
      return 1 / (z + 1);
    if (rho == "custom")
      return 1 / std::sqrt(1 + z);
    abort();
  }
  bool keep(int64_t i, int64_t j) const {
    if (mask == "causal")
      return j <= i;
    if (mask == "graph")
      return graph[i][j] != 0;
    return true;
  }

  /// U = Y W_a (or Y).
  Mat project(const Mat &y, int64_t n, int64_t d, const Mat &theta, int64_t &k) const {
    if (proj.empty()) {
      k = d;
      return y;
    }
    P a = param(proj, theta);
    k = a.c;
    Mat u(n * k, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < k; ++c)
        for (int64_t r = 0; r < d; ++r)
          u[i * k + c] += y[i * d + r] * a.v[r * k + c];
    return u;
  }
  Mat pairZ(const Mat &u, int64_t n, int64_t k) const {
    Mat z(n * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t c = 0; c < k; ++c) {
          double t = u[i * k + c] - u[j * k + c];
          s += t * t;
        }
        z[i * n + j] = 0.5 * s;
      }
    return z;
  }

  double energy(const Mat &y, const Mat &x, int64_t n, int64_t d, const Mat &theta) const {
    int64_t k;
    Mat u = project(y, n, d, theta, k); // sets k
    Mat z = pairZ(u, n, k);
    double E = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (keep(i, j))
          E += rhoOf(z[i * n + j]);
    if (!quadW.empty()) { // ½ Σ_i y_i W y_iᵀ
      P w = param(quadW, theta);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t a = 0; a < d; ++a)
          for (int64_t b = 0; b < d; ++b)
            E += 0.5 * y[i * d + a] * w.v[a * d + b] * y[i * d + b];
    }
    if (hasSq)
      for (int64_t i = 0; i < n * d; ++i) {
        double t = y[i] - (sqCenterX ? x[i] : 0.0);
        E += 0.5 * sqCoeff * t * t;
      }
    if (hasNonNeg)
      for (double v : y)
        if (v < 0)
          return INFINITY;
    return E;
  }

  /// Normalized attention matrix of the MM step at Y.
  Mat attentionMatrix(const Mat &y, int64_t n, int64_t d, const Mat &theta) const {
    int64_t k;
    Mat u = project(y, n, d, theta, k);
    Mat a(n * n, 0.0);
    if (form == "softmax") { // canonical softmax of u_i·u_j over kept pairs
      for (int64_t i = 0; i < n; ++i) {
        double mx = -INFINITY;
        std::vector<double> l(n);
        for (int64_t j = 0; j < n; ++j) {
          l[j] = 0;
          for (int64_t c = 0; c < k; ++c)
            l[j] += u[i * k + c] * u[j * k + c];
          if (keep(i, j))
            mx = std::max(mx, l[j]);
        }
        double s = 0;
        for (int64_t j = 0; j < n; ++j)
          if (keep(i, j))
            s += (a[i * n + j] = std::exp(l[j] - mx));
        for (int64_t j = 0; j < n; ++j)
          a[i * n + j] /= s;
      }
      return a;
    }
    // w_ij = ρ'(z_ij): for ρ = −exp(−z) this is the reweighted softmax.
    Mat z = pairZ(u, n, k);
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j)
        if (keep(i, j))
          s += (a[i * n + j] = rhoPrime(z[i * n + j]));
      if (s > 0)
        for (int64_t j = 0; j < n; ++j)
          a[i * n + j] /= s;
      else
        a[i * n + i] = 1;
    }
    return a;
  }

  Mat mmStep(const Mat &y, const Mat &x, int64_t n, int64_t d, const Mat &theta) const {
    Mat out(n * d, 0.0);
    if (attention == "paper") {
      Mat a = attentionMatrix(y, n, d, theta);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t c = 0; c < d; ++c)
            out[i * d + c] += a[i * n + j] * y[j * d + c];
      return out;
    }
    // Certified: Y − ∇M(Y)/L, ∇_i M = Σ_j w̃_ij (y_i − y_j) S + c (y_i − c_i).
    int64_t k;
    Mat u = project(y, n, d, theta, k); // sets k
    Mat z = pairZ(u, n, k);
    Mat w(n * n, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (keep(i, j))
          w[i * n + j] = rhoPrime(z[i * n + j]);
    Mat S(d * d, 0.0);
    double frob = 1;
    if (!proj.empty()) {
      P a = param(proj, theta);
      frob = 0;
      for (int64_t r = 0; r < a.r * a.c; ++r)
        frob += a.v[r] * a.v[r];
      for (int64_t p = 0; p < d; ++p)
        for (int64_t q = 0; q < d; ++q)
          for (int64_t c = 0; c < a.c; ++c)
            S[p * d + q] += a.v[p * a.c + c] * a.v[q * a.c + c];
    } else {
      for (int64_t p = 0; p < d; ++p)
        S[p * d + p] = 1;
    }
    double dmax = 0, c = hasSq && attention == "certified" ? sqCoeff : 0;
    for (int64_t i = 0; i < n; ++i) {
      double deg = 0;
      for (int64_t j = 0; j < n; ++j)
        deg += w[i * n + j] + w[j * n + i];
      dmax = std::max(dmax, deg);
    }
    double L = 2 * dmax * frob + c;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> g(d, 0.0), diff(d, 0.0);
      for (int64_t j = 0; j < n; ++j) {
        double wt = w[i * n + j] + w[j * n + i];
        for (int64_t p = 0; p < d; ++p)
          diff[p] = y[i * d + p] - y[j * d + p];
        for (int64_t q = 0; q < d; ++q)
          for (int64_t p = 0; p < d; ++p)
            g[q] += wt * diff[p] * S[p * d + q];
      }
      for (int64_t q = 0; q < d; ++q) {
        double r = y[i * d + q] - (sqCenterX ? x[i * d + q] : 0.0);
        g[q] += c * r;
        out[i * d + q] = y[i * d + q] - (L > 0 ? g[q] / L : 0.0);
      }
    }
    return out;
  }

  /// Y − α ∇(½Tr(YWYᵀ) + c/2‖Y − C‖²).
  Mat gradStep(const Mat &y, const Mat &x, int64_t n, int64_t d, const Mat &theta) const {
    P w = param(quadW, theta);
    double c = hasSq ? sqCoeff : 0;
    Mat out(n * d);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t q = 0; q < d; ++q) {
        double g = 0;
        for (int64_t p = 0; p < d; ++p)
          g += 0.5 * y[i * d + p] * (w.v[p * d + q] + w.v[q * d + p]);
        g += c * (y[i * d + q] - (sqCenterX ? x[i * d + q] : 0.0));
        out[i * d + q] = y[i * d + q] - alpha * g;
      }
    return out;
  }

  Mat step(const Mat &y, const Mat &x, int64_t n, int64_t d, const Mat &theta) const {
    Mat r = mmStep(y, x, n, d, theta);
    if (schedule != "single")
      r = gradStep(r, x, n, d, theta);
    if (schedule == "proximal_aim")
      for (double &v : r)
        v = std::max(v, 0.0);
    return r;
  }
};

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
    int64_t off = p["offset"], numel = p["shape"][0].get<int64_t>() * p["shape"][1].get<int64_t>();
    for (int64_t i = 0; i < numel; ++i)
      in.theta[off + i] = p["std"].get<double>() * N(rng);
  }
}

int compare(const Args &a, const Model &m, const nlohmann::json &e) {
  Ref ref(e);
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
  Ref ref(e);
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
  Ref ref(e);
  std::mt19937_64 rng(a.seed);
  std::normal_distribution<double> N(0, 1);
  int64_t iters = e["iterations"];
  double tol = a.tol > 0 ? a.tol : 1e-6, worstAll = 0;
  for (int64_t c = 0; c < a.cases; ++c) {
    EnergyInputs in;
    drawCase(e, rng, ref.hasNonNeg, 1.0, in);
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
      int64_t off = p["offset"],
              numel = p["shape"][0].get<int64_t>() * p["shape"][1].get<int64_t>();
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
         e["name"].get<std::string>().c_str(), ref.rho.c_str(), (long long)iters,
         (long long)a.cases, worstAll, tol);
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (s == "--compare" || s == "--study" || s == "--gradcheck") {
      a.mode = s.substr(2);
      a.model = next();
    } else if (s == "--cases")
      a.cases = std::stoll(next());
    else if (s == "--seed")
      a.seed = std::stoull(next());
    else if (s == "--tol")
      a.tol = std::stod(next());
    else if (s == "--energy")
      a.energy = next();
    else if (s == "--expect-no-increase")
      a.expectNoIncrease = true;
    else
      return fail("unknown argument '" + s + "'");
  }
  if (a.mode.empty() || a.model.empty())
    return fail("usage: unroll-energy-check (--compare|--study|--gradcheck) MODEL.so [--cases N] "
                "[--seed S] [--tol T] [--energy NAME] [--expect-no-increase]");
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
