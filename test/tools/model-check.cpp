//===- model-check.cpp - independent reference for compiled models --------===//
//
// P2's looped transformer in plain double loops, written from the paper's
// description (not from the compiler's lowering), to check compiled models:
//
//   unroll-model-check --forward M.so   predictions of every iteration and the
//                                       windowed losses vs the reference
//   unroll-model-check --gradcheck M.so central differences of the loss for
//                                       entries of every parameter tensor vs
//                                       the compiled gradient (f64 models)
//     (--micro-batch-tokens N: the runner's micro-batches of about N tokens)
//   unroll-model-check --against A.so B.so  the same model built twice (e.g.
//                                       --lower-to-cpu vs --lower-to-gpu):
//                                       predictions, losses, gradients
//   unroll-model-check --compare-checkpoints DIR_A DIR_B [--file F]
//                                       every tensor of two model.safetensors
//                                       (or F: optimizer.safetensors holds the
//                                       F64 master weights and Adam's moments);
//                                       --global: the whole weight vector's
//                                       max |a - b| / max |b| decides
//
//===----------------------------------------------------------------------===//
#include "EnergyReference.h"
#include "KernelReference.h"
#include "unroll/runtime/ModelRun.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Flags.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Safetensors.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>

using namespace unroll;
using Vec = std::vector<double>;

namespace {

struct Args {
  std::string mode, model, other;
  std::string file = "model.safetensors"; // --compare-checkpoints: which file of the step
  bool global = false; // --compare-checkpoints: max |a - b| / max |b| over all weights
  int64_t batch = 3, points = 4, loops = -1, window = -1, samples = 6;
  int64_t microTokens = -1; // --micro-batch-tokens: the runner's micro-batches (CPU)
  uint64_t seed = 0;
  double perturb = 0.1, tol = -1;
  double fdStep = 1e-5; // --fd-step: central differences' relative step
  int fdOrder = 2;      // --fd-order 2|4: their order
};

/// Parameters by name over theta.
struct Params {
  std::map<std::string, std::pair<int64_t, std::vector<int64_t>>> at; // offset, shape
  const double *theta = nullptr;
  const double *get(const std::string &n) const {
    auto it = at.find(n);
    if (it == at.end()) {
      fprintf(stderr, "unroll-model-check: the model has no parameter '%s'\n", n.c_str());
      exit(2);
    }
    return theta + it->second.first;
  }
  bool has(const std::string &n) const { return at.count(n) != 0; }
};

/// y[n, o] = x[n, k] W[o, k]ᵀ + b[o]
Vec linear(const Vec &x, int64_t n, int64_t k, const double *w, const double *b, int64_t o) {
  Vec y(n * o);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < o; ++r) {
      double s = b[r];
      for (int64_t c = 0; c < k; ++c)
        s += x[i * k + c] * w[r * k + c];
      y[i * o + r] = s;
    }
  return y;
}

Vec layerNorm(const Vec &x, int64_t n, int64_t f, const double *g, const double *b) {
  Vec y(n * f);
  for (int64_t i = 0; i < n; ++i) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < f; ++c)
      mu += x[i * f + c];
    mu /= f;
    for (int64_t c = 0; c < f; ++c)
      var += (x[i * f + c] - mu) * (x[i * f + c] - mu);
    var /= f;
    double r = 1 / std::sqrt(var + 1e-5);
    for (int64_t c = 0; c < f; ++c)
      y[i * f + c] = (x[i * f + c] - mu) * r * g[c] + b[c];
  }
  return y;
}

double gelu(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/// Causal multi-head attention of one sequence: qkv [n, 3D] -> [n, D].
Vec attention(const Vec &qkv, int64_t n, int64_t D, int64_t H) {
  int64_t hd = D / H;
  Vec out(n * D, 0.0);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> s(i + 1);
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < hd; ++e)
          dot += qkv[i * 3 * D + h * hd + e] * qkv[j * 3 * D + D + h * hd + e];
        s[j] = dot / std::sqrt((double)hd);
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (int64_t j = 0; j <= i; ++j)
        z += (s[j] = std::exp(s[j] - mx));
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t e = 0; e < hd; ++e)
          out[i * D + h * hd + e] += s[j] / z * qkv[j * 3 * D + 2 * D + h * hd + e];
    }
  return out;
}

/// The model in plain loops: P2's read-in and read-out (by their names),
/// the loop with its injection, and a body that is either GPT-2 blocks or,
/// when the model info names an energy, that energy's descent steps.
struct Reference {
  const nlohmann::json &info;
  const Vec &theta;
  Params P;
  int64_t d, D, H, L;
  std::string inj;
  std::unique_ptr<unroll::testing::Ref> energy;        // the loop descends an energy
  std::unique_ptr<unroll::testing::KernelRef> kernels; // ... a kernel energy
  int64_t stepsPerIteration = 0;
  TokenLayout layout;
  int64_t width = 0; // the tokens' features: d, or d + 1 under concat

  Reference(const nlohmann::json &info, const Vec &theta, int64_t heads)
      : info(info), theta(theta), H(heads) {
    for (auto &p : info["params"])
      P.at[p["name"]] = {p["offset"].get<int64_t>(), p["shape"].get<std::vector<int64_t>>()};
    P.theta = theta.data();
    d = info["prompt_dim"];
    D = info["width"];
    L = info["layers"];
    inj = info["injection"];
    layout = TokenLayout::of(info);
    width = layout.width(d);
    if (info.contains("energy")) {
      const auto &e = info["energy"];
      if (unroll::testing::KernelRef::isKernelSchedule(e["schedule"])) {
        kernels = std::make_unique<unroll::testing::KernelRef>(e, info["params"]);
      } else {
        energy = std::make_unique<unroll::testing::Ref>(e, info["params"]);
        stepsPerIteration = e["steps_per_iteration"];
      }
    }
  }

  /// The loop body M on the state u, with the loop's input p, as iteration
  /// t (uPrev: the previous iteration's input).
  Vec body(const Vec &u, const Vec &p, int64_t n, int64_t t, const Vec &uPrev) const {
    if (kernels) // one step per iteration, X = P
      return kernels->step(u, p, uPrev, t, n, D, theta);
    if (energy) {
      // Descent on E(·; X) with X = P when the body takes the input, else
      // X = u (unused by an energy without a center term).
      bool withP = info["energy"]["input"] == "P";
      Vec y(u);
      for (int64_t s = 0; s < stepsPerIteration; ++s)
        y = energy->step(y, withP ? p : u, n, D, theta);
      return y;
    }
    return gptBody(u, n);
  }

  /// One block + (wpe before, ln_f after), the loop body M.
  Vec gptBody(const Vec &u, int64_t n) const {
    const double *wpe = P.get("_backbone.transformer.wpe.weight");
    Vec x(u);
    for (int64_t i = 0; i < n * D; ++i)
      x[i] += wpe[i];
    for (int64_t l = 0; l < L; ++l) {
      std::string h = "_backbone.transformer.h." + std::to_string(l);
      Vec a = layerNorm(x, n, D, P.get(h + ".ln_1.weight"), P.get(h + ".ln_1.bias"));
      Vec qkv =
          linear(a, n, D, P.get(h + ".attn.c_attn.weight"), P.get(h + ".attn.c_attn.bias"), 3 * D);
      Vec at = attention(qkv, n, D, H);
      Vec pr =
          linear(at, n, D, P.get(h + ".attn.c_proj.weight"), P.get(h + ".attn.c_proj.bias"), D);
      for (int64_t i = 0; i < n * D; ++i)
        x[i] += pr[i];
      Vec m = layerNorm(x, n, D, P.get(h + ".ln_2.weight"), P.get(h + ".ln_2.bias"));
      Vec fc = linear(m, n, D, P.get(h + ".mlp.c_fc.weight"), P.get(h + ".mlp.c_fc.bias"), 4 * D);
      for (double &v : fc)
        v = gelu(v);
      Vec mp =
          linear(fc, n, 4 * D, P.get(h + ".mlp.c_proj.weight"), P.get(h + ".mlp.c_proj.bias"), D);
      for (int64_t i = 0; i < n * D; ++i)
        x[i] += mp[i];
    }
    return layerNorm(x, n, D, P.get("_backbone.transformer.ln_f.weight"),
                     P.get("_backbone.transformer.ln_f.bias"));
  }

  /// P = read_in(Z), or Z itself for a model without a read-in.
  Vec embed(const Vec &z, int64_t n) const {
    if (!P.has("_read_in.weight"))
      return z;
    return linear(z, n, width, P.get("_read_in.weight"), P.get("_read_in.bias"), D);
  }
  Vec init(const Vec &p, int64_t n) const {
    return inj == "add" ? Vec(n * D, 0.0) : inj == "mul" ? Vec(n * D, 1.0) : p;
  }
  Vec inject(const Vec &y, const Vec &p, int64_t n) const {
    Vec u(y);
    if (inj == "add")
      for (int64_t i = 0; i < n * D; ++i)
        u[i] += p[i];
    if (inj == "mul")
      for (int64_t i = 0; i < n * D; ++i)
        u[i] *= p[i];
    return u;
  }
  /// Y_t = M(inject(Y_{t-1}, P)) as iteration t (yPrev = Y_{t-2}, Y_{-1} = Y_0).
  Vec step(const Vec &y, const Vec &p, int64_t n, int64_t t = 0, const Vec &yPrev = {}) const {
    return body(inject(y, p, n), p, n, t, inject(yPrev.empty() ? y : yPrev, p, n));
  }
  /// The read-out at every token.
  Vec readoutAll(const Vec &y, int64_t n) const {
    return linear(y, n, D, P.get("_read_out.weight"), P.get("_read_out.bias"), 1);
  }
  /// The tokens of prompt b of `pr` (its first `points` points).
  Vec tokens(const Prompts &pr, int64_t b, int64_t points) const {
    Prompts one{1, points, pr.dim, {}, {}};
    one.xs.assign(pr.xs.begin() + b * pr.points * pr.dim,
                  pr.xs.begin() + (b * pr.points + points) * pr.dim);
    one.ys.assign(pr.ys.begin() + b * pr.points, pr.ys.begin() + b * pr.points + points);
    return layout.build(one);
  }
  /// The predictions (at every token) of one token sequence after each of
  /// `loops` iterations.
  std::vector<Vec> run(const Vec &z, int64_t n, int64_t loops) const {
    Vec p = embed(z, n), y = init(p, n), prev = y;
    std::vector<Vec> out;
    for (int64_t t = 0; t < loops; ++t) {
      Vec next = step(y, p, n, t, prev);
      prev = y;
      y = next;
      out.push_back(readoutAll(y, n));
    }
    return out;
  }
  /// The prediction of every point of prompt b from the points before it,
  /// after each of `loops` iterations: [loops][k] (interleaved: read at the
  /// x tokens; concat: the query of the prompt cut after each point).
  std::vector<Vec> forward(const Prompts &pr, int64_t b, int64_t loops) const {
    int64_t k = pr.points;
    std::vector<Vec> out(loops, Vec(k));
    if (!layout.concat) {
      auto r = run(tokens(pr, b, k), 2 * k, loops);
      for (int64_t t = 0; t < loops; ++t)
        for (int64_t i = 0; i < k; ++i)
          out[t][i] = r[t][2 * i];
      return out;
    }
    for (int64_t i = 0; i < k; ++i) {
      auto r = run(tokens(pr, b, i + 1), i + 1, loops);
      for (int64_t t = 0; t < loops; ++t)
        out[t][i] = r[t][i];
    }
    return out;
  }
};

/// P2's truncated objective: the first loops - T iterations run with the
/// parameters `frozen` (no gradient flows through them), the window with
/// `theta`; the mean over the window of the MSE at the x positions.
double truncatedLoss(const nlohmann::json &info, int64_t heads, const Vec &frozen, const Vec &theta,
                     const Prompts &pr, int64_t loops, int64_t window) {
  Reference rf(info, frozen, heads), rw(info, theta, heads);
  int64_t k = pr.points, n = rf.layout.tokens(k), tw = std::min(loops, window);
  bool concat = rf.layout.concat;
  double loss = 0;
  for (int64_t b = 0; b < pr.batch; ++b) {
    Vec z = rf.tokens(pr, b, k);
    Vec pf = rf.embed(z, n), y = rf.init(pf, n), prev = y;
    for (int64_t t = 0; t < loops - tw; ++t) {
      Vec next = rf.step(y, pf, n, t, prev);
      prev = y;
      y = next;
    }
    Vec pw = rw.embed(z, n);
    if (loops == tw)
      y = prev = rw.init(pw, n); // Y_0 itself depends on theta (injection none)
    for (int64_t w = 0; w < tw; ++w) {
      Vec next = rw.step(y, pw, n, loops - tw + w, prev);
      prev = y;
      y = next;
      Vec r = rw.readoutAll(y, n);
      for (int64_t i = concat ? k - 1 : 0; i < k; ++i) {
        double e = r[concat ? n - 1 : 2 * i] - pr.ys[b * k + i];
        loss += e * e;
      }
    }
  }
  return loss / (pr.batch * (concat ? 1 : k) * tw);
}

int fail(const std::string &m) {
  fprintf(stderr, "unroll-model-check: error: %s\n", m.c_str());
  return 2;
}

Vec initTheta(const nlohmann::json &info, uint64_t seed, double perturb) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> N(0, 1);
  Vec th(info["num_params"].get<int64_t>());
  for (auto &p : info["params"]) {
    int64_t off = p["offset"], numel = 1;
    for (int64_t s : p["shape"])
      numel *= s;
    std::string init = p["init"];
    for (int64_t i = 0; i < numel; ++i) {
      double base = init == "ones"       ? 1.0
                    : init == "zeros"    ? 0.0
                    : init == "constant" ? p.value("value", 0.0)
                                         : p.value("std", 0.02) * N(rng);
      th[off + i] = base + perturb * N(rng); // perturb so every parameter matters
    }
  }
  return th;
}

Prompts drawPrompts(int64_t B, int64_t k, int64_t d, std::mt19937_64 &rng) {
  std::normal_distribution<double> N(0, 1);
  Prompts p{B, k, d, Vec(B * k * d), Vec(B * k)};
  for (double &v : p.xs)
    v = N(rng);
  for (double &v : p.ys)
    v = N(rng);
  return p;
}

/// max |a - b| / max |b| over a vector.
double relErr(const Vec &got, const Vec &want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return got.size() != want.size() ? INFINITY : worst / std::max(scale, 1e-30);
}

/// The same model compiled twice: B.so is the oracle (e.g. the CPU build).
int against(const Args &a, const Model &ma, const ModelRunner &ra, const nlohmann::json &mi,
            const Vec &theta, const Prompts &p, int64_t loops, int64_t window) {
  Model mb;
  std::string err;
  if (!mb.load(a.other, err))
    return fail(err);
  const nlohmann::json *mbi = findModel(mb, mi["name"], err);
  if (!mbi)
    return fail(err);
  ModelRunner rb;
  if (!rb.init(mb, *mbi, err))
    return fail(err);
  configureRunner(rb);
  if (rb.numParams() != ra.numParams())
    return fail("the two libraries have different parameter counts");
  Vec pa, pb, la, lb, ga, gb;
  if (!ra.forward(p, theta, loops, pa, err) || !rb.forward(p, theta, loops, pb, err) ||
      !ra.lossGrad(p, theta, loops, window, la, ga, err) ||
      !rb.lossGrad(p, theta, loops, window, lb, gb, err))
    return fail(err);
  double ep = relErr(pa, pb), el = relErr(la, lb), eg = relErr(ga, gb);
  double tol = a.tol > 0 ? a.tol : 1e-4;
  bool ok = ep <= tol && el <= tol && eg <= tol;
  printf("%s (%s) vs %s (%s), model @%s: B %lld, %lld points, %lld loops, window %lld\n",
         a.model.c_str(), ma.info().value("target", "cpu").c_str(), a.other.c_str(),
         mb.info().value("target", "cpu").c_str(), mi["name"].get<std::string>().c_str(),
         (long long)p.batch, (long long)p.points, (long long)loops,
         (long long)std::min(loops, window));
  printf("max rel. error: predictions %.3g, windowed losses %.3g, gradient %.3g "
         "(tolerance %.0e)\n",
         ep, el, eg, tol);
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

/// Two training runs' final weights, tensor by tensor.
int compareCheckpoints(const Args &a) {
  auto file = [&](const std::string &dir) {
    // A run's checkpoint folder (its latest step) or a step folder.
    std::string step, ignore;
    return (latestStep(dir, step, ignore) ? step : dir) + "/" + a.file;
  };
  TensorMap ta, tb;
  std::string err;
  if (!readSafetensors(file(a.model), ta, err) || !readSafetensors(file(a.other), tb, err))
    return fail(err);
  double tol = a.tol > 0 ? a.tol : 1e-4, worstAll = 0, diffAll = 0, scaleAll = 0;
  for (auto &[name, t] : tb) {
    auto it = ta.find(name);
    if (it == ta.end())
      return fail(file(a.model) + " has no tensor '" + name + "'");
    double e = relErr(it->second.data, t.data);
    worstAll = std::max(worstAll, e);
    if (name.rfind("exp_avg", 0) != 0) { // weights, not Adam's moments
      for (size_t i = 0; i < t.data.size(); ++i) {
        diffAll = std::max(diffAll, std::abs(it->second.data[i] - t.data[i]));
        scaleAll = std::max(scaleAll, std::abs(t.data[i]));
      }
    }
    printf("  %-48s %8lld entries: max |a - b| / max |b| = %.3g\n", name.c_str(),
           (long long)t.numel(), e);
  }
  if (ta.size() != tb.size())
    return fail("the checkpoints hold different tensors");
  double global = diffAll / std::max(scaleAll, 1e-300);
  printf("all weights: max |a - b| / max |b| = %.3g\n", global);
  // --global: the whole weight vector's measure decides, else the worst tensor's.
  double worst = a.global ? global : worstAll;
  bool ok = worst <= tol;
  printf("checkpoints %s vs %s: max relative error %.3g%s (tolerance %.0e)\n%s\n",
         file(a.model).c_str(), file(a.other).c_str(), worst, a.global ? " over all weights" : "",
         tol, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

/// The checker's flags, as one table (tooling/Flags.h); they set `a`.
FlagTable flags(Args &a) {
  FlagTable t("unroll-model-check",
              "unroll-model-check (--forward|--gradcheck) M.so [options]\n"
              "       unroll-model-check --against A.so B.so [options]\n"
              "       unroll-model-check --compare-checkpoints DIR_A DIR_B [--tol t] [--file F] "
              "[--global]",
              "Checks a compiled model against the plain reference loops of this tool.");
  auto mode = [&a](const char *name) {
    return [&a, name](const std::string &v, std::string &) {
      a.mode = name;
      a.model = v;
      return true;
    };
  };
  t.section("Modes")
      .option("--forward", "M.so", "predictions of every iteration against the reference",
              mode("forward"))
      .option("--gradcheck", "M.so", "the loss gradient against central differences (f64)",
              mode("gradcheck"))
      .option("--against", "A.so",
              "A.so against B.so (the next argument): the same model built "
              "twice",
              mode("against"))
      .option("--compare-checkpoints", "DIR_A",
              "DIR_A's last checkpoint against DIR_B's (the next argument)",
              mode("compare-checkpoints"))
      .section("Options")
      .option("--batch", "B", "prompts", setInteger("--batch", 1, a.batch))
      .option("--points", "k", "points per prompt", setInteger("--points", 1, a.points))
      .option("--loops", "b", "loop iterations (default: the model's)",
              setInteger("--loops", 1, a.loops))
      .option("--window", "T", "loss window (default: the model's)",
              setInteger("--window", 1, a.window))
      .option("--samples", "S", "parameters sampled by --gradcheck",
              setInteger("--samples", 1, a.samples))
      .option("--seed", "S", "random seed", setSeed("--seed", a.seed))
      .option("--micro-batch-tokens", "N", "the runner's micro-batches of about N tokens (CPU)",
              setInteger("--micro-batch-tokens", 0, a.microTokens))
      .option("--perturb", "s", "scale of the random parameters",
              setNonNegative("--perturb", a.perturb))
      .option("--fd-step", "h", "central differences' relative step",
              setPositive("--fd-step", a.fdStep))
      .option("--fd-order", "2|4", "central differences' order",
              [&a](const std::string &v, std::string &err) {
                if (!parseChoice("--fd-order", v, {"2", "4"}, err))
                  return false;
                a.fdOrder = v == "4" ? 4 : 2;
                return true;
              })
      .option("--tol", "t", "tolerance (default: the mode's)", setPositive("--tol", a.tol))
      .option("--file", "F", "--compare-checkpoints: which file of the step", setText(a.file))
      .flag("--global", "--compare-checkpoints: max |a - b| / max |b| over all weights",
            [&a] { a.global = true; });
  return t;
}

} // namespace

int main(int argc, char **argv) {
  Args a;
  FlagTable table = flags(a);
  if (FlagTable::wantsHelp(argc, argv)) {
    fputs(table.usage().c_str(), stdout);
    return 0;
  }
  std::vector<std::string> positional;
  std::string parseErr;
  if (!table.parse(argc, argv, positional, parseErr))
    return fail(parseErr);
  bool pair = a.mode == "against" || a.mode == "compare-checkpoints";
  if (a.mode.empty() || positional.size() != (pair ? 1u : 0u))
    return fail(table.usage());
  if (pair)
    a.other = positional[0];
  if (a.mode == "compare-checkpoints")
    return compareCheckpoints(a);
  Model m;
  std::string err;
  if (!m.load(a.model, err))
    return fail(err);
  const nlohmann::json *mi = findModel(m, "", err);
  if (!mi)
    return fail(err);
  ModelRunner run;
  if (!run.init(m, *mi, err))
    return fail(err);
  configureRunner(run);
  if (a.microTokens >= 0)
    run.setMicroBatchTokens(a.microTokens);
  bool f32 = m.info()["element_type"] == "f32";
  int64_t loops = a.loops > 0 ? a.loops : (*mi)["iterations"].get<int64_t>();
  int64_t window = a.window > 0 ? a.window : (*mi)["window"].get<int64_t>();
  int64_t H = mi->value("heads", (int64_t)0);
  if (H <= 0 && !mi->contains("energy"))
    return fail("the model info has no 'heads' (and no energy)");
  Vec theta = initTheta(*mi, a.seed, a.perturb);
  std::mt19937_64 rng(a.seed + 1);
  Prompts p = drawPrompts(a.batch, a.points, (*mi)["prompt_dim"], rng);
  Reference ref(*mi, theta, H);

  if (a.mode == "against")
    return against(a, m, run, *mi, theta, p, loops, window);

  if (a.mode == "forward") {
    double tol = a.tol > 0 ? a.tol : f32 ? 2e-4 : 1e-10;
    Vec preds;
    if (!run.forward(p, theta, loops, preds, err))
      return fail(err);
    double worst = 0, scale = 0;
    Vec refLoss(loops, 0.0);
    bool concat = ref.layout.concat;
    for (int64_t b = 0; b < p.batch; ++b) {
      auto r = ref.forward(p, b, loops);
      for (int64_t t = 0; t < loops; ++t)
        for (int64_t i = 0; i < p.points; ++i) {
          double got = preds[(t * p.batch + b) * p.points + i], want = r[t][i];
          scale = std::max(scale, std::abs(want));
          worst = std::max(worst, std::abs(got - want));
          double e = want - p.ys[b * p.points + i];
          // The loss: every point (interleaved), the query alone (concat).
          if (!concat || i == p.points - 1)
            refLoss[t] += e * e / (p.batch * (concat ? 1 : p.points));
        }
    }
    worst /= std::max(scale, 1e-12);
    Vec losses, grad;
    if (!run.lossGrad(p, theta, loops, window, losses, grad, err))
      return fail(err);
    int64_t tw = std::min(loops, window);
    double worstL = 0;
    for (int64_t w = 0; w < tw; ++w)
      worstL = std::max(worstL, std::abs(losses[w] - refLoss[loops - tw + w]) /
                                    std::max(std::abs(refLoss[loops - tw + w]), 1e-12));
    bool ok = worst <= tol && worstL <= tol;
    printf("model @%s: B %lld, %lld points, %lld loops, window %lld: max rel. error "
           "predictions %.3g, windowed losses %.3g (tolerance %.0e)\n",
           (*mi)["name"].get<std::string>().c_str(), (long long)p.batch, (long long)p.points,
           (long long)loops, (long long)tw, worst, worstL, tol);
    printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  }

  // Gradient check: central differences of the compiled loss.
  if (f32)
    return fail("--gradcheck needs a model compiled in f64");
  double tol = a.tol > 0 ? a.tol : 1e-6;
  // With b == T the truncated objective is the loss itself: differentiate
  // the compiled loss. With b > T the first b - T iterations carry no
  // gradient by design: differentiate the reference's truncated objective.
  bool truncated = loops > window;
  auto loss = [&](const Vec &th) {
    if (truncated)
      return truncatedLoss(*mi, H, theta, th, p, loops, window);
    Vec l, g;
    if (!run.lossGrad(p, th, loops, window, l, g, err)) {
      fail(err);
      exit(2);
    }
    double s = 0;
    for (double v : l)
      s += v;
    return s / l.size();
  };
  Vec l0, grad;
  if (!run.lossGrad(p, theta, loops, window, l0, grad, err))
    return fail(err);
  double worstAll = 0;
  std::mt19937_64 pick(a.seed + 7);
  for (auto &par : (*mi)["params"]) {
    int64_t off = par["offset"], numel = 1;
    for (int64_t s : par["shape"])
      numel *= s;
    std::vector<int64_t> idx;
    if (numel <= a.samples)
      for (int64_t i = 0; i < numel; ++i)
        idx.push_back(i);
    else
      for (int64_t s = 0; s < a.samples; ++s)
        idx.push_back(pick() % numel);
    double worst = 0, scale = 0;
    for (int64_t i : idx) {
      double h = a.fdStep * std::max(1.0, std::abs(theta[off + i]));
      auto at = [&](double s) {
        Vec t = theta;
        t[off + i] += s * h;
        return loss(t);
      };
      // Central differences of fourth order (the five-point stencil): the
      // exact line searches of the kernel energies curve the loss too much
      // for the second-order ones at a step that rounding allows.
      double fd = a.fdOrder == 4 ? (8 * (at(1) - at(-1)) - (at(2) - at(-2))) / (12 * h)
                                 : (at(1) - at(-1)) / (2 * h);
      if (getenv("UNROLL_CHECK_VERBOSE"))
        fprintf(stderr, "%s[%lld]: fd %.12g grad %.12g\n", par["name"].get<std::string>().c_str(),
                (long long)i, fd, grad[off + i]);
      scale = std::max({scale, std::abs(fd), std::abs(grad[off + i])});
      worst = std::max(worst, std::abs(fd - grad[off + i]));
    }
    double rel = worst / std::max(scale, 1e-8);
    worstAll = std::max(worstAll, rel);
    printf("  %-48s %8lld entries, %2zu checked: max |fd - grad| / max |grad| = %.3g\n",
           par["name"].get<std::string>().c_str(), (long long)numel, idx.size(), rel);
  }
  bool ok = worstAll <= tol;
  printf("gradient check @%s (%lld loops, window %lld, finite differences of the %s): max "
         "relative error %.3g (tolerance %.0e)\n",
         (*mi)["name"].get<std::string>().c_str(), (long long)loops,
         (long long)std::min(loops, window),
         truncated ? "reference's truncated loss" : "compiled loss", worstAll, tol);
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
