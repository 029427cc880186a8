//===- ModelRun.h - calling a compiled model --------------------*- C++ -*-===//
//
// Part of the runtime library (no process-level behaviour: no environment,
// signals or printing): resolves a model's entry points and calls them on
// prompts, splitting the batch over threads.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_MODELRUN_H
#define UNROLL_RUNTIME_MODELRUN_H

#include "unroll/runtime/AdamStep.h"
#include "unroll/runtime/GradientMode.h"
#include "unroll/runtime/Model.h"
#include "unroll/runtime/ResidentState.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace unroll {

/// A batch of in-context prompts: xs [B, k, d], ys [B, k].
struct Prompts {
  int64_t batch = 0, points = 0, dim = 0;
  std::vector<double> xs, ys;
};

/// P2's token layout: x_1, [y_1, 0, …], x_2, … as Z [B, 2k, d].
std::vector<double> promptTokens(const Prompts &p);

/// How a model turns a prompt of k points into tokens (model info
/// "encoding"): `interleaved` is P2's (Z [B, 2k, d], point i's prediction
/// read at x_i's token), `concat` tokens (x_i, y_i) with the last point as
/// the query (x_k, 0) (Z [B, k, d + 1], one prediction, at the query).
struct TokenLayout {
  bool concat = false;
  static TokenLayout of(const nlohmann::json &modelInfo);
  const char *name() const { return concat ? "concat" : "interleaved"; }
  int64_t tokens(int64_t points) const { return concat ? points : 2 * points; }
  int64_t width(int64_t dim) const { return concat ? dim + 1 : dim; }
  std::vector<double> build(const Prompts &p) const;
  /// Point i's prediction among a prompt's token outputs `row` (NaN where
  /// the encoding predicts none: concat predicts only the last point).
  template <typename T> double prediction(const T *row, int64_t i, int64_t points) const {
    if (!concat)
      return row[2 * i];
    return i + 1 == points ? double(row[points - 1]) : std::nan("");
  }
};

/// The model-info entry of the model named `name` (the first if empty).
const nlohmann::json *findModel(const Model &m, const std::string &name, std::string &error);

/// What the last fixed-point gradient did: values of g formed (the largest
/// over threads) and the last relative change of g.
struct FixedPointStats {
  double iterations = 0, residual = 0;
};

/// A compiled model's entry points, resolved once.
class ModelRunner {
public:
  bool init(const Model &m, const nlohmann::json &info, std::string &error);
  const nlohmann::json &info() const { return *info_; }
  int64_t numParams() const { return numParams_; }
  /// The library's element type is f32 (else f64).
  bool f32() const { return f32_; }
  /// Threads over the batch (default: all cores; tools read $UNROLL_THREADS).
  /// Results depend on the count only through summation order.
  /// GPU libraries take the whole batch in one call (threads stay 1).
  void setThreads(int n) { threads_ = gpu_ || n < 1 ? 1 : n; }
  int threads() const { return threads_; }
  /// Micro-batches (CPU): each thread's share of a batch is cut into the
  /// fewest near-equal chunks of at most `tokens` tokens (prompts x 2k; at
  /// least one prompt) that run one after another, their losses and
  /// gradients summed with the chunks' weights, so that a chunk's
  /// activations stay in the caches (the paper config's step on one thread
  /// of a Xeon: 5248 tokens at once ~3% slower than chunks of 1312). The
  /// same step, up to summation order. 0 runs a thread's whole share at
  /// once; GPU libraries take the whole batch in one call.
  static constexpr int64_t kDefaultMicroBatchTokens = 1536;
  void setMicroBatchTokens(int64_t tokens) { microTokens_ = gpu_ || tokens < 0 ? 0 : tokens; }
  int64_t microBatchTokens() const { return microTokens_; }
  /// The batch's chunks ([b0, b1) ranges of prompts), per thread: thread t
  /// runs plan(p)[t] in order.
  using Chunk = std::pair<int64_t, int64_t>;
  std::vector<std::vector<Chunk>> plan(const Prompts &p) const;
  /// plan(p) is one chunk: the batch goes to the library in one call.
  bool oneCall(const Prompts &p) const;
  /// How many of a batch's prompts have their activations live at once (each
  /// thread's largest chunk), for memory estimates: computed, not planned
  /// (a hostile --batch must not allocate its plan).
  int64_t livePrompts(int64_t batch, int64_t points) const;
  /// A CPU library's unroll_cpu_help: a thread whose chunks are done lends
  /// itself to the other threads' GEMMs until they are done too (the same
  /// results bit for bit). Null where the library has none, with
  /// UNROLL_HELP=0, or with more threads than cores (a helper spins).
  using HelpFn = void (*)(const int32_t *running);
  HelpFn helper() const;

  /// How the model's prompts become tokens.
  const TokenLayout &layout() const { return layout_; }
  /// preds [loops, B, k]: the prediction for y_i from the points before it,
  /// after each iteration t = 1 .. loops (interleaved: read at x_i; concat:
  /// at the query of the prompt cut after point i, one call per i).
  bool forward(const Prompts &p, const std::vector<double> &theta, int64_t loops,
               std::vector<double> &preds, std::string &error) const;
  /// losses [min(T, loops)] (MSE of each windowed iterate) and the gradient
  /// of their mean.
  bool lossGrad(const Prompts &p, const std::vector<double> &theta, int64_t loops, int64_t window,
                std::vector<double> &losses, std::vector<double> &grad, std::string &error) const;

  /// Chooses how lossGrad and trainStep differentiate the loop; false (with
  /// a message) when the library has no @M_loss_grad_fixed for a
  /// fixed-point mode (a loop without input injection).
  bool setGradient(const GradientMode &g, std::string &error);
  const GradientMode &gradient() const { return gradient_; }
  const FixedPointStats &fixedPointStats() const { return fixedStats_; }

  /// Halting (@M_solve): iterates until every prompt's relative change
  /// ‖Y_t − Y_{t−1}‖ / ‖Y_{t−1}‖ is <= tol, or `maxLoops`. preds [B, k]: the
  /// prediction at each x from the final iterate; loops [B]: iterations used.
  bool hasSolve() const { return solve_ != nullptr; }
  bool solve(const Prompts &p, const std::vector<double> &theta, int64_t maxLoops, double tol,
             std::vector<double> &preds, std::vector<double> &loops, std::string &error) const;

  /// Whether the model's loop descends an energy whose values the library
  /// reports (@M_energy_trace; model info "energy").
  bool hasEnergyTrace() const { return energyTrace_ != nullptr; }
  /// energies [(loops + 1) · B]: E(Y_t; P) of every prompt at the states
  /// t = 0 .. loops; starts [loops · B]: E at the point u_t each iteration's
  /// steps start from (Y_{t-1}, or Y_{t-1} + P with injection(add)).
  bool energyTrace(const Prompts &p, const std::vector<double> &theta, int64_t loops,
                   std::vector<double> &energies, std::vector<double> &starts,
                   std::string &error) const;

  /// Whether the library has the compiled optimizer step (@M_adam).
  bool hasAdam() const { return adam_ != nullptr; }
  /// lossGrad on resident state: reads st.theta, writes st.grad.
  bool lossGrad(const Prompts &p, ResidentState &st, int64_t loops, int64_t window,
                std::vector<double> &losses, std::string &error) const;
  /// forward with theta in resident state (used in place on a GPU: the
  /// weights are not copied to the device for every call).
  bool forward(const Prompts &p, ResidentState &st, int64_t loops, std::vector<double> &preds,
               std::string &error) const;
  /// One Adam step on resident state with the library's @M_adam; returns
  /// the squared norm of st.grad.
  double adamStep(ResidentState &st, const AdamStep &opt) const;
  /// One training step on resident state: lossGrad, then adamStep; the
  /// squared gradient norm in `normSq`. On a GPU with graphs the two are
  /// one CUDA graph per shape: the prompts and Adam's values for this step
  /// are written into resident buffers before its launch, the losses and
  /// the norm's partial sums read after.
  bool trainStep(const Prompts &p, ResidentState &st, int64_t loops, int64_t window,
                 const AdamStep &opt, std::vector<double> &losses, double &normSq,
                 std::string &error) const;

private:
  bool check(const Prompts &p, int64_t thetaSize, int64_t loops, std::string &error) const;
  bool checkStep(const Prompts &p, const ResidentState &st, int64_t loops, int64_t window,
                 std::string &error) const;
  template <typename T>
  bool lossGradGraph(const Prompts &p, ResidentState &st, int64_t loops, int64_t window,
                     std::vector<double> &losses) const;
  template <typename T>
  void trainStepGraph(const Prompts &p, ResidentState &st, int64_t loops, int64_t window,
                      const AdamStep &opt, std::vector<double> &losses, double &normSq) const;
  template <typename T>
  bool forwardGraph(const Prompts &p, ResidentState &st, int64_t loops,
                    std::vector<double> &preds) const;
  const nlohmann::json *info_ = nullptr;
  void *forward_ = nullptr, *lossGrad_ = nullptr, *adam_ = nullptr, *energyTrace_ = nullptr;
  void *solve_ = nullptr, *lossGradFixed_ = nullptr;
  /// The library's unroll_cpu_read_only (CPU libraries; null otherwise).
  void (*readOnly_)(const void *, size_t) = nullptr;
  /// The library's unroll_cpu_help (CPU libraries; null otherwise).
  HelpFn help_ = nullptr;
  GradientMode gradient_;
  mutable FixedPointStats fixedStats_;
  bool f32_ = false, gpu_ = false;
  TokenLayout layout_;
  int64_t numParams_ = 0, dim_ = 0, positions_ = -1;
  /// forward / solve of one batch, without concat's prefix loop.
  bool forwardOnce(const Prompts &p, const std::vector<double> &theta, int64_t loops,
                   std::vector<double> &preds) const;
  bool solveOnce(const Prompts &p, const std::vector<double> &theta, int64_t maxLoops, double tol,
                 std::vector<double> &preds, std::vector<double> &loops) const;
  /// A thread's share of a batch (the largest), and how many chunks a share
  /// of `share` prompts of `points` points is cut into.
  int64_t shareSize(int64_t batch) const;
  int64_t partsOf(int64_t share, int64_t points) const;
  int threads_ = 1;
  int64_t microTokens_ = 0;
};

} // namespace unroll

#endif
