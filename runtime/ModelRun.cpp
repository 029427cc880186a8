//===- ModelRun.cpp - calling a compiled model ----------------------------===//
#include "unroll/runtime/ModelRun.h"
#include "unroll/runtime/MemRef.h"
#include "unroll/runtime/ModelInfo.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <type_traits>

#include <sched.h>

using namespace unroll;
namespace key = unroll::info;

std::vector<double> TokenLayout::build(const Prompts &p) const {
  if (!concat)
    return promptTokens(p);
  // (x_i, y_i) for the context, (x_q, 0) for the query, the last point.
  int64_t w = p.dim + 1;
  std::vector<double> z(p.batch * p.points * w, 0.0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.points; ++i) {
      double *row = &z[(b * p.points + i) * w];
      for (int64_t c = 0; c < p.dim; ++c)
        row[c] = p.xs[(b * p.points + i) * p.dim + c];
      row[p.dim] = i + 1 < p.points ? p.ys[b * p.points + i] : 0.0;
    }
  return z;
}

TokenLayout TokenLayout::of(const nlohmann::json &modelInfo) {
  return {modelInfo.value(key::kEncoding, std::string("interleaved")) == "concat"};
}

std::vector<double> unroll::promptTokens(const Prompts &p) {
  std::vector<double> z(p.batch * 2 * p.points * p.dim, 0.0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.points; ++i) {
      double *xrow = &z[((b * 2 * p.points) + 2 * i) * p.dim];
      for (int64_t c = 0; c < p.dim; ++c)
        xrow[c] = p.xs[(b * p.points + i) * p.dim + c];
      z[((b * 2 * p.points) + 2 * i + 1) * p.dim] = p.ys[b * p.points + i];
    }
  return z;
}

const nlohmann::json *unroll::findModel(const Model &m, const std::string &name,
                                        std::string &error) {
  const auto &info = m.info();
  if (!info.contains(key::kModels) || !info[key::kModels].is_array() ||
      info[key::kModels].empty()) {
    error = m.path() + ": the library holds no model (its model info lists none)";
    return nullptr;
  }
  for (const auto &e : info[key::kModels])
    if (name.empty() || e.value(key::kName, "") == name)
      return &e;
  error = m.path() + ": no model named '" + name + "'";
  return nullptr;
}

bool ModelRunner::init(const Model &m, const nlohmann::json &info, std::string &error) {
  info_ = &info;
  if (info.value(key::kEncoding, "") == "dense") {
    error = m.path() + ": model '" + info.value(key::kName, "?") +
            "' has encoding(dense) (predictions [B, n, F] against targets, e.g. a learned "
            "unrolling's codes); the in-context tasks need interleaved or concat tokens (a "
            "learned unrolling runs with --task sparse_coding)";
    return false;
  }
  forward_ = m.entry(info.value(key::kForward, ""));
  lossGrad_ = m.entry(info.value(key::kLossGrad, ""));
  if (!forward_ || !lossGrad_) {
    error = m.path() + ": missing the model's forward or loss_grad entry point";
    return false;
  }
  adam_ = info.contains(key::kAdam) ? m.entry(info.value(key::kAdam, "")) : nullptr;
  if (info.contains(key::kFixedPoint)) {
    const auto &fp = info[key::kFixedPoint];
    solve_ = fp.contains(key::kSolve) ? m.entry(fp.value(key::kSolve, "")) : nullptr;
    lossGradFixed_ =
        fp.contains(key::kLossGradFixed) ? m.entry(fp.value(key::kLossGradFixed, "")) : nullptr;
  }
  readOnly_ = reinterpret_cast<void (*)(const void *, size_t)>(m.symbol("unroll_cpu_read_only"));
  help_ = reinterpret_cast<HelpFn>(m.symbol("unroll_cpu_help"));
  gradient_ = modelGradientMode(info);
  if (gradient_.fixedPoint() && !lossGradFixed_)
    gradient_ = GradientMode();
  if (info.contains(key::kEnergy) && info[key::kEnergy].contains(key::kTrace))
    energyTrace_ = m.entry(info[key::kEnergy].value(key::kTrace, ""));
  f32_ = m.info().value(key::kElementType, "") == "f32";
  numParams_ = info.value(key::kNumParams, (int64_t)0);
  dim_ = info.value(key::kPromptDim, (int64_t)0);
  positions_ = info.value(key::kPositions, (int64_t)-1);
  layout_ = TokenLayout::of(info);
  threads_ = std::max(1u, std::thread::hardware_concurrency());
  gpu_ = m.gpu();
  microTokens_ = gpu_ ? 0 : kDefaultMicroBatchTokens;
  if (gpu_)
    threads_ = 1; // one call with the whole batch: the GPU parallelizes it
  return true;
}

ModelRunner::HelpFn ModelRunner::helper() const {
  // A helper waits by spinning: only where each thread has a core.
  static const bool off = [] {
    const char *e = getenv("UNROLL_HELP");
    return e && strcmp(e, "0") == 0;
  }();
  static const int cores = [] {
    cpu_set_t set; // the cores this process may run on
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      return std::max(1, CPU_COUNT(&set));
    return int(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return off || threads_ > cores ? nullptr : help_;
}

int64_t ModelRunner::shareSize(int64_t batch) const {
  int64_t n = std::max<int64_t>(1, std::min<int64_t>(threads_, batch));
  return (batch + n - 1) / n;
}

int64_t ModelRunner::partsOf(int64_t share, int64_t points) const {
  if (microTokens_ <= 0 || share <= 1)
    return 1;
  // As many prompts per chunk as fit the target (at least one), and as few
  // chunks as that allows.
  const int64_t fit =
      std::max<int64_t>(1, microTokens_ / std::max<int64_t>(1, layout_.tokens(points)));
  return (share + fit - 1) / fit;
}

std::vector<std::vector<ModelRunner::Chunk>> ModelRunner::plan(const Prompts &p) const {
  const int64_t per = shareSize(p.batch);
  std::vector<std::vector<Chunk>> chunks;
  for (int64_t b0 = 0; b0 < p.batch; b0 += per) {
    int64_t b1 = std::min(p.batch, b0 + per), share = b1 - b0, parts = partsOf(share, p.points);
    std::vector<Chunk> mine; // near-equal parts
    for (int64_t i = 0; i < parts; ++i)
      mine.push_back({b0 + share * i / parts, b0 + share * (i + 1) / parts});
    chunks.push_back(std::move(mine));
  }
  return chunks;
}

bool ModelRunner::oneCall(const Prompts &p) const {
  return shareSize(p.batch) >= p.batch && partsOf(p.batch, p.points) == 1;
}

int64_t ModelRunner::livePrompts(int64_t batch, int64_t points) const {
  if (batch <= 0)
    return 0;
  const int64_t per = shareSize(batch), shares = (batch + per - 1) / per;
  auto largest = [&](int64_t share) {
    int64_t parts = partsOf(share, points);
    return (share + parts - 1) / parts;
  };
  // Every share but the last has `per` prompts.
  return (shares - 1) * largest(per) + largest(batch - (shares - 1) * per);
}

namespace {
/// Prompts [begin, end) of a batch.
Prompts slice(const Prompts &p, int64_t begin, int64_t end) {
  Prompts s{end - begin, p.points, p.dim, {}, {}};
  s.xs.assign(p.xs.begin() + begin * p.points * p.dim, p.xs.begin() + end * p.points * p.dim);
  s.ys.assign(p.ys.begin() + begin * p.points, p.ys.begin() + end * p.points);
  return s;
}

/// Runs fn(thread, b0, b1, prompts [b0, b1)) for the chunks of `plan`
/// (ModelRunner::plan): one thread per entry, each running its chunks in
/// order. A thread whose chunks are done lends itself to the others'
/// products through the library's unroll_cpu_help (`help`, when not null)
/// until they are done too.
template <typename Fn>
void overChunks(const Prompts &p, const std::vector<std::vector<ModelRunner::Chunk>> &plan,
                ModelRunner::HelpFn help, Fn fn) {
  int32_t running = int32_t(plan.size());
  auto work = [&](size_t t) {
    for (auto [b0, b1] : plan[t])
      fn(int64_t(t), b0, b1, slice(p, b0, b1));
    __atomic_sub_fetch(&running, 1, __ATOMIC_ACQ_REL);
    if (help)
      help(&running);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < plan.size(); ++t)
    pool.emplace_back(work, t); // the calling thread takes the first share below
  if (!plan.empty())
    work(0);
  for (auto &t : pool)
    t.join();
}
} // namespace

bool ModelRunner::check(const Prompts &p, int64_t thetaSize, int64_t loops,
                        std::string &error) const {
  if (p.batch <= 0 || p.points <= 0) {
    error = "a batch needs at least one prompt of at least one point";
    return false;
  }
  if (p.dim != dim_) {
    error = "the model reads d = " + std::to_string(dim_) +
            " dimensional x, got d = " + std::to_string(p.dim);
    return false;
  }
  if (positions_ > 0 && layout_.tokens(p.points) > positions_) {
    error = "prompts of " + std::to_string(p.points) + " points need " +
            std::to_string(layout_.tokens(p.points)) + " positions, the model has " +
            std::to_string(positions_);
    return false;
  }
  if (thetaSize != numParams_) {
    error = "expected " + std::to_string(numParams_) + " parameter values, got " +
            std::to_string(thetaSize);
    return false;
  }
  if (loops < 1) {
    error = "the number of loop iterations must be >= 1, got " + std::to_string(loops);
    return false;
  }
  return true;
}

namespace {
template <typename T> std::vector<T> to(const std::vector<double> &v) {
  return std::vector<T>(v.begin(), v.end());
}

/// theta in the library's precision: one copy per call, which every chunk
/// and thread reads (the compiled functions only read theta), so that the
/// threads share one copy of the weights in the cache and no chunk
/// converts its own.
struct TypedTheta {
  std::vector<float> f32;
  std::vector<double> f64;
  TypedTheta(const std::vector<double> &theta, bool isF32) {
    if (isF32)
      f32 = to<float>(theta);
    else
      f64 = theta;
  }
};

/// unroll_cpu_read_only of a CPU library (null elsewhere): θ marked as
/// memory the calling thread's kernels only read during one call, so that
/// its GEMMs pack each weight once per call instead of once per product.
using ReadOnlyFn = void (*)(const void *, size_t);

/// θ read-only for the kernels of this thread while the object lives.
struct ReadOnlyScope {
  ReadOnlyFn fn;
  ReadOnlyScope(ReadOnlyFn f, const void *p, size_t bytes) : fn(f) {
    if (fn)
      fn(p, bytes);
  }
  ~ReadOnlyScope() {
    if (fn)
      fn(nullptr, 0);
  }
  ReadOnlyScope(const ReadOnlyScope &) = delete;
  ReadOnlyScope &operator=(const ReadOnlyScope &) = delete;
};

/// The forward with theta at `th` (host memory, or resident state used in
/// place).
template <typename T>
void callForwardAt(const TokenLayout &L, void *fn, ReadOnlyFn ro, const Prompts &p, T *th,
                   int64_t np, int64_t loops, std::vector<double> &preds) {
  using Fn = void (*)(MemRef<T, 3> *, MemRef<T, 1> *, int64_t, MemRef<T, 3> *);
  int64_t n = L.tokens(p.points);
  std::vector<T> z = to<T>(L.build(p)), out(loops * p.batch * n);
  auto zm = makeMemRef<T, 3>(z.data(), {p.batch, n, L.width(p.dim)});
  auto tm = makeMemRef<T, 1>(th, {np});
  auto om = makeMemRef<T, 3>(out.data(), {loops, p.batch, n});
  {
    ReadOnlyScope scope(ro, th, np * sizeof(T));
    reinterpret_cast<Fn>(fn)(&zm, &tm, loops, &om);
  }
  preds.resize(loops * p.batch * p.points);
  for (int64_t t = 0; t < loops; ++t)
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.points; ++i)
        preds[(t * p.batch + b) * p.points + i] =
            L.prediction(&out[(t * p.batch + b) * n], i, p.points);
}

template <typename T>
void callEnergyTrace(const TokenLayout &L, void *fn, const Prompts &p,
                     const std::vector<double> &theta, int64_t loops, std::vector<double> &energies,
                     std::vector<double> &starts) {
  using Fn = void (*)(MemRef<T, 3> *, MemRef<T, 1> *, int64_t, MemRef<T, 2> *, MemRef<T, 2> *);
  int64_t n = L.tokens(p.points);
  std::vector<T> z = to<T>(L.build(p)), th = to<T>(theta), e((loops + 1) * p.batch),
                 s(loops * p.batch);
  auto zm = makeMemRef<T, 3>(z.data(), {p.batch, n, L.width(p.dim)});
  auto tm = makeMemRef<T, 1>(th.data(), {(int64_t)th.size()});
  auto em = makeMemRef<T, 2>(e.data(), {loops + 1, p.batch});
  auto sm = makeMemRef<T, 2>(s.data(), {loops, p.batch});
  reinterpret_cast<Fn>(fn)(&zm, &tm, loops, &em, &sm);
  energies.assign(e.begin(), e.end());
  starts.assign(s.begin(), s.end());
}

/// @M_loss_grad on caller-owned theta [np] and grad [np] buffers of T.
template <typename T>
void callLossGradInto(const TokenLayout &L, void *fn, ReadOnlyFn ro, const Prompts &p, T *theta,
                      T *grad, int64_t np, int64_t loops, int64_t window,
                      std::vector<double> &losses) {
  using Fn = void (*)(MemRef<T, 3> *, MemRef<T, 2> *, MemRef<T, 1> *, int64_t, int64_t,
                      MemRef<T, 1> *, MemRef<T, 1> *);
  int64_t n = L.tokens(p.points), tw = std::min(loops, window);
  std::vector<T> z = to<T>(L.build(p)), ys = to<T>(p.ys), l(tw);
  auto zm = makeMemRef<T, 3>(z.data(), {p.batch, n, L.width(p.dim)});
  auto ym = makeMemRef<T, 2>(ys.data(), {p.batch, p.points});
  auto tm = makeMemRef<T, 1>(theta, {np});
  auto lm = makeMemRef<T, 1>(l.data(), {tw});
  auto gm = makeMemRef<T, 1>(grad, {np});
  {
    ReadOnlyScope scope(ro, theta, np * sizeof(T));
    reinterpret_cast<Fn>(fn)(&zm, &ym, &tm, loops, window, &lm, &gm);
  }
  losses.assign(l.begin(), l.end());
}

/// @M_loss_grad_fixed on caller-owned theta [np] and grad [np] buffers of T.
template <typename T>
void callLossGradFixedInto(const TokenLayout &L, void *fn, ReadOnlyFn ro, const Prompts &p,
                           T *theta, T *grad, int64_t np, int64_t loops, const GradientMode &g,
                           std::vector<double> &losses, FixedPointStats &stats) {
  using Fn = void (*)(MemRef<T, 3> *, MemRef<T, 2> *, MemRef<T, 1> *, int64_t, int64_t, T, T,
                      MemRef<T, 1> *, MemRef<T, 1> *, MemRef<T, 1> *);
  int64_t n = L.tokens(p.points);
  std::vector<T> z = to<T>(L.build(p)), ys = to<T>(p.ys), l(1), st(2);
  auto zm = makeMemRef<T, 3>(z.data(), {p.batch, n, L.width(p.dim)});
  auto ym = makeMemRef<T, 2>(ys.data(), {p.batch, p.points});
  auto tm = makeMemRef<T, 1>(theta, {np});
  auto lm = makeMemRef<T, 1>(l.data(), {1});
  auto gm = makeMemRef<T, 1>(grad, {np});
  auto sm = makeMemRef<T, 1>(st.data(), {2});
  {
    ReadOnlyScope scope(ro, theta, np * sizeof(T));
    reinterpret_cast<Fn>(fn)(&zm, &ym, &tm, loops, g.steps, T(g.tol), T(g.damping), &lm, &gm, &sm);
  }
  losses.assign(l.begin(), l.end());
  stats = {double(st[0]), double(st[1])};
}

/// One @M_adam call on resident state with `hyper` and `partial` buffers
/// (host or resident memory).
template <typename T> void callAdamOn(void *fn, ResidentState &st, T *hyper, T *partial) {
  auto at = [](void *p) { return static_cast<T *>(p); };
  callCompiledAdam<T>(fn, at(st.theta), at(st.grad), at(st.m), at(st.v), st.size, hyper, partial);
}

/// @M_loss_grad on resident state with prompts, targets and losses in the
/// resident buffers buf[0..2].
template <typename T>
void callLossGradOn(const TokenLayout &L, void *fn, const Prompts &p, ResidentState &st,
                    std::vector<void *> &buf, int64_t loops, int64_t window) {
  using Fn = void (*)(MemRef<T, 3> *, MemRef<T, 2> *, MemRef<T, 1> *, int64_t, int64_t,
                      MemRef<T, 1> *, MemRef<T, 1> *);
  int64_t n = L.tokens(p.points), tw = std::min(loops, window);
  auto zm = makeMemRef<T, 3>(static_cast<T *>(buf[0]), {p.batch, n, L.width(p.dim)});
  auto ym = makeMemRef<T, 2>(static_cast<T *>(buf[1]), {p.batch, p.points});
  auto tm = makeMemRef<T, 1>(static_cast<T *>(st.theta), {st.size});
  auto lm = makeMemRef<T, 1>(static_cast<T *>(buf[2]), {tw});
  auto gm = makeMemRef<T, 1>(static_cast<T *>(st.grad), {st.size});
  reinterpret_cast<Fn>(fn)(&zm, &ym, &tm, loops, window, &lm, &gm);
}

template <typename T> double sumOf(const std::vector<T> &xs) {
  double sum = 0;
  for (T x : xs)
    sum += x;
  return sum;
}

template <typename T> double callAdam(void *fn, ResidentState &st, const AdamStep &opt) {
  std::vector<T> hyper = adamHyper<T>(opt), partial(kAdamPartials);
  callAdamOn<T>(fn, st, hyper.data(), partial.data());
  return sumOf(partial);
}
} // namespace

namespace {
/// The prompts cut after their first `points` points.
Prompts prefix(const Prompts &p, int64_t points) {
  Prompts s{p.batch, points, p.dim, {}, {}};
  s.xs.reserve(p.batch * points * p.dim);
  s.ys.reserve(p.batch * points);
  for (int64_t b = 0; b < p.batch; ++b) {
    s.xs.insert(s.xs.end(), p.xs.begin() + b * p.points * p.dim,
                p.xs.begin() + (b * p.points + points) * p.dim);
    s.ys.insert(s.ys.end(), p.ys.begin() + b * p.points, p.ys.begin() + b * p.points + points);
  }
  return s;
}

/// Concat's predictions for every point: the prompt cut after point i, its
/// query's prediction, for each i; `once(prefix, out)` gives a cut prompt's
/// predictions ([rows, B, i + 1] with `rows` leading rows).
template <typename Once>
void overPrefixes(const Prompts &p, int64_t rows, std::vector<double> &preds, Once once) {
  preds.assign(rows * p.batch * p.points, std::nan(""));
  for (int64_t i = 0; i < p.points; ++i) {
    Prompts c = prefix(p, i + 1);
    std::vector<double> part;
    once(c, part);
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t b = 0; b < p.batch; ++b)
        preds[(t * p.batch + b) * p.points + i] = part[(t * p.batch + b) * (i + 1) + i];
  }
}
} // namespace

bool ModelRunner::forward(const Prompts &p, const std::vector<double> &theta, int64_t loops,
                          std::vector<double> &preds, std::string &error) const {
  if (!check(p, (int64_t)theta.size(), loops, error))
    return false;
  if (layout_.concat) {
    overPrefixes(p, loops, preds, [&](const Prompts &c, std::vector<double> &part) {
      forwardOnce(c, theta, loops, part);
    });
    return true;
  }
  return forwardOnce(p, theta, loops, preds);
}

bool ModelRunner::forwardOnce(const Prompts &p, const std::vector<double> &theta, int64_t loops,
                              std::vector<double> &preds) const {
  preds.assign(loops * p.batch * p.points, 0.0);
  TypedTheta th(theta, f32_);
  const int64_t np = (int64_t)theta.size();
  overChunks(p, plan(p), helper(), [&](int64_t, int64_t b0, int64_t b1, const Prompts &c) {
    std::vector<double> part;
    if (f32_)
      callForwardAt<float>(layout_, forward_, readOnly_, c, th.f32.data(), np, loops, part);
    else
      callForwardAt<double>(layout_, forward_, readOnly_, c, th.f64.data(), np, loops, part);
    for (int64_t t = 0; t < loops; ++t)
      std::copy(part.begin() + t * c.batch * p.points, part.begin() + (t + 1) * c.batch * p.points,
                preds.begin() + (t * p.batch + b0) * p.points);
    (void)b1;
  });
  return true;
}

bool ModelRunner::lossGrad(const Prompts &p, const std::vector<double> &theta, int64_t loops,
                           int64_t window, std::vector<double> &losses, std::vector<double> &grad,
                           std::string &error) const {
  if (!check(p, (int64_t)theta.size(), loops, error))
    return false;
  if (window < 1) {
    error = "the loss window T must be >= 1, got " + std::to_string(window);
    return false;
  }
  // Each chunk's loss is a mean over its own prompts: weighted by its size,
  // summed per thread as its chunks finish (one gradient per thread is
  // kept, not one per chunk), then over the threads in order.
  auto chunks = plan(p);
  TypedTheta th(theta, f32_);
  std::vector<std::vector<double>> ls(chunks.size()), gs(chunks.size());
  std::vector<FixedPointStats> stats(chunks.size());
  overChunks(p, chunks, helper(), [&](int64_t t, int64_t b0, int64_t b1, const Prompts &part) {
    std::vector<double> l, g;
    FixedPointStats st;
    auto call = [&](auto *shared) { // th's copy in the library's precision
      using T = std::remove_pointer_t<decltype(shared)>;
      std::vector<T> gt(theta.size());
      if (gradient_.fixedPoint())
        callLossGradFixedInto<T>(layout_, lossGradFixed_, readOnly_, part, shared, gt.data(),
                                 gt.size(), loops, gradient_, l, st);
      else
        callLossGradInto<T>(layout_, lossGrad_, readOnly_, part, shared, gt.data(), gt.size(),
                            loops, window, l);
      g.assign(gt.begin(), gt.end());
    };
    if (f32_)
      call(th.f32.data());
    else
      call(th.f64.data());
    const double w = double(b1 - b0) / double(p.batch);
    ls[t].resize(l.size(), 0.0);
    gs[t].resize(g.size(), 0.0);
    for (size_t i = 0; i < l.size(); ++i)
      ls[t][i] += w * l[i];
    for (size_t i = 0; i < g.size(); ++i)
      gs[t][i] += w * g[i];
    stats[t].iterations = std::max(stats[t].iterations, st.iterations);
    stats[t].residual = std::max(stats[t].residual, st.residual);
  });
  fixedStats_ = FixedPointStats();
  for (const FixedPointStats &s : stats) {
    fixedStats_.iterations = std::max(fixedStats_.iterations, s.iterations);
    fixedStats_.residual = std::max(fixedStats_.residual, s.residual);
  }
  losses.assign(ls[0].size(), 0.0);
  grad.assign(gs[0].size(), 0.0);
  for (size_t t = 0; t < ls.size(); ++t) {
    for (size_t i = 0; i < losses.size(); ++i)
      losses[i] += ls[t][i];
    for (size_t i = 0; i < grad.size(); ++i)
      grad[i] += gs[t][i];
  }
  return true;
}

bool ModelRunner::checkStep(const Prompts &p, const ResidentState &st, int64_t loops,
                            int64_t window, std::string &error) const {
  if (st.size != numParams_ || st.f32 != f32_) {
    error = "the resident state does not match the model";
    return false;
  }
  if (!check(p, numParams_, loops, error))
    return false;
  if (window < 1) {
    error = "the loss window T must be >= 1, got " + std::to_string(window);
    return false;
  }
  return true;
}

bool ModelRunner::lossGrad(const Prompts &p, ResidentState &st, int64_t loops, int64_t window,
                           std::vector<double> &losses, std::string &error) const {
  if (!checkStep(p, st, loops, window, error))
    return false;
  // (A fixed-point gradient's loop count depends on the data: no graph.)
  if (threads_ == 1 && gpu_ && st.graphsUsable() && !gradient_.fixedPoint())
    return f32_ ? lossGradGraph<float>(p, st, loops, window, losses)
                : lossGradGraph<double>(p, st, loops, window, losses);
  // One call straight on the resident buffers when the plan is one chunk.
  const bool whole = oneCall(p);
  if (whole && gradient_.fixedPoint()) {
    if (f32_)
      callLossGradFixedInto<float>(layout_, lossGradFixed_, readOnly_, p, (float *)st.theta,
                                   (float *)st.grad, st.size, loops, gradient_, losses,
                                   fixedStats_);
    else
      callLossGradFixedInto<double>(layout_, lossGradFixed_, readOnly_, p, (double *)st.theta,
                                    (double *)st.grad, st.size, loops, gradient_, losses,
                                    fixedStats_);
    return true;
  }
  if (whole) {
    // Straight into the resident buffers: nothing is copied on a GPU.
    if (f32_)
      callLossGradInto<float>(layout_, lossGrad_, readOnly_, p, (float *)st.theta, (float *)st.grad,
                              st.size, loops, window, losses);
    else
      callLossGradInto<double>(layout_, lossGrad_, readOnly_, p, (double *)st.theta,
                               (double *)st.grad, st.size, loops, window, losses);
    return true;
  }
  // Threads or micro-batches over the batch (CPU): the chunks' gradients
  // meet on the host.
  std::vector<double> theta, grad;
  st.readVector(theta, st.theta);
  if (!lossGrad(p, theta, loops, window, losses, grad, error))
    return false;
  st.writeVector(st.grad, grad);
  return true;
}

template <typename T>
bool ModelRunner::lossGradGraph(const Prompts &p, ResidentState &st, int64_t loops, int64_t window,
                                std::vector<double> &losses) const {
  int64_t tw = std::min(loops, window);
  std::vector<T> z = to<T>(layout_.build(p)), ys = to<T>(p.ys), l(tw);
  auto fill = [&](std::vector<void *> &buf) {
    st.write_(buf[0], z.data(), z.size() * sizeof(T));
    st.write_(buf[1], ys.data(), ys.size() * sizeof(T));
  };
  auto call = [&](std::vector<void *> &buf) {
    callLossGradOn<T>(layout_, lossGrad_, p, st, buf, loops, window);
  };
  bool replayed =
      st.graphed(st.step_, {p.batch, p.points, p.dim, loops, window},
                 {z.size() * sizeof(T), ys.size() * sizeof(T), l.size() * sizeof(T)}, fill, call);
  ++(replayed ? st.graphStats_.replayed : st.graphStats_.direct);
  st.read_(l.data(), st.step_.buffers[2], l.size() * sizeof(T));
  losses.assign(l.begin(), l.end());
  return true;
}

template <typename T>
bool ModelRunner::forwardGraph(const Prompts &p, ResidentState &st, int64_t loops,
                               std::vector<double> &preds) const {
  using Fn = void (*)(MemRef<T, 3> *, MemRef<T, 1> *, int64_t, MemRef<T, 3> *);
  int64_t n = layout_.tokens(p.points);
  std::vector<T> z = to<T>(layout_.build(p)), out(loops * p.batch * n);
  auto fill = [&](std::vector<void *> &buf) { st.write_(buf[0], z.data(), z.size() * sizeof(T)); };
  auto call = [&](std::vector<void *> &buf) {
    auto zm = makeMemRef<T, 3>(static_cast<T *>(buf[0]), {p.batch, n, layout_.width(p.dim)});
    auto tm = makeMemRef<T, 1>(static_cast<T *>(st.theta), {st.size});
    auto om = makeMemRef<T, 3>(static_cast<T *>(buf[1]), {loops, p.batch, n});
    reinterpret_cast<Fn>(forward_)(&zm, &tm, loops, &om);
  };
  if (st.graphed(st.forward_, {p.batch, p.points, p.dim, loops},
                 {z.size() * sizeof(T), out.size() * sizeof(T)}, fill, call))
    ++st.graphStats_.forwardReplayed;
  st.read_(out.data(), st.forward_.buffers[1], out.size() * sizeof(T));
  preds.resize(loops * p.batch * p.points);
  for (int64_t t = 0; t < loops; ++t)
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.points; ++i)
        preds[(t * p.batch + b) * p.points + i] =
            layout_.prediction(&out[(t * p.batch + b) * n], i, p.points);
  return true;
}

bool ModelRunner::forward(const Prompts &p, ResidentState &st, int64_t loops,
                          std::vector<double> &preds, std::string &error) const {
  if (st.size != numParams_ || st.f32 != f32_) {
    error = "the resident state does not match the model";
    return false;
  }
  if (!oneCall(p) || layout_.concat) { // threads or micro-batches (CPU), or one call per
                                       // cut prompt (concat): from a host copy
    std::vector<double> theta;
    st.readVector(theta, st.theta);
    return forward(p, theta, loops, preds, error);
  }
  if (!check(p, numParams_, loops, error))
    return false;
  if (gpu_ && st.graphsUsable())
    return f32_ ? forwardGraph<float>(p, st, loops, preds)
                : forwardGraph<double>(p, st, loops, preds);
  if (f32_)
    callForwardAt<float>(layout_, forward_, readOnly_, p, (float *)st.theta, st.size, loops, preds);
  else
    callForwardAt<double>(layout_, forward_, readOnly_, p, (double *)st.theta, st.size, loops,
                          preds);
  return true;
}

double ModelRunner::adamStep(ResidentState &st, const AdamStep &opt) const {
  return f32_ ? callAdam<float>(adam_, st, opt) : callAdam<double>(adam_, st, opt);
}

template <typename T>
void ModelRunner::trainStepGraph(const Prompts &p, ResidentState &st, int64_t loops, int64_t window,
                                 const AdamStep &opt, std::vector<double> &losses,
                                 double &normSq) const {
  int64_t tw = std::min(loops, window);
  std::vector<T> z = to<T>(layout_.build(p)), ys = to<T>(p.ys), l(tw);
  std::vector<T> hyper = adamHyper<T>(opt), partial(kAdamPartials);
  // Resident buffers: prompts, targets, losses, Adam's values, partial sums.
  auto fill = [&](std::vector<void *> &buf) {
    st.write_(buf[0], z.data(), z.size() * sizeof(T));
    st.write_(buf[1], ys.data(), ys.size() * sizeof(T));
    st.write_(buf[3], hyper.data(), hyper.size() * sizeof(T));
  };
  auto call = [&](std::vector<void *> &buf) {
    callLossGradOn<T>(layout_, lossGrad_, p, st, buf, loops, window);
    callAdamOn<T>(adam_, st, static_cast<T *>(buf[3]), static_cast<T *>(buf[4]));
  };
  bool replayed = st.graphed(st.train_, {p.batch, p.points, p.dim, loops, window},
                             {z.size() * sizeof(T), ys.size() * sizeof(T), l.size() * sizeof(T),
                              hyper.size() * sizeof(T), partial.size() * sizeof(T)},
                             fill, call);
  ++(replayed ? st.graphStats_.replayed : st.graphStats_.direct);
  st.read_(l.data(), st.train_.buffers[2], l.size() * sizeof(T));
  st.read_(partial.data(), st.train_.buffers[4], partial.size() * sizeof(T));
  losses.assign(l.begin(), l.end());
  normSq = sumOf(partial);
}

bool ModelRunner::trainStep(const Prompts &p, ResidentState &st, int64_t loops, int64_t window,
                            const AdamStep &opt, std::vector<double> &losses, double &normSq,
                            std::string &error) const {
  if (!adam_) {
    error = "the library has no compiled optimizer (@M_adam)";
    return false;
  }
  if (threads_ == 1 && gpu_ && st.graphsUsable() && !gradient_.fixedPoint()) {
    if (!checkStep(p, st, loops, window, error))
      return false;
    if (f32_)
      trainStepGraph<float>(p, st, loops, window, opt, losses, normSq);
    else
      trainStepGraph<double>(p, st, loops, window, opt, losses, normSq);
    return true;
  }
  if (!lossGrad(p, st, loops, window, losses, error))
    return false;
  normSq = adamStep(st, opt);
  return true;
}

bool ModelRunner::energyTrace(const Prompts &p, const std::vector<double> &theta, int64_t loops,
                              std::vector<double> &energies, std::vector<double> &starts,
                              std::string &error) const {
  if (!energyTrace_) {
    error = "the model's loop does not descend an energy (no energy trace entry point)";
    return false;
  }
  if (!check(p, (int64_t)theta.size(), loops, error))
    return false;
  if (f32_)
    callEnergyTrace<float>(layout_, energyTrace_, p, theta, loops, energies, starts);
  else
    callEnergyTrace<double>(layout_, energyTrace_, p, theta, loops, energies, starts);
  return true;
}

//===----------------------------------------------------------------------===//
// Fixed points: gradient modes and halting
//===----------------------------------------------------------------------===//

bool ModelRunner::setGradient(const GradientMode &g, std::string &error) {
  if (g.fixedPoint() && !lossGradFixed_) {
    error = "--gradient " + g.str() +
            " needs the library's fixed-point gradient entry (@M_loss_grad_fixed), which a "
            "loop without input injection does not have (its fixed point would not depend on "
            "the prompt); rebuild with this unroll-opt, or use injection(add)";
    return false;
  }
  gradient_ = g;
  return true;
}

namespace {
template <typename T>
void callSolve(const TokenLayout &L, void *fn, const Prompts &p, const std::vector<double> &theta,
               int64_t maxLoops, double tol, std::vector<double> &preds,
               std::vector<double> &loops) {
  using Fn = void (*)(MemRef<T, 3> *, MemRef<T, 1> *, int64_t, T, MemRef<T, 2> *, MemRef<T, 1> *);
  int64_t n = L.tokens(p.points);
  std::vector<T> z = to<T>(L.build(p)), th = to<T>(theta), out(p.batch * n), used(p.batch);
  auto zm = makeMemRef<T, 3>(z.data(), {p.batch, n, L.width(p.dim)});
  auto tm = makeMemRef<T, 1>(th.data(), {(int64_t)th.size()});
  auto om = makeMemRef<T, 2>(out.data(), {p.batch, n});
  auto um = makeMemRef<T, 1>(used.data(), {p.batch});
  reinterpret_cast<Fn>(fn)(&zm, &tm, maxLoops, T(tol), &om, &um);
  preds.resize(p.batch * p.points);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.points; ++i)
      preds[b * p.points + i] = L.prediction(&out[b * n], i, p.points);
  loops.assign(used.begin(), used.end());
}
} // namespace

bool ModelRunner::solve(const Prompts &p, const std::vector<double> &theta, int64_t maxLoops,
                        double tol, std::vector<double> &preds, std::vector<double> &loops,
                        std::string &error) const {
  if (!solve_) {
    error = "the library has no halting entry point (@M_solve); rebuild it with this unroll-opt";
    return false;
  }
  if (!check(p, (int64_t)theta.size(), maxLoops, error))
    return false;
  if (!(tol > 0) || !std::isfinite(tol)) {
    error = "the halting tolerance must be a number > 0, got " + std::to_string(tol);
    return false;
  }
  if (layout_.concat) {
    // Each cut prompt halts on its own; a point's loops are its cut's.
    std::vector<double> used(p.batch * p.points, 0.0);
    overPrefixes(p, 1, preds, [&](const Prompts &c, std::vector<double> &part) {
      std::vector<double> lp;
      solveOnce(c, theta, maxLoops, tol, part, lp);
      for (int64_t b = 0; b < p.batch; ++b)
        used[b * p.points + c.points - 1] = lp[b];
    });
    // loops [B]: the most any point of the prompt used.
    loops.assign(p.batch, 0.0);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.points; ++i)
        loops[b] = std::max(loops[b], used[b * p.points + i]);
    return true;
  }
  return solveOnce(p, theta, maxLoops, tol, preds, loops);
}

bool ModelRunner::solveOnce(const Prompts &p, const std::vector<double> &theta, int64_t maxLoops,
                            double tol, std::vector<double> &preds,
                            std::vector<double> &loops) const {
  preds.assign(p.batch * p.points, 0.0);
  loops.assign(p.batch, 0.0);
  // Halting is per prompt, so chunks of the batch halt independently.
  overChunks(p, plan(p), helper(), [&](int64_t, int64_t b0, int64_t, const Prompts &c) {
    std::vector<double> pr, lp;
    if (f32_)
      callSolve<float>(layout_, solve_, c, theta, maxLoops, tol, pr, lp);
    else
      callSolve<double>(layout_, solve_, c, theta, maxLoops, tol, pr, lp);
    std::copy(pr.begin(), pr.end(), preds.begin() + b0 * p.points);
    std::copy(lp.begin(), lp.end(), loops.begin() + b0);
  });
  return true;
}
