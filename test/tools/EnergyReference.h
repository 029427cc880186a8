//===- EnergyReference.h - P1's energies in plain loops ---------*- C++ -*-===//
//
// The independent reference of the test tools (unroll-energy-check for
// energies, unroll-model-check for models whose loop descends an energy),
// written from the math (P1), not from the compiler's lowering:
//   * pair distances by explicit differences ½‖(y_i − y_j) W_a‖² (the
//     lowering uses the Gram-matrix identity),
//   * the FFN step as Y − α ∇E2 (the lowering folds it into W_fˢ),
//   * the certified step from its gradient by pair loops.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TEST_TOOLS_ENERGYREFERENCE_H
#define UNROLL_TEST_TOOLS_ENERGYREFERENCE_H

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace unroll::testing {

using Mat = std::vector<double>; // row-major

/// P1's energies and their steps in plain double loops, from an energy's
/// description in the model info (terms, ρ, mask, schedule, step size) and
/// the parameters' offsets (`params`: the energy's own, or a model's).
struct Ref {
  const nlohmann::json &e, &params;
  bool learnableAlpha = false;
  std::string rho, mask, form, schedule, attention;
  std::vector<std::vector<int>> graph;
  double alpha = 0;
  // The terms: names of parameters (empty = absent).
  std::string proj, quadW;
  bool hasSq = false, sqCenterX = false, hasNonNeg = false;
  double sqCoeff = 0;

  Ref(const nlohmann::json &e, const nlohmann::json &params) : e(e), params(params) {
    learnableAlpha = e.value("learnable_alpha", false);
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
    for (auto &p : params)
      if (p["name"] == name) {
        auto shape = p["shape"].get<std::vector<int64_t>>();
        return {shape[0], shape.size() > 1 ? shape[1] : 1,
                theta.data() + p["offset"].get<int64_t>()};
      }
    fprintf(stderr, "reference: no parameter '%s'\n", name.c_str());
    exit(2);
  }
  /// The step size: the schedule's alpha, or the learned parameter "alpha".
  double stepSize(const Mat &theta) const {
    return learnableAlpha ? param("alpha", theta).v[0] : alpha;
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
    // With a quadratic term (schedules aim and proximal_aim) the step is on
    // the whole smooth part: + Y (W + Wᵀ)/2, and L + ‖(W + Wᵀ)/2‖_F.
    bool whole = schedule != "single" && !quadW.empty();
    Mat wsym(d * d, 0.0);
    double qnorm = 0;
    if (whole) {
      P w = param(quadW, theta);
      for (int64_t p = 0; p < d; ++p)
        for (int64_t q = 0; q < d; ++q) {
          wsym[p * d + q] = 0.5 * (w.v[p * d + q] + w.v[q * d + p]);
          qnorm += wsym[p * d + q] * wsym[p * d + q];
        }
      qnorm = std::sqrt(qnorm);
    }
    double L = 2 * dmax * frob + c + qnorm;
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
        for (int64_t p = 0; p < d; ++p)
          g[q] += y[i * d + p] * wsym[p * d + q];
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
        out[i * d + q] = y[i * d + q] - stepSize(theta) * g;
      }
    return out;
  }

  Mat step(const Mat &y, const Mat &x, int64_t n, int64_t d, const Mat &theta) const {
    Mat r = mmStep(y, x, n, d, theta);
    // P1's AIM alternates with a gradient step on the FFN energy; the
    // certified step already covers it.
    if (schedule != "single" && attention != "certified")
      r = gradStep(r, x, n, d, theta);
    if (schedule == "proximal_aim")
      for (double &v : r)
        v = std::max(v, 0.0);
    return r;
  }
};

} // namespace unroll::testing

#endif // UNROLL_TEST_TOOLS_ENERGYREFERENCE_H
