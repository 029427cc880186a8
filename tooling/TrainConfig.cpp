//===- TrainConfig.cpp - a training run's settings: JSON, defaults, checks -===//
#include "unroll/tooling/TrainConfig.h"

#include "unroll/runtime/ModelInfo.h"
#include <algorithm>
#include <cmath>
#include <string>

namespace key = ::unroll::info;

using namespace unroll;

static nlohmann::json curriculumJson(const Curriculum &c) {
  return {{"start", c.start}, {"end", c.end}, {"inc", c.inc}, {"interval", c.interval}};
}

nlohmann::json TrainConfig::toJson() const {
  return {{"task", task},
          {"encoding", encoding},
          {"steps", steps},
          {"batch", batch},
          {"lr", lr},
          {"lr_schedule", lrSchedule},
          {"warmup_steps", warmupSteps},
          {"lr_min", lrMin},
          {"adam_beta1", beta1},
          {"adam_beta2", beta2},
          {"adam_eps", eps},
          {"seed", seed},
          {"out", out},
          {"curriculum", curriculum},
          {"loops", loops},
          {"window", window},
          {"loop_inc", loopInc},
          {"loop_interval", loopInterval},
          {"curriculum_interval", curriculumInterval},
          {"dims", curriculumJson(dims)},
          {"points", curriculumJson(points)},
          {"noise", noise},
          {"log_every", logEvery},
          {"save_every", saveEvery},
          {"eval_prompts", evalPrompts},
          {"eval_loops", evalLoops},
          {"eval_batch", evalBatch},
          {"optimizer", optimizer},
          {"gpu_graphs", gpuGraphs},
          {"cpu_precision", cpuPrecision},
          {"micro_batch_tokens", microBatchTokens},
          {"baseline_prompts", baselinePrompts},
          {"gradient", gradient},
          {"train_data", trainData},
          {"loops_random", loopsRandomLo > 0 ? nlohmann::json::array({loopsRandomLo, loopsRandomHi})
                                             : nlohmann::json(nullptr)},
          {"halting", halting},
          {"halt_tol", haltTol},
          {"max_loops", maxLoops},
          {"allreduce", allreduce},
          {"rank_timeout", rankTimeout}};
}

double TrainConfig::lrAt(int64_t step) const {
  if (step < warmupSteps)
    return lr * double(step + 1) / double(warmupSteps);
  if (lrSchedule == "constant" || steps <= warmupSteps)
    return lr;
  double t = std::min(1.0, double(step - warmupSteps) /
                               double(std::max<int64_t>(1, steps - warmupSteps - 1)));
  if (lrSchedule == "cosine")
    return lrMin + (lr - lrMin) * 0.5 * (1 + std::cos(3.141592653589793 * t));
  return lr + (lrMin - lr) * t; // linear
}

bool TrainConfig::apply(const nlohmann::json &j, std::string &error) {
  if (!j.is_object()) {
    error = "a config must be a JSON object";
    return false;
  }
  for (auto &[k, v] : j.items()) {
    auto num = [&](int64_t &dst, int64_t lo) {
      if (!v.is_number_integer() || v.get<int64_t>() < lo) {
        error = "config key '" + k + "' expects an integer >= " + std::to_string(lo) + ", got " +
                v.dump();
        return false;
      }
      dst = v;
      return true;
    };
    auto real = [&](double &dst, bool positive) {
      if (!v.is_number() || !std::isfinite(v.get<double>()) ||
          (positive ? v.get<double>() <= 0 : v.get<double>() < 0)) {
        error = "config key '" + k + "' expects a " + (positive ? "positive" : "non-negative") +
                " number, got " + v.dump();
        return false;
      }
      dst = v;
      return true;
    };
    auto curr = [&](Curriculum &c) {
      if (!v.is_object()) {
        error = "config key '" + k + "' expects {start, end, inc, interval}";
        return false;
      }
      for (auto &[ck, cv] : v.items()) {
        int64_t *dst = ck == "start"      ? &c.start
                       : ck == "end"      ? &c.end
                       : ck == "inc"      ? &c.inc
                       : ck == "interval" ? &c.interval
                                          : nullptr;
        if (!dst || !cv.is_number_integer() || cv.get<int64_t>() < 0) {
          error = "config key '" + k + "." + ck + "' is unknown or not an integer >= 0";
          return false;
        }
        *dst = cv;
      }
      return true;
    };
    int64_t tmp;
    bool ok = true;
    if (k == "task")
      ok = v.is_string() && (task = v.get<std::string>(), true);
    else if (k == "steps")
      ok = num(steps, 0);
    else if (k == "batch")
      ok = num(batch, 1);
    else if (k == "lr")
      ok = real(lr, true);
    else if (k == "lr_schedule") {
      ok = v.is_string() && (v == "constant" || v == "cosine" || v == "linear");
      if (ok)
        lrSchedule = v.get<std::string>();
      else
        error = "config key 'lr_schedule' expects \"constant\", \"cosine\" or \"linear\", got " +
                v.dump();
    } else if (k == "warmup_steps")
      ok = num(warmupSteps, 0);
    else if (k == "lr_min")
      ok = real(lrMin, false);
    else if (k == "adam_beta1" || k == "adam_beta2") {
      double &dst = k == "adam_beta1" ? beta1 : beta2;
      ok = real(dst, false) && dst < 1;
      if (!ok && error.empty())
        error = "config key '" + k + "' expects a number in [0, 1), got " + v.dump();
    } else if (k == "adam_eps")
      ok = real(eps, true);
    else if (k == "seed")
      ok = num(tmp, 0) && (seed = tmp, true);
    else if (k == "out")
      ok = v.is_string() && (out = v.get<std::string>(), true);
    else if (k == "train_data")
      ok = v.is_string() && (trainData = v.get<std::string>(), true);
    else if (k == "curriculum")
      ok = v.is_boolean() && (curriculum = v.get<bool>(), true);
    else if (k == "loops")
      ok = num(loops, 0);
    else if (k == "window")
      ok = num(window, 0);
    else if (k == "loop_inc")
      ok = num(loopInc, 0);
    else if (k == "loop_interval")
      ok = num(loopInterval, 1);
    else if (k == "curriculum_interval") {
      ok = num(curriculumInterval, 0);
      if (ok && curriculumInterval > 0)
        for (Curriculum *c : {&dims, &points})
          c->interval = curriculumInterval;
    } else if (k == "dims")
      ok = curr(dims);
    else if (k == "points")
      ok = curr(points);
    else if (k == "noise")
      ok = real(noise, false);
    else if (k == "log_every")
      ok = num(logEvery, 1);
    else if (k == "save_every")
      ok = num(saveEvery, 1);
    else if (k == "eval_prompts")
      ok = num(evalPrompts, 0);
    else if (k == "eval_loops")
      ok = num(evalLoops, 0);
    else if (k == "eval_batch")
      ok = num(evalBatch, 1);
    else if (k == "baseline_prompts")
      ok = num(baselinePrompts, 0);
    else if (k == "optimizer") {
      ok = v.is_string() && (v == "auto" || v == "host" || v == "compiled");
      if (ok)
        optimizer = v.get<std::string>();
      else
        error =
            "config key 'optimizer' expects \"auto\", \"host\" or \"compiled\", got " + v.dump();
    } else if (k == "gpu_graphs") {
      ok = v.is_boolean();
      if (ok)
        gpuGraphs = v.get<bool>();
      else
        error = "config key 'gpu_graphs' expects true or false, got " + v.dump();
    } else if (k == "cpu_precision") {
      ok = v.is_string() && (v == "f32" || v == "bf16");
      if (ok)
        cpuPrecision = v.get<std::string>();
      else
        error = "config key 'cpu_precision' expects \"f32\" or \"bf16\", got " + v.dump();
    } else if (k == "micro_batch_tokens") {
      ok = v.is_number_integer() && v.get<int64_t>() >= -1;
      if (ok)
        microBatchTokens = v.get<int64_t>();
      else
        error = "config key 'micro_batch_tokens' expects an integer >= 0 (or -1: the default), "
                "got " +
                v.dump();
    } else if (k == "gradient") {
      GradientMode g;
      ok = v.is_string() &&
           (v.get<std::string>().empty() || parseGradientMode(v.get<std::string>(), g, error));
      if (ok)
        gradient = v.get<std::string>();
    } else if (k == "loops_random") {
      if (v.is_null()) {
        loopsRandomLo = loopsRandomHi = 0;
      } else {
        ok = v.is_array() && v.size() == 2 && v[0].is_number_integer() &&
             v[1].is_number_integer() && v[0].get<int64_t>() >= 1 && v[0] <= v[1];
        if (ok) {
          loopsRandomLo = v[0];
          loopsRandomHi = v[1];
        } else {
          error = "config key 'loops_random' expects [lo, hi] with 1 <= lo <= hi, got " + v.dump();
        }
      }
    } else if (k == "halting") {
      ok = v.is_boolean() && (halting = v.get<bool>(), haltingGiven = true);
    } else if (k == "halt_tol") {
      ok = real(haltTol, true);
    } else if (k == "max_loops") {
      ok = num(maxLoops, 1);
    } else if (k == "encoding") {
      ok = v.is_string() && (v == "" || v == "interleaved" || v == "concat");
      if (ok)
        encoding = v.get<std::string>();
      else
        error = "config key 'encoding' expects \"interleaved\" or \"concat\", got " + v.dump();
    } else if (k == "allreduce") {
      ok = v.is_string() && (v == "auto" || v == "mpi" || v == "nccl");
      if (ok)
        allreduce = v.get<std::string>();
      else
        error = "config key 'allreduce' expects \"auto\", \"mpi\" or \"nccl\", got " + v.dump();
    } else if (k == "rank_timeout") {
      ok = real(rankTimeout, true);
    } else {
      error = "unknown config key '" + k + "'";
      return false;
    }
    if (!ok) {
      if (error.empty())
        error = "config key '" + k + "' has a value of the wrong type: " + v.dump();
      return false;
    }
  }
  return true;
}

bool TrainConfig::finish(const nlohmann::json &mi, std::string &error) {
  std::string known;
  spec = findTask(task, known);
  if (!spec) {
    error = "unknown task '" + task + "' (tasks: energy for energies; " + known + " for models)";
    return false;
  }
  if (noise == 0)
    noise = spec->noise;
  // The encoding is the library's (its read-in takes the tokens it makes):
  // a different one asked for is an error, not a silent choice.
  std::string built = TokenLayout::of(mi).name();
  if (!encoding.empty() && encoding != built) {
    error = "--encoding " + encoding + ": the library was built for the " + built +
            " encoding (model info \"encoding\"; its prompts are " +
            (built == "concat" ? "(x_i, y_i) tokens with the query (x, 0) last"
                               : "P2's interleaved x_i, y_i tokens") +
            "); write the model with `encoding(" + encoding + ")` and rebuild it";
    return false;
  }
  encoding = built;
  int64_t d = mi.value(key::kPromptDim, (int64_t)0);
  int64_t b = mi.value(key::kIterations, (int64_t)1), T = mi.value(key::kWindow, (int64_t)1);
  if (loops == 0)
    loops = b;
  if (window == 0)
    window = T;
  if (window > loops) {
    error = "the loss window T = " + std::to_string(window) +
            " exceeds the loop count b = " + std::to_string(loops);
    return false;
  }
  int64_t maxPoints = mi.contains(key::kPositions)
                          ? mi[key::kPositions].get<int64_t>() / (encoding == "concat" ? 1 : 2)
                          : 1 << 20;
  int64_t interval = curriculumInterval > 0 ? curriculumInterval : 5000;
  // The fields a config left out (-1), each from the ones it gave: a
  // curriculum that sets only where to start runs to the model's end.
  auto fill = [](int64_t &field, int64_t value) {
    if (field < 0)
      field = value;
  };
  fill(dims.end, d);
  fill(dims.start, std::min<int64_t>(5, dims.end));
  fill(dims.inc, 1);
  fill(dims.interval, interval);
  // P2's curricula at d = 20 (11 -> 41 by 2 for the linear tasks, 26 -> 101
  // by 5 for trees and ReLU nets) end at 2d + 1 and 5d + 1 points.
  fill(points.end, std::min<int64_t>((spec->pointsEnd >= 101 ? 5 : 2) * dims.end + 1, maxPoints));
  fill(points.start, std::min<int64_t>(spec->pointsStart, points.end));
  fill(points.inc, spec->pointsInc);
  fill(points.interval, interval);
  if (lrMin > lr) {
    char b[128];
    snprintf(b, sizeof b, "lr_min %g exceeds the peak learning rate lr %g", lrMin, lr);
    error = b;
    return false;
  }
  if (dims.end > d || dims.start < 1 || dims.start > dims.end) {
    error = "the dims curriculum must satisfy 1 <= start <= end <= d = " + std::to_string(d);
    return false;
  }
  if (points.end > maxPoints || points.start < 1 || points.start > points.end) {
    error = "the points curriculum must satisfy 1 <= start <= end <= " + std::to_string(maxPoints) +
            " (the model's positions" + (encoding == "concat" ? "" : std::string(" / 2")) + ")";
    return false;
  }
  if (evalLoops == 0)
    evalLoops = loops;
  // Halting: the loop's until(tol, max) gives the defaults and turns it on.
  const nlohmann::json *until =
      mi.contains(key::kFixedPoint) && mi[key::kFixedPoint].contains("until")
          ? &mi[key::kFixedPoint][key::kUntil]
          : nullptr;
  if (until && !haltingGiven)
    halting = true;
  if (haltTol == 0)
    haltTol = until ? (*until)[key::kTol].get<double>() : 1e-4;
  if (maxLoops == 0)
    maxLoops = until ? (*until)[key::kMax].get<int64_t>() : 500;
  return true;
}
