//===- ModelRun.h - calling a compiled model --------------------*- C++ -*-===//
#ifndef UNROLL_RUNTIME_MODELRUN_H
#define UNROLL_RUNTIME_MODELRUN_H

#include "Model.h"

#include <string>
#include <vector>

namespace unroll {

/// A batch of in-context prompts: xs [B, k, d], ys [B, k].
struct Prompts {
  int64_t batch = 0, points = 0, dim = 0;
  std::vector<double> xs, ys;
};

/// P2's token layout: x_1, [y_1, 0, …], x_2, … as Z [B, 2k, d].
std::vector<double> promptTokens(const Prompts &p);

/// The model-info entry of the model named `name` (the first if empty).
const nlohmann::json *findModel(const Model &m, const std::string &name,
                                std::string &error);

/// A compiled model's entry points, resolved once.
class ModelRunner {
public:
  bool init(const Model &m, const nlohmann::json &info, std::string &error);
  const nlohmann::json &info() const { return *info_; }
  int64_t numParams() const { return numParams_; }
  /// Threads over the batch (default: $UNROLL_THREADS, else all cores).
  /// Results depend on the count only through summation order.
  /// GPU libraries take the whole batch in one call (threads stay 1).
  void setThreads(int n) { threads_ = gpu_ || n < 1 ? 1 : n; }
  int threads() const { return threads_; }

  /// preds [loops, B, k]: the prediction for y_i read at x_i after each
  /// iteration t = 1 .. loops.
  bool forward(const Prompts &p, const std::vector<double> &theta,
               int64_t loops, std::vector<double> &preds, std::string &error) const;
  /// losses [min(T, loops)] (MSE of each windowed iterate) and the gradient
  /// of their mean.
  bool lossGrad(const Prompts &p, const std::vector<double> &theta,
                int64_t loops, int64_t window, std::vector<double> &losses,
                std::vector<double> &grad, std::string &error) const;

private:
  bool check(const Prompts &p, const std::vector<double> &theta,
             int64_t loops, std::string &error) const;
  const nlohmann::json *info_ = nullptr;
  void *forward_ = nullptr, *lossGrad_ = nullptr;
  bool f32_ = false, gpu_ = false;
  int64_t numParams_ = 0, dim_ = 0, positions_ = -1;
  int threads_ = 1;
};

} // namespace unroll

#endif
