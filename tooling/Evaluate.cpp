//===- Evaluate.cpp - evaluation, loop and energy studies, prediction -----===//
#include "unroll/tooling/Evaluate.h"
#include "unroll/tooling/Baselines.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Plot.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Safetensors.h"

#include "unroll/runtime/ModelInfo.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <unistd.h>

namespace key = ::unroll::info;

using namespace unroll;
using Clock = std::chrono::steady_clock;

void unroll::bootstrapBands(const std::vector<double> &errs, int64_t prompts, int64_t k,
                            double norm, int64_t resamples, uint64_t seed, std::vector<double> &lo,
                            std::vector<double> &hi) {
  lo.assign(k, 0.0);
  hi.assign(k, 0.0);
  if (prompts <= 0)
    return;
  Rng rng(seed ^ 0xb0075ULL);
  std::vector<std::vector<double>> means(k, std::vector<double>(resamples));
  std::vector<int64_t> pick(prompts);
  for (int64_t r = 0; r < resamples; ++r) {
    for (int64_t &p : pick)
      p = rng.below(prompts);
    for (int64_t i = 0; i < k; ++i) {
      double s = 0;
      for (int64_t p : pick)
        s += errs[p * k + i];
      means[i][r] = s / (prompts * norm);
    }
  }
  for (int64_t i = 0; i < k; ++i) {
    std::sort(means[i].begin(), means[i].end());
    lo[i] = means[i][int64_t(0.05 * (resamples - 1) + 0.5)];
    hi[i] = means[i][int64_t(0.95 * (resamples - 1) + 0.5)];
  }
}

/// OUT/STEM.csv, STEM.json and STEM.svg, each atomically; false (with a
/// message on stderr) on the first failure.
static bool writeReport(const std::string &out, const std::string &stem, const std::string &csv,
                        const nlohmann::json &j, const PlotSpec &spec) {
  std::string err, base = out + "/" + stem;
  if (makeDirs(out, err) && writeFileAtomic(base + ".csv", csv, err) &&
      writeFileAtomic(base + ".json", j.dump(2) + "\n", err) && writeSvg(base + ".svg", spec, err))
    return true;
  fprintf(stderr, "unroll-run: error: %s\n", err.c_str());
  return false;
}

namespace {
/// One in-context estimator of the evaluation: predictions for every
/// position of a prompt (NaN where not fitted), accumulated squared errors.
struct Baseline {
  std::string key, label;
  /// Fitted per position: run on the first cfg.baselinePrompts prompts, at
  /// a grid of positions (trees, boosting, the network).
  bool costly = false;
  std::function<std::vector<double>(const double *, const double *, int64_t, int64_t,
                                    const std::vector<int64_t> &)>
      preds;
  std::vector<double> sum;
  std::vector<int64_t> count;
};

/// P2's baselines for a task: least squares, averaging and 3-NN always;
/// Lasso for sparse weights; greedy trees and boosting for trees; a 2-layer
/// network for ReLU networks.
std::vector<Baseline> baselinesFor(const std::string &task) {
  std::vector<Baseline> b;
  auto add = [&](std::string key, std::string label, bool costly, auto fn) {
    b.push_back({std::move(key), std::move(label), costly, fn, {}, {}});
  };
  add("least_squares", "least squares", false,
      [](const double *x, const double *y, int64_t k, int64_t d, const std::vector<int64_t> &) {
        return leastSquaresPreds(x, y, k, d);
      });
  add("averaging", "averaging", false,
      [](const double *x, const double *y, int64_t k, int64_t d, const std::vector<int64_t> &) {
        return averagingPreds(x, y, k, d);
      });
  add("nearest_neighbors_3", "3-NN", false,
      [](const double *x, const double *y, int64_t k, int64_t d, const std::vector<int64_t> &) {
        return nearestNeighborPreds(x, y, k, d, 3);
      });
  if (task == "icl_sparse_linear")
    add("lasso_0.01", "Lasso (alpha 0.01)", false,
        [](const double *x, const double *y, int64_t k, int64_t d, const std::vector<int64_t> &) {
          return lassoPreds(x, y, k, d, 0.01);
        });
  if (task == "icl_decision_tree") {
    add("tree_depth4", "greedy tree (depth 4)", true,
        [](const double *x, const double *y, int64_t k, int64_t d,
           const std::vector<int64_t> &pos) { return treePreds(x, y, k, d, 4, pos); });
    add("tree_unlimited", "greedy tree (unlimited)", true,
        [](const double *x, const double *y, int64_t k, int64_t d,
           const std::vector<int64_t> &pos) { return treePreds(x, y, k, d, -1, pos); });
    add("boosted_trees", "boosted trees (50, depth 4, lr 0.1)", true,
        [](const double *x, const double *y, int64_t k, int64_t d,
           const std::vector<int64_t> &pos) { return boostedTreePreds(x, y, k, d, pos); });
  }
  if (task == "icl_relu2nn")
    add("relu_net_adam", "2-layer ReLU net (Adam 5e-3)", true,
        [](const double *x, const double *y, int64_t k, int64_t d,
           const std::vector<int64_t> &pos) { return twoLayerNetPreds(x, y, k, d, pos); });
  return b;
}
} // namespace

int unroll::evaluate(const ModelRunner &run, const std::vector<double> &theta,
                     const TrainConfig &cfg) {
  std::string err;
  const nlohmann::json &mi = run.info();
  int64_t d = mi[key::kPromptDim], k = cfg.points.end, dims = cfg.dims.end;
  // The evaluation prompts, their predictions and the baselines' copies.
  if (!checkMemory(8.0 * cfg.evalPrompts * 2 * k * (4.0 * d + 4),
                   "evaluation on " + std::to_string(cfg.evalPrompts) + " prompts",
                   "--eval-prompts", err)) {
    fprintf(stderr, "unroll-run: error: %s\n", err.c_str());
    return 2;
  }
  Rng rng(cfg.seed ^ 0x5eed5eedULL); // evaluation prompts independent of training's
  std::vector<double> sModel(k, 0);
  std::vector<Baseline> baselines = baselinesFor(cfg.task);
  for (Baseline &b : baselines) {
    b.sum.assign(k, 0.0);
    b.count.assign(k, 0);
  }
  // Where the costly baselines are fitted: every position up to 41 points,
  // else every 5th and the last.
  std::vector<int64_t> grid;
  for (int64_t i = 0; i < k; i += k <= 41 ? 1 : 5)
    grid.push_back(i);
  if (grid.back() != k - 1)
    grid.push_back(k - 1);
  int64_t costlyPrompts = std::min(cfg.baselinePrompts, cfg.evalPrompts);
  std::vector<double> perPrompt; // the model's squared errors [prompt, k], for the bands
  std::vector<double> loopsUsed; // under halting: iterations per prompt
  perPrompt.reserve(cfg.evalPrompts * k);
  int64_t done = 0;
  auto t0 = Clock::now();
  while (done < cfg.evalPrompts) {
    int64_t bsz = std::min(cfg.evalBatch, cfg.evalPrompts - done);
    Prompts p = cfg.spec->sample(bsz, k, d, dims, cfg.noise, rng);
    std::vector<double> preds, used;
    if (cfg.halting ? !run.solve(p, theta, cfg.maxLoops, cfg.haltTol, preds, used, err)
                    : !run.forward(p, theta, cfg.evalLoops, preds, err)) {
      fprintf(stderr, "unroll-run: error: %s\n", err.c_str());
      return 2;
    }
    loopsUsed.insert(loopsUsed.end(), used.begin(), used.end());
    const double *last = preds.data() + (cfg.halting ? 0 : (cfg.evalLoops - 1) * bsz * k);
    for (int64_t b = 0; b < bsz; ++b) {
      const double *xs = &p.xs[b * k * d], *ys = &p.ys[b * k];
      for (int64_t i = 0; i < k; ++i) {
        double e = (last[b * k + i] - ys[i]) * (last[b * k + i] - ys[i]);
        sModel[i] += e;
        perPrompt.push_back(e);
      }
      for (Baseline &bl : baselines) {
        if (bl.costly && done + b >= costlyPrompts)
          continue;
        std::vector<double> pr = bl.preds(xs, ys, k, d, grid);
        for (int64_t i = 0; i < k; ++i)
          if (std::isfinite(pr[i])) {
            bl.sum[i] += (pr[i] - ys[i]) * (pr[i] - ys[i]);
            ++bl.count[i];
          }
      }
    }
    done += bsz;
  }
  // P2 normalizes by the zero predictor's error E[y^2] (the task's).
  double zero = cfg.spec->zeroError(dims, cfg.noise), nan = std::nan("");
  for (double &x : sModel)
    x /= cfg.evalPrompts * zero;
  for (Baseline &bl : baselines)
    for (int64_t i = 0; i < k; ++i)
      bl.sum[i] = bl.count[i] ? bl.sum[i] / (bl.count[i] * zero) : nan;
  std::vector<double> lo, hi;
  bootstrapBands(perPrompt, cfg.evalPrompts, k, zero, 1000, cfg.seed, lo, hi);

  // eval.csv: one column per estimator (empty where not fitted).
  std::string csv = "k,model,model_p05,model_p95";
  for (const Baseline &bl : baselines)
    csv += "," + bl.key;
  csv += "\n";
  auto num = [](double v) {
    char b[32];
    if (!std::isfinite(v))
      return std::string();
    snprintf(b, sizeof b, "%.6g", v);
    return std::string(b);
  };
  for (int64_t i = 0; i < k; ++i) {
    csv += std::to_string(i) + "," + num(sModel[i]) + "," + num(lo[i]) + "," + num(hi[i]);
    for (const Baseline &bl : baselines)
      csv += "," + num(bl.sum[i]);
    csv += "\n";
  }
  nlohmann::json j{
      {"task", cfg.task}, {"prompts", cfg.evalPrompts}, {"loops", cfg.evalLoops}, {"dims", dims}};
  j["normalization"] = "squared error / E[y^2] = " + std::to_string(zero) + " (zero predictor = 1)";
  j["k"] = nlohmann::json::array();
  for (int64_t i = 0; i < k; ++i)
    j["k"].push_back(i);
  j["model"] = sModel;
  j["model_p05"] = lo;
  j["model_p95"] = hi;
  j["bands"] = "5-95% bootstrap over prompts, 1000 resamples";
  std::string loopsText = std::to_string(cfg.evalLoops) + " loops";
  if (cfg.halting) {
    j["loops"] = "auto";
    j["halting"] = {{"tol", cfg.haltTol}, {"max_loops", cfg.maxLoops}};
    j["loops_used"] = loopsUsedJson(loopsUsed, cfg.maxLoops);
    char b[128];
    snprintf(b, sizeof b, "halting at tol %g: loops used mean %.1f, max %lld", cfg.haltTol,
             j["loops_used"]["mean"].get<double>(),
             (long long)j["loops_used"]["max"].get<int64_t>());
    loopsText = b;
  }
  auto orNull = [](const std::vector<double> &v) {
    nlohmann::json a = nlohmann::json::array();
    for (double x : v)
      a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
    return a;
  };
  for (const Baseline &bl : baselines) {
    j[bl.key] = orNull(bl.sum);
    if (bl.costly)
      j["fitted_on"][bl.key] = {{"prompts", costlyPrompts}, {"positions", grid}};
  }
  PlotSpec spec;
  spec.title = mi[key::kName].get<std::string>() + " on " + cfg.task +
               " (d = " + std::to_string(dims) + ", " + (cfg.halting ? "halting" : loopsText) + ")";
  spec.xLabel = "in-context examples k";
  spec.yLabel = "normalized squared error";
  spec.logY = true;
  spec.yFloor = 1e-3; // least squares reaches ~1e-19 on noiseless data
  std::vector<double> ks(k);
  for (int64_t i = 0; i < k; ++i)
    ks[i] = i;
  spec.series = {{"model", ks, sModel, lo, hi, "model 5-95%"}};
  for (const Baseline &bl : baselines)
    spec.series.push_back({bl.label, ks, bl.sum});
  if (!writeReport(cfg.out, "eval", csv, j, spec))
    return 2;
  printf("evaluation: %lld prompts, %s, d = %lld, normalized squared error (%.1f s)\n",
         (long long)cfg.evalPrompts, loopsText.c_str(), (long long)dims,
         std::chrono::duration<double>(Clock::now() - t0).count());
  for (const Baseline &bl : baselines)
    if (bl.costly)
      printf("  %s: fitted on the first %lld prompts at %zu positions\n", bl.label.c_str(),
             (long long)costlyPrompts, grid.size());
  printf("%5s %10s", "k", "model");
  for (const Baseline &bl : baselines)
    printf(" %*s", (int)std::max<size_t>(10, bl.key.size()), bl.key.c_str());
  printf("\n");
  for (int64_t i = 0; i < k; ++i) {
    if (k > 16 && i % 4 != 0 && i != 2 * dims && i != dims && i != k - 1)
      continue;
    printf("%5lld %10.4f", (long long)i, sModel[i]);
    for (const Baseline &bl : baselines) {
      int w = (int)std::max<size_t>(10, bl.key.size());
      if (std::isfinite(bl.sum[i]))
        printf(" %*.4g", w, bl.sum[i]);
      else
        printf(" %*s", w, "-");
    }
    printf("%s\n", i == 2 * dims ? "   <- k = 2d" : "");
  }
  printf("wrote %s/eval.csv, eval.json and eval.svg\n", cfg.out.c_str());
  if (run.hasEnergyTrace())
    return energyStudy(run, theta, cfg);
  return 0;
}

int unroll::energyStudy(const ModelRunner &run, const std::vector<double> &theta,
                        const TrainConfig &cfg) {
  std::string err;
  const nlohmann::json &mi = run.info();
  const nlohmann::json &ei = mi[key::kEnergy];
  int64_t d = mi[key::kPromptDim], k = cfg.points.end, dims = cfg.dims.end, L = cfg.evalLoops;
  int64_t prompts = std::min<int64_t>(cfg.evalPrompts > 0 ? cfg.evalPrompts : 256, 256);
  // Rounding of the library's element type: changes below this relative
  // size are not counted as increases.
  double tol = run.f32() ? 1e-5 : 1e-10;
  Rng rng(cfg.seed ^ 0x5eed5eedULL); // evaluate()'s first prompts
  std::vector<double> E, S;          // [prompt][t]: E(Y_t), t = 0..L; E(u_t), t = 1..L
  int64_t done = 0;
  auto t0 = Clock::now();
  while (done < prompts) {
    int64_t bsz = std::min(cfg.evalBatch, prompts - done);
    Prompts p = cfg.spec->sample(bsz, k, d, dims, cfg.noise, rng);
    std::vector<double> e, s;
    if (!run.energyTrace(p, theta, L, e, s, err)) {
      fprintf(stderr, "unroll-run: error: %s\n", err.c_str());
      return 2;
    }
    for (int64_t b = 0; b < bsz; ++b) {
      for (int64_t t = 0; t <= L; ++t)
        E.push_back(e[t * bsz + b]);
      for (int64_t t = 0; t < L; ++t)
        S.push_back(s[t * bsz + b]);
    }
    done += bsz;
  }
  auto up = [&](double from, double to) { // did the energy increase beyond rounding?
    if (std::isinf(to) && to > 0)
      return !(std::isinf(from) && from > 0);
    if (!std::isfinite(from))
      return false;
    return to - from > tol * std::max(1.0, std::abs(from));
  };
  std::vector<int64_t> stepUp(L + 1, 0), loopUp(L + 1, 0), infinite(L + 1, 0);
  std::vector<double> median(L + 1), mean(L + 1);
  int64_t monotone = 0, stepsUp = 0, loopsUp = 0;
  double worst = 0;
  for (int64_t q = 0; q < prompts; ++q) {
    bool mono = true;
    for (int64_t t = 1; t <= L; ++t) {
      double e0 = E[q * (L + 1) + t - 1], e1 = E[q * (L + 1) + t], s = S[q * L + t - 1];
      if (up(s, e1)) {
        ++stepUp[t], ++stepsUp;
        if (std::isfinite(s) && std::isfinite(e1))
          worst = std::max(worst, (e1 - s) / std::max(1.0, std::abs(s)));
      }
      if (up(e0, e1))
        ++loopUp[t], ++loopsUp, mono = false;
    }
    monotone += mono;
  }
  for (int64_t t = 0; t <= L; ++t) {
    std::vector<double> col;
    double sum = 0;
    int64_t fin = 0;
    for (int64_t q = 0; q < prompts; ++q) {
      double v = E[q * (L + 1) + t];
      col.push_back(v);
      if (std::isfinite(v))
        sum += v, ++fin;
      else
        ++infinite[t];
    }
    std::sort(col.begin(), col.end());
    median[t] = col[col.size() / 2];
    mean[t] = fin ? sum / fin : std::nan("");
  }
  std::string csv = "t,median_energy,mean_finite_energy,infinite,steps_increasing,"
                    "iterations_increasing\n";
  auto num = [](double v) {
    char b[32];
    snprintf(b, sizeof b, "%.8g", v);
    return std::string(std::isfinite(v) ? b : v > 0 ? "inf" : "nan");
  };
  for (int64_t t = 0; t <= L; ++t)
    csv += std::to_string(t) + "," + num(median[t]) + "," + num(mean[t]) + "," +
           std::to_string(infinite[t]) + "," + std::to_string(stepUp[t]) + "," +
           std::to_string(loopUp[t]) + "\n";
  auto orNull = [](const std::vector<double> &v) {
    nlohmann::json a = nlohmann::json::array();
    for (double x : v)
      a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
    return a;
  };
  nlohmann::json j{{"energy", ei.value(key::kName, "")},
                   {"attention", ei.value("attention", "")},
                   {"input", ei.value("input", "")},
                   {"injection", mi.value("injection", "")},
                   {"task", cfg.task},
                   {"prompts", prompts},
                   {"loops", L},
                   {"median_energy", orNull(median)},
                   {"mean_finite_energy", orNull(mean)},
                   {"infinite", infinite},
                   {"steps_increasing", stepUp},
                   {"iterations_increasing", loopUp},
                   {"steps_total", prompts * L},
                   {"steps_increasing_total", stepsUp},
                   {"iterations_increasing_total", loopsUp},
                   {"monotone_prompts", monotone},
                   {"largest_relative_step_increase", worst},
                   {"tolerance", tol},
                   {"definitions",
                    "E(Y_t; P) with P the prompt's read-in; a step increases E when E(Y_t) > "
                    "E(u_t), u_t the point the iteration's steps start from (Y_{t-1}, or "
                    "Y_{t-1} + P with injection(add)); an iteration increases it when E(Y_t) > "
                    "E(Y_{t-1}); changes within tolerance x max(1, |E|) are rounding"}};
  PlotSpec spec;
  spec.title = "energy @" + ei.value(key::kName, std::string()) + " along " +
               mi[key::kName].get<std::string>() + "'s loop (" + std::to_string(prompts) +
               " prompts)";
  spec.xLabel = "loop iteration t";
  spec.yLabel = "median E(Y_t; P)";
  std::vector<double> ts(L + 1);
  for (int64_t t = 0; t <= L; ++t)
    ts[t] = t;
  spec.series = {{"median E(Y_t)", ts, median}};
  if (!writeReport(cfg.out, "energy", csv, j, spec))
    return 2;
  printf("energy @%s along the loop: %lld prompts, %lld loops, attention %s (%.1f s)\n",
         ei.value(key::kName, "").c_str(), (long long)prompts, (long long)L,
         ei.value("attention", "").c_str(),
         std::chrono::duration<double>(Clock::now() - t0).count());
  printf("%5s %16s %9s %15s %15s\n", "t", "median E(Y_t)", "infinite", "steps up", "iterations up");
  for (int64_t t = 0; t <= L; ++t) {
    if (L > 24 && t % 5 != 0 && t != L)
      continue;
    printf("%5lld %16.6g %9lld", (long long)t, median[t], (long long)infinite[t]);
    if (t == 0)
      printf("\n");
    else
      printf(" %15lld %15lld\n", (long long)stepUp[t], (long long)loopUp[t]);
  }
  printf("%lld of %lld steps increased the energy (beyond relative %.0e)", (long long)stepsUp,
         (long long)(prompts * L), tol);
  if (stepsUp)
    printf(", largest relative increase %.3g", worst);
  printf("; %lld of %lld prompts descend monotonically over the loop\n", (long long)monotone,
         (long long)prompts);
  printf("wrote %s/energy.csv, energy.json and energy.svg\n", cfg.out.c_str());
  return 0;
}

int unroll::loopStudy(const ModelRunner &run, const std::vector<double> &theta,
                      const TrainConfig &cfg, const std::vector<int64_t> &loops) {
  bool tty = isatty(fileno(stderr));
  std::string err;
  const nlohmann::json &mi = run.info();
  int64_t d = mi[key::kPromptDim], k = cfg.points.end, dims = cfg.dims.end;
  int64_t maxL = loops.back(), nL = loops.size();
  Rng rng(cfg.seed ^ 0x5eed5eedULL);                       // the same prompts as evaluate()'s
  std::vector<double> last(nL, 0), mean(nL, 0), perPrompt; // perPrompt [prompt, loop]
  int64_t done = 0;
  auto t0 = Clock::now();
  while (done < cfg.evalPrompts) {
    int64_t bsz = std::min(cfg.evalBatch, cfg.evalPrompts - done);
    Prompts p = cfg.spec->sample(bsz, k, d, dims, cfg.noise, rng);
    std::vector<double> preds; // [maxL, B, k]: one forward gives every loop count
    if (!run.forward(p, theta, maxL, preds, err)) {
      fprintf(stderr, "unroll-run: error: %s\n", err.c_str());
      return 2;
    }
    for (int64_t b = 0; b < bsz; ++b)
      for (int64_t j = 0; j < nL; ++j) {
        const double *pr = preds.data() + ((loops[j] - 1) * bsz + b) * k;
        double s = 0;
        for (int64_t i = 0; i < k; ++i) {
          double e = pr[i] - p.ys[b * k + i];
          s += e * e;
          if (i == k - 1) {
            last[j] += e * e;
            perPrompt.push_back(e * e);
          }
        }
        mean[j] += s / k;
      }
    done += bsz;
    if (tty) // a progress line that rewrites itself; logs get none
      fprintf(stderr, "loop study: %lld/%lld prompts\r", (long long)done,
              (long long)cfg.evalPrompts);
  }
  if (tty)
    fprintf(stderr, "\n");
  double zero = cfg.spec->zeroError(dims, cfg.noise);
  for (int64_t j = 0; j < nL; ++j) {
    last[j] /= cfg.evalPrompts * zero;
    mean[j] /= cfg.evalPrompts * zero;
  }
  std::vector<double> lo, hi;
  bootstrapBands(perPrompt, cfg.evalPrompts, nL, zero, 1000, cfg.seed, lo, hi);
  std::string csv = "loops,error_last_position,p05,p95,error_mean_over_positions\n";
  for (int64_t j = 0; j < nL; ++j) {
    char line[160];
    snprintf(line, sizeof line, "%lld,%.6g,%.6g,%.6g,%.6g\n", (long long)loops[j], last[j], lo[j],
             hi[j], mean[j]);
    csv += line;
  }
  nlohmann::json j{{"task", cfg.task},
                   {"prompts", cfg.evalPrompts},
                   {"points", k},
                   {"dims", dims},
                   {"trained_loops", cfg.loops},
                   {"loops", loops},
                   {"error_last_position", last},
                   {"p05", lo},
                   {"p95", hi},
                   {"error_mean_over_positions", mean},
                   {"normalization", "squared error / E[y^2] = " + std::to_string(zero)}};
  PlotSpec spec;
  spec.title = mi[key::kName].get<std::string>() + " on " + cfg.task +
               ": error vs loops (trained b = " + std::to_string(cfg.loops) +
               ", k = " + std::to_string(k - 1) + ")";
  spec.xLabel = "loop iterations";
  spec.yLabel = "normalized squared error";
  spec.logY = true;
  spec.yFloor = 1e-4;
  std::vector<double> xs(loops.begin(), loops.end());
  spec.series = {{"last position", xs, last, lo, hi, "5-95%"}, {"mean over positions", xs, mean}};
  if (!writeReport(cfg.out, "loops", csv, j, spec))
    return 2;
  printf("loop study: %lld prompts of %lld points, d = %lld, trained at b = %lld (%.1f s)\n",
         (long long)cfg.evalPrompts, (long long)k, (long long)dims, (long long)cfg.loops,
         std::chrono::duration<double>(Clock::now() - t0).count());
  printf("%7s %12s %22s %14s\n", "loops", "error (k)", "5-95% band", "mean over k");
  for (int64_t jj = 0; jj < nL; ++jj)
    printf("%7lld %12.4g   [%9.4g, %9.4g] %14.4g%s\n", (long long)loops[jj], last[jj], lo[jj],
           hi[jj], mean[jj], loops[jj] == cfg.loops ? "   <- trained b" : "");
  printf("wrote %s/loops.csv, loops.json and loops.svg\n", cfg.out.c_str());
  return 0;
}

//===----------------------------------------------------------------------===//
// Prediction on the user's data
//===----------------------------------------------------------------------===//

int unroll::predict(const ModelRunner &run, const std::vector<double> &theta,
                    const std::string &input, const std::string &output, int64_t loops,
                    const TrainConfig &cfg) {
  std::string err;
  auto die = [&](const std::string &msg) {
    fprintf(stderr, "unroll-run: error: %s\n", msg.c_str());
    return 2;
  };
  TensorMap in;
  if (!readSafetensors(input, in, err))
    return die(err);
  if (!in.count("xs") || !in.count("ys"))
    return die(input + ": expected tensors 'xs' [B, n, d] and 'ys' [B, n]");
  const Tensor &xs = in["xs"], &ys = in["ys"];
  if (xs.shape.size() != 3 || ys.shape.size() != 2 || xs.shape[0] != ys.shape[0] ||
      xs.shape[1] != ys.shape[1])
    return die(input + ": expected 'xs' [B, n, d] and 'ys' [B, n], got " +
               nlohmann::json(xs.shape).dump() + " and " + nlohmann::json(ys.shape).dump());
  // A non-finite prompt value would become silent NaN predictions.
  if (!checkFinite(xs, input + ": tensor 'xs'", err) ||
      !checkFinite(ys, input + ": tensor 'ys'", err))
    return die(err);
  Prompts p{xs.shape[0], xs.shape[1], xs.shape[2], xs.data, ys.data};
  std::vector<double> preds, used;
  TensorMap out;
  std::string how = std::to_string(loops) + " loops";
  if (cfg.halting) {
    if (!run.solve(p, theta, cfg.maxLoops, cfg.haltTol, preds, used, err))
      return die(err);
    out["preds"] = {{p.batch, p.points}, preds};
    out["loops"] = {{p.batch}, used};
    nlohmann::json u = loopsUsedJson(used, cfg.maxLoops);
    char b[128];
    snprintf(b, sizeof b, "halting at tol %g: loops used mean %.1f, max %lld", cfg.haltTol,
             u["mean"].get<double>(), (long long)u["max"].get<int64_t>());
    how = b;
  } else {
    if (!run.forward(p, theta, loops, preds, err))
      return die(err);
    out["preds"] = {
        {p.batch, p.points},
        std::vector<double>(preds.begin() + (loops - 1) * p.batch * p.points, preds.end())};
  }
  // In the library's precision: an f64 model's predictions keep their digits.
  if (!writeSafetensors(output, out, run.f32() ? "F32" : "F64", err))
    return die(err);
  printf("wrote predictions for %lld prompts of %lld points (%s) to %s\n", (long long)p.batch,
         (long long)p.points, how.c_str(), output.c_str());
  return 0;
}

nlohmann::json unroll::loopsUsedJson(const std::vector<double> &loops, int64_t maxLoops) {
  double mean = 0;
  int64_t most = 0, least = loops.empty() ? 0 : maxLoops, capped = 0;
  std::map<int64_t, int64_t> counts;
  for (double l : loops) {
    int64_t n = int64_t(l + 0.5);
    mean += l / loops.size();
    most = std::max(most, n);
    least = std::min(least, n);
    capped += n >= maxLoops;
    ++counts[n];
  }
  nlohmann::json hist = nlohmann::json::object();
  for (auto [n, c] : counts)
    hist[std::to_string(n)] = c;
  return {{"mean", mean},
          {"min", least},
          {"max", most},
          {"at_max", capped},
          {"prompts", loops.size()},
          {"histogram", hist}};
}
