//===- fixed-point-check.cpp - fixed-point gradients and halting, checked -===//
//
//   unroll-fixed-point-check M.so [--batch B] [--points k] [--seed S]
//                                 [--samples S] [--tol t]
//
// For a model (f64) whose loop is a contraction at its initial parameters:
//   1. halting (@M_solve at tol 1e-12) converges for every prompt; b is set
//      past the slowest prompt, so Y_b is the fixed point to rounding;
//   2. the implicit gradient against central differences of the loss at
//      Y_b, computed with the forward entry point (a different code path)
//      for sampled entries of every parameter tensor (tolerance --tol);
//      Each tensor's error is relative to its largest gradient entry, or to
//      1e-4 of the whole gradient's where its own are smaller (a gradient of
//      1e-8 is at the differences' rounding level);
//   3. the phantom gradient phantom(k, 0.5) approaches the implicit one as
//      k grows; Jacobian-free (jfb) is reported beside it;
//   4. halting at tol ε leaves predictions within a tol-consistent distance
//      of running to b: |Δpred| / max |pred| <= 10 ε q / (1 − q), with q the
//      contraction rate estimated from the forward's own iterates;
//   5. CPU libraries: the working memory of one fixed-point gradient call
//      (the library's allocation peak) does not grow with b; BPTT's does.
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/ModelRun.h"
#include "unroll/tooling/Flags.h"
#include "unroll/tooling/Process.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

using namespace unroll;
using Vec = std::vector<double>;

namespace {

int fail(const std::string &msg) {
  fprintf(stderr, "unroll-fixed-point-check: error: %s\n", msg.c_str());
  return 2;
}

double relErr(const Vec &got, const Vec &want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return worst / std::max(scale, 1e-30);
}

} // namespace

int main(int argc, char **argv) {
  std::string path;
  int64_t batch = 3, points = 4, samples = 6;
  uint64_t seed = 0;
  double tol = 1e-5;
  FlagTable t("unroll-fixed-point-check", "unroll-fixed-point-check M.so [options]",
              "Checks a compiled loop's fixed point and its gradients (implicit, phantom,\n"
              "Jacobian-free) against plain reference computations; the model in f64.");
  t.option("--batch", "B", "prompts", setInteger("--batch", 1, batch))
      .option("--points", "k", "points per prompt", setInteger("--points", 1, points))
      .option("--seed", "S", "random seed", setSeed("--seed", seed))
      .option("--samples", "S", "parameters sampled", setInteger("--samples", 1, samples))
      .option("--tol", "t", "tolerance", setPositive("--tol", tol));
  if (FlagTable::wantsHelp(argc, argv)) {
    fputs(t.usage().c_str(), stdout);
    return 0;
  }
  std::vector<std::string> positional;
  std::string parseErr;
  if (!t.parse(argc, argv, positional, parseErr))
    return fail(parseErr);
  if (positional.size() != 1)
    return fail(t.usage());
  path = positional[0];
  Model m;
  std::string err;
  if (!m.load(path, err))
    return fail(err);
  if (m.info()["element_type"] != "f64")
    return fail("the checks need a model compiled in f64");
  const nlohmann::json *mi = findModel(m, "", err);
  if (!mi)
    return fail(err);
  ModelRunner run;
  if (!run.init(m, *mi, err))
    return fail(err);
  configureRunner(run);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> N(0, 1);
  Vec theta;
  initParameters((*mi)["params"], run.numParams(), theta, [&] { return N(rng); }, 0.02);
  Prompts p{batch, points, (*mi)["prompt_dim"].get<int64_t>(), {}, {}};
  for (int64_t i = 0; i < batch * points * p.dim; ++i)
    p.xs.push_back(N(rng));
  for (int64_t i = 0; i < batch * points; ++i)
    p.ys.push_back(N(rng));
  bool ok = true;
  auto check = [&](bool pass, const char *fmt, auto... args) {
    printf(fmt, args...);
    printf(" %s\n", pass ? "ok" : "FAILED");
    ok = ok && pass;
  };

  // 1. The fixed point.
  const int64_t kCap = 5000;
  Vec predStar, used;
  if (!run.solve(p, theta, kCap, 1e-12, predStar, used, err))
    return fail(err);
  double most = 0;
  for (double u : used)
    most = std::max(most, u);
  // (At least two loops: a library that computes nothing "converges" at once.)
  check(most < kCap && most >= 2,
        "halting at tol 1e-12: every prompt converged, the slowest in %.0f loops", most);
  if (most >= kCap || most < 2) {
    printf("FAIL\n");
    return 1;
  }
  int64_t b = int64_t(most) + 10;

  // The loss at Y_b from the forward entry point.
  auto lossAt = [&](const Vec &th, int64_t loops) {
    Vec preds;
    if (!run.forward(p, th, loops, preds, err)) {
      fail(err);
      exit(2);
    }
    double s = 0;
    const double *last = preds.data() + (loops - 1) * batch * points;
    for (int64_t i = 0; i < batch * points; ++i)
      s += (last[i] - p.ys[i]) * (last[i] - p.ys[i]);
    return s / (batch * points);
  };
  auto gradWith = [&](const std::string &mode, int64_t loops, int64_t window, double *iters) {
    GradientMode g;
    if (!parseGradientMode(mode, g, err) || !run.setGradient(g, err)) {
      fail(err);
      exit(2);
    }
    Vec losses, grad;
    if (!run.lossGrad(p, theta, loops, window, losses, grad, err)) {
      fail(err);
      exit(2);
    }
    if (iters)
      *iters = run.fixedPointStats().iterations;
    return grad;
  };

  // 2. Implicit gradient vs central differences at the fixed point.
  double iters = 0;
  Vec gImp = gradWith("implicit:1e-13:5000", b, 1, &iters);
  double worstAll = 0, global = 0;
  for (double g : gImp)
    global = std::max(global, std::abs(g));
  if (!(global > 0)) {
    printf("the implicit gradient is zero everywhere FAILED\nFAIL\n");
    return 1;
  }
  std::mt19937_64 pick(seed + 7);
  for (auto &par : (*mi)["params"]) {
    int64_t off = par["offset"], numel = 1;
    for (int64_t s : par["shape"])
      numel *= s;
    double worst = 0, scale = 0;
    for (int64_t s = 0; s < std::min(numel, samples); ++s) {
      int64_t i = numel <= samples ? s : int64_t(pick() % numel);
      Vec tp = theta, tm = theta;
      double h = 1e-5 * std::max(1.0, std::abs(theta[off + i]));
      tp[off + i] += h;
      tm[off + i] -= h;
      double fd = (lossAt(tp, b) - lossAt(tm, b)) / (2 * h);
      scale = std::max({scale, std::abs(fd), std::abs(gImp[off + i])});
      worst = std::max(worst, std::abs(fd - gImp[off + i]));
    }
    double rel = worst / std::max(scale, 1e-4 * global);
    worstAll = std::max(worstAll, rel);
    printf("  %-32s %7lld entries: relative error %.3g (max |grad| %.2g)\n",
           par["name"].get<std::string>().c_str(), (long long)numel, rel, scale);
  }
  check(worstAll <= tol,
        "implicit gradient (%.0f values of g) vs central differences of the loss at Y_%lld: "
        "max relative error %.3g (tolerance %.0e)",
        iters, (long long)b, worstAll, tol);

  // 3. Phantom gradients approach the implicit one.
  double prev = INFINITY, last = 0;
  bool shrinking = true;
  printf("  phantom(k, 0.5) vs implicit:");
  for (int64_t k : {1, 2, 4, 8, 16, 32, 64, 128}) {
    double e = relErr(gradWith("phantom:" + std::to_string(k) + ":0.5", b, 1, nullptr), gImp);
    printf(" k=%lld %.2g", (long long)k, e);
    shrinking = shrinking && e <= prev * 1.0001 + 1e-12;
    prev = last = e;
  }
  printf("\n");
  check(shrinking && last <= 1e-6,
        "phantom gradient error shrinks with k, %.3g at k = 128 (tolerance 1e-06)", last);
  printf("  jfb vs implicit: %.3g (an approximation; reported, not checked)\n",
         relErr(gradWith("jfb", b, 1, nullptr), gImp));

  // 4. Halting against running to b. q: the contraction rate, from the
  // forward's last iterates (ratio of successive prediction changes).
  Vec all;
  if (!run.forward(p, theta, b, all, err))
    return fail(err);
  const Vec predB(all.end() - batch * points, all.end());
  // q: the geometric mean rate at which successive predictions approach
  // each other, from iteration 5 to the last one above rounding.
  auto change = [&](int64_t t) { // max |pred_t - pred_{t-1}|, t >= 1 (1-based)
    double c = 0;
    for (int64_t i = 0; i < batch * points; ++i)
      c = std::max(c,
                   std::abs(all[(t - 1) * batch * points + i] - all[(t - 2) * batch * points + i]));
    return c;
  };
  double scaleB = 0;
  for (double v : predB)
    scaleB = std::max(scaleB, std::abs(v));
  int64_t t1 = std::min<int64_t>(5, b - 1), t2 = t1;
  for (int64_t t = t1 + 1; t <= b; ++t)
    if (change(t) > 1e-11 * scaleB)
      t2 = t;
  double q = t2 > t1 ? std::pow(change(t2) / change(t1), 1.0 / double(t2 - t1)) : 0.5;
  q = std::min(q, 0.999);
  for (double eps : {1e-3, 1e-4, 1e-5, 1e-6}) {
    Vec preds, loops;
    if (!run.solve(p, theta, b, eps, preds, loops, err))
      return fail(err);
    double mean = 0, mx = 0;
    for (double l : loops) {
      mean += l / loops.size();
      mx = std::max(mx, l);
    }
    double diff = relErr(preds, predB), bound = 10 * eps * q / (1 - q);
    check(diff <= bound,
          "halting at tol %.0e: loops used mean %.1f, max %.0f; |pred - pred(b)| / max |pred| = "
          "%.3g <= %.3g",
          eps, mean, mx, diff, bound);
  }

  // 5. Working memory of one gradient call against b.
  auto peak = reinterpret_cast<uint64_t (*)()>(m.symbol("unroll_alloc_peak_bytes"));
  auto reset = reinterpret_cast<void (*)()>(m.symbol("unroll_alloc_reset_peak"));
  if (!peak || !reset) {
    printf("  working memory: not measured (the library does not count its allocations)\n");
  } else {
    run.setThreads(1);
    auto bytes = [&](const std::string &mode, int64_t loops, int64_t window) {
      gradWith(mode, loops, window, nullptr); // the pool holds every block after this
      reset();
      gradWith(mode, loops, window, nullptr);
      return double(peak());
    };
    double f4 = bytes("implicit:1e-13:50", 4, 1), f32 = bytes("implicit:1e-13:50", 32, 1);
    double p4 = bytes("phantom:5:0.5", 4, 1), p32 = bytes("phantom:5:0.5", 32, 1);
    double b4 = bytes("bptt", 4, 4), b32 = bytes("bptt", 32, 32);
    if (b4 == 0) // an emulated GPU library allocates with malloc, uncounted
      printf("  working memory: not measured (the library's buffers bypass the counting pool)\n");
    else
      check(f4 == f32 && p4 == p32 && b32 > b4,
            "working memory (bytes) at b = 4 and 32: implicit %.0f, %.0f; phantom %.0f, %.0f; "
            "bptt with T = b %.0f, %.0f",
            f4, f32, p4, p32, b4, b32);
  }
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
