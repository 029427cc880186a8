//===- KernelReference.h - kernel energies in plain loops -------*- C++ -*-===//
//
// The independent reference of kernel energies (unroll.kernel_pairwise) and
// their schedules, for unroll-energy-check and unroll-model-check, written
// from the math rather than from the lowering's pieces:
//   * κ(q_i, k_j) by explicit differences for ρ kernels,
//   * the gradient as Σ_j m_ij κ_ij (v_j W_vᵀ) per token, head by head,
//   * conjugate gradients in the textbook form (residual, direction,
//     step α = ⟨G, P⟩ / ⟨P, A P⟩ with the previous step as the direction
//     to be conjugate to), with the same safeguards as the compiler's
//     derived steps (unit directions, no step below eps · tr A).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TEST_TOOLS_KERNELREFERENCE_H
#define UNROLL_TEST_TOOLS_KERNELREFERENCE_H

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace unroll::testing {

struct KernelRef {
  using Mat = std::vector<double>; // row-major
  const nlohmann::json &e, &params;
  std::string kernel, source, query, key, value, mask, schedule;
  int64_t heads = 1, iterations = 1;
  int64_t featLo = 0, featHi = -1; // the kernel's source features (-1: all)
  double alpha = 0, momentum = 0, eps = 1e-5;
  bool learnable = false, mean = false;

  static bool isKernelSchedule(const std::string &s) {
    return s == "gd" || s == "line_search" || s == "cg" || s == "nesterov";
  }

  KernelRef(const nlohmann::json &e, const nlohmann::json &params) : e(e), params(params) {
    const auto &t = e["terms"][0];
    kernel = t["kernel"];
    source = t["source"];
    query = t["query"];
    key = t["key"].is_string() ? t["key"].get<std::string>() : "";
    value = t["value"];
    heads = t["heads"];
    mean = t.value("mean", false);
    if (t.contains("features")) {
      featLo = t["features"][0];
      featHi = t["features"][1];
    }
    mask = t["mask"];
    schedule = e["schedule"];
    iterations = e.value("iterations", (int64_t)1);
    alpha = e.contains("alpha") ? e["alpha"].get<double>() : 0.0;
    momentum = e.contains("momentum") ? e["momentum"].get<double>() : 0.0;
    eps = e.contains("eps") ? e["eps"].get<double>() : 1e-5;
    learnable = e.value("learnable_alpha", false);
  }

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
    fprintf(stderr, "kernel reference: no parameter '%s'\n", name.c_str());
    exit(2);
  }
  bool hasParam(const std::string &name) const {
    for (auto &p : params)
      if (p["name"] == name)
        return true;
    return false;
  }
  /// A learned scalar at iteration k: one per iteration (the last reused),
  /// or a single one.
  double learned(const std::string &name, int64_t k, const Mat &theta) const {
    P p = param(name, theta);
    return p.v[std::min<int64_t>(k, p.r - 1)];
  }

  /// rho'(z) of the built-in kinds.
  double weight(double z) const {
    if (kernel == "neg_exp")
      return std::exp(-z);
    if (kernel == "log_plus_two")
      return 1 / (z + 2);
    if (kernel == "log_plus_one")
      return 1 / (z + 1);
    fprintf(stderr, "kernel reference: kernel '%s' not supported\n", kernel.c_str());
    exit(2);
  }

  /// Does row i read column j (the step), or is (i, j) a pair of E?
  bool pair(int64_t i, int64_t j, int64_t n, bool energy) const {
    if (mask == "causal")
      return j <= i;
    if (mask == "context")
      return j < n - 1 && (!energy || i < n - 1);
    if (mask == "graph") {
      fprintf(stderr, "kernel reference: mask(graph) not supported\n");
      exit(2);
    }
    return true;
  }
  bool energyRow(int64_t i, int64_t n) const { return mask != "context" || i < n - 1; }

  /// x [n, F] · W [F, c]
  static Mat times(const Mat &x, int64_t n, P w) {
    Mat y(n * w.c, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < w.c; ++c) {
        double s = 0;
        for (int64_t f = 0; f < w.r; ++f)
          s += x[i * w.r + f] * w.v[f * w.c + c];
        y[i * w.c + c] = s;
      }
    return y;
  }

  /// K[h][i][j], the step's mask (or the energy's pairs).
  std::vector<Mat> kernels(const Mat &Y, const Mat &X, int64_t n, const Mat &theta,
                           bool energy) const {
    const Mat &whole = source == "X" ? X : Y;
    P wq = param(query, theta);
    // The features the kernel reads.
    int64_t F = whole.size() / n, lo = featHi < 0 ? 0 : featLo, hi = featHi < 0 ? F : featHi;
    Mat S(n * (hi - lo));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t f = lo; f < hi; ++f)
        S[i * (hi - lo) + f - lo] = whole[i * F + f];
    Mat q = times(S, n, wq), k = key.empty() ? q : times(S, n, param(key, theta));
    int64_t r = wq.c / heads;
    std::vector<Mat> K(heads, Mat(n * n, 0.0));
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          if (!pair(i, j, n, energy))
            continue;
          double v = 0;
          if (kernel == "linear") {
            for (int64_t c = 0; c < r; ++c)
              v += q[i * wq.c + h * r + c] * k[j * wq.c + h * r + c];
          } else {
            double z = 0;
            for (int64_t c = 0; c < r; ++c) {
              double dlt = q[i * wq.c + h * r + c] - k[j * wq.c + h * r + c];
              z += 0.5 * dlt * dlt;
            }
            v = weight(z);
          }
          if (mean) // 1 / the keys row i reads
            v /= std::max<int64_t>(1, mask == "causal" ? i + 1 : mask == "context" ? n - 1 : n);
          K[h][i * n + j] = v;
        }
    return K;
  }

  /// A Z = Σ_h K_h (Z W_h) W_hᵀ, token by token.
  Mat apply(const std::vector<Mat> &K, const Mat &Z, int64_t n, int64_t D, const Mat &theta) const {
    P wv = param(value, theta);
    int64_t r = wv.c / heads;
    Mat v = times(Z, n, wv), out(n * D, 0.0);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double kij = K[h][i * n + j];
          if (kij == 0)
            continue;
          for (int64_t c = 0; c < r; ++c) {
            double vc = kij * v[j * wv.c + h * r + c];
            for (int64_t f = 0; f < D; ++f)
              out[i * D + f] += vc * wv.v[f * wv.c + h * r + c];
          }
        }
    return out;
  }

  /// ½ Σ_h Σ_{(i,j) of E} κ_ij ⟨v_i^h, v_j^h⟩
  double energy(const Mat &Y, const Mat &X, int64_t n, int64_t D, const Mat &theta) const {
    auto K = kernels(Y, X, n, theta, /*energy=*/true);
    P wv = param(value, theta);
    int64_t r = wv.c / heads;
    Mat v = times(Y, n, wv);
    double s = 0;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t c = 0; c < r; ++c)
            s += 0.5 * K[h][i * n + j] * v[i * wv.c + h * r + c] * v[j * wv.c + h * r + c];
    (void)D;
    return s;
  }

  double dot(const Mat &a, const Mat &b, int64_t n, int64_t D) const {
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
      if (energyRow(i, n))
        for (int64_t f = 0; f < D; ++f)
          s += a[i * D + f] * b[i * D + f];
    return s;
  }
  /// Z / ‖Z‖ (0 if ‖Z‖² <= tiny).
  Mat unit(const Mat &Z, int64_t n, int64_t D) const {
    double s = dot(Z, Z, n, D);
    double inv = s > 1e-200 ? 1 / std::sqrt(s) : 0.0;
    Mat out(Z);
    for (double &v : out)
      v *= inv;
    return out;
  }
  /// tr A over the energy's rows: Σ_h Σ_i K_h,ii ‖W_v,h‖².
  double trace(const std::vector<Mat> &K, int64_t n, const Mat &theta) const {
    P wv = param(value, theta);
    int64_t r = wv.c / heads;
    double s = 0;
    for (int64_t h = 0; h < heads; ++h) {
      double w = 0;
      for (int64_t f = 0; f < wv.r; ++f)
        for (int64_t c = 0; c < r; ++c)
          w += wv.v[f * wv.c + h * r + c] * wv.v[f * wv.c + h * r + c];
      for (int64_t i = 0; i < n; ++i)
        if (energyRow(i, n))
          s += K[h][i * n + i] * w;
    }
    return s;
  }

  /// One step of the schedule at iteration k (Yprev: the previous iterate).
  Mat step(const Mat &Y, const Mat &X, const Mat &Yprev, int64_t k, int64_t n, int64_t D,
           const Mat &theta) const {
    auto K = kernels(Y, X, n, theta, /*energy=*/false);
    auto A = [&](const Mat &Z) { return apply(K, Z, n, D, theta); };
    double tr = trace(K, n, theta);
    // Converged: ‖G‖ within eps of its bound tr(A) ‖Y‖ (no step at all).
    auto converged = [&](const Mat &G) {
      return dot(G, G, n, D) <= eps * tr * eps * tr * dot(Y, Y, n, D);
    };
    // Exact minimization of the quadratic along a unit direction P: the
    // step t = ⟨G, P⟩ / ⟨P, A P⟩ (none where the curvature is flat).
    auto along = [&](const Mat &G, const Mat &Pd) {
      Mat AP = A(Pd);
      double den = dot(Pd, AP, n, D);
      return den > eps * tr && !converged(G) ? dot(G, Pd, n, D) / den : 0.0;
    };
    Mat out(Y);
    if (schedule == "gd") {
      Mat G = A(Y);
      double a = learnable ? learned("alpha", k, theta) : alpha;
      for (size_t i = 0; i < out.size(); ++i)
        out[i] -= a * G[i];
    } else if (schedule == "line_search") {
      Mat G = A(Y), Gh = unit(G, n, D);
      double t = along(G, Gh);
      for (size_t i = 0; i < out.size(); ++i)
        out[i] -= t * Gh[i];
    } else if (schedule == "cg") {
      Mat G = A(Y), Dl(Y);
      for (size_t i = 0; i < Dl.size(); ++i)
        Dl[i] -= Yprev[i];
      Mat Dh = unit(Dl, n, D), AD = A(Dh);
      double den = dot(Dh, AD, n, D);
      double beta = den > eps * tr && !converged(G) ? dot(G, AD, n, D) / den : 0.0;
      Mat Pd(G);
      for (size_t i = 0; i < Pd.size(); ++i)
        Pd[i] -= beta * Dh[i];
      Mat Ph = unit(Pd, n, D);
      double t = along(G, Ph);
      for (size_t i = 0; i < out.size(); ++i)
        out[i] -= t * Ph[i];
    } else if (schedule == "nesterov") {
      double mu = learnable ? learned("momentum", k, theta) : momentum;
      double a = learnable ? learned("alpha", k, theta) : alpha;
      Mat Z(Y);
      for (size_t i = 0; i < Z.size(); ++i)
        Z[i] += mu * (Y[i] - Yprev[i]);
      Mat G = A(Z);
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = Z[i] - a * G[i];
    } else {
      fprintf(stderr, "kernel reference: schedule '%s' not supported\n", schedule.c_str());
      exit(2);
    }
    return out;
  }
};

} // namespace unroll::testing

#endif // UNROLL_TEST_TOOLS_KERNELREFERENCE_H
