//===- Train.cpp - training, evaluation and prediction --------------------===//
#include "unroll/tooling/Train.h"
#include "unroll/tooling/Adam.h"
#include "unroll/tooling/Baselines.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Distributed.h"
#include "unroll/tooling/Plot.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Safetensors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <unistd.h>

using namespace unroll;
using Clock = std::chrono::steady_clock;

//===----------------------------------------------------------------------===//
// Config
//===----------------------------------------------------------------------===//

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
  int64_t d = mi.value("prompt_dim", (int64_t)0);
  int64_t b = mi.value("iterations", (int64_t)1), T = mi.value("window", (int64_t)1);
  if (loops == 0)
    loops = b;
  if (window == 0)
    window = T;
  if (window > loops) {
    error = "the loss window T = " + std::to_string(window) +
            " exceeds the loop count b = " + std::to_string(loops);
    return false;
  }
  int64_t maxPoints = mi.contains("positions")
                          ? mi["positions"].get<int64_t>() / (encoding == "concat" ? 1 : 2)
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
  const nlohmann::json *until = mi.contains("fixed_point") && mi["fixed_point"].contains("until")
                                    ? &mi["fixed_point"]["until"]
                                    : nullptr;
  if (until && !haltingGiven)
    halting = true;
  if (haltTol == 0)
    haltTol = until ? (*until)["tol"].get<double>() : 1e-4;
  if (maxLoops == 0)
    maxLoops = until ? (*until)["max"].get<int64_t>() : 500;
  return true;
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

static volatile std::sig_atomic_t gStop = 0;
static void onSignal(int sig) { gStop = sig; }

static std::string hms(double s) {
  char b[32];
  long t = (long)s;
  if (t >= 3600)
    snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else
    snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  return b;
}

bool unroll::applyCpuPrecision(const Model &m, const std::string &precision, std::string &error) {
  auto set = reinterpret_cast<int32_t (*)(int32_t)>(m.symbol("unroll_cpu_set_precision"));
  if (precision != "bf16") {
    if (set)
      set(0);
    return true;
  }
  const std::string what = "--cpu-precision bf16 (config cpu_precision): ";
  if (m.gpu())
    error = what + m.path() + " is a GPU library; bf16 operands are a CPU option";
  else if (m.info().value("element_type", "f32") != "f32")
    error = what + m.path() + " computes in " + m.info().value("element_type", "") +
            "; bf16 operands are for f32 libraries";
  else if (!set)
    error = what + m.path() +
            " has no unroll_cpu_set_precision (built before bf16 support): rebuild it with this "
            "unroll-translate";
  else if (!set(1))
    error = what + "this CPU lacks AVX512_BF16 (the vdpbf16ps instruction; /proc/cpuinfo "
                   "flag avx512_bf16), or UNROLL_GEMM_ISA forces a narrower instruction set; "
                   "use --cpu-precision f32";
  else {
    // Having the instruction does not make it faster: on a Xeon whose
    // vdpbf16ps issues on one port (FMAs on two) bf16 ran at 0.6x f32
    // (with its AMX tiles, the default there, at 4.6x). The
    // library times both (~10 ms) and the user hears of it; bf16 stays on,
    // as asked.
    using Rates = int32_t (*)(double *, double *);
    double f32 = 0, bf16 = 0;
    if (auto rates = reinterpret_cast<Rates>(m.symbol("unroll_cpu_bf16_rates"));
        rates && rates(&f32, &bf16) && bf16 < f32)
      fprintf(stderr,
              "unroll-run: note: bf16 GEMM operands are slower than f32 on this CPU (a 512 x "
              "512 x 256 product: bf16 %.0f GFLOP/s, f32 %.0f); --cpu-precision f32 trains "
              "faster here\n",
              bf16, f32);
    return true;
  }
  return false;
}

namespace {
/// A fault injected by the tests of data-parallel runs: $UNROLL_FAULT =
/// "KIND:RANK:STEP" makes rank RANK, in step STEP (counted from 1, as the
/// progress line does), put a NaN in its gradient (nan), stop answering
/// (hang) or die (die: SIGKILL).
struct Fault {
  std::string kind;
  int rank = -1;
  int64_t step = -1;
  static Fault fromEnvironment() {
    Fault f;
    const char *e = getenv("UNROLL_FAULT");
    char kind[16];
    long long step;
    int rank;
    if (e && sscanf(e, "%15[a-z]:%d:%lld", kind, &rank, &step) == 3) {
      f.kind = kind;
      f.rank = rank;
      f.step = step;
    }
    return f;
  }
  bool at(const char *k, int r, int64_t s) const { return kind == k && rank == r && step == s; }
};

double ms(double seconds) { return 1e3 * seconds; }

/// The root's step, weights and Adam state on every rank.
void shareState(Communicator &w, TrainState &st) {
  std::vector<double> head{double(st.step), double(st.adam.step), double(st.adam.m.size())};
  w.broadcast(head, "the start state");
  st.step = int64_t(head[0]);
  st.adam.step = int64_t(head[1]);
  w.broadcast(st.theta, "the start weights");
  if (head[2] > 0) {
    w.broadcast(st.adam.m, "Adam's first moments");
    w.broadcast(st.adam.v, "Adam's second moments");
  }
}
} // namespace

int unroll::train(const Model &m, const ModelRunner &run, TrainConfig cfg, bool resume) {
  Communicator &w = world();
  const bool root = w.root(), dist = w.distributed();
  w.setTimeout(cfg.rankTimeout);
  std::string err;
  // This rank alone failed (Communicator::finish then ends the job).
  auto die = [&](const std::string &msg) {
    fprintf(stderr, "unroll-run: error: %s%s\n", w.who().c_str(), msg.c_str());
    return 2;
  };
  // Every rank learned from a collective that the job stops with `rc`.
  auto stopAll = [&](int rc) {
    w.agreeToStop();
    return rc;
  };
  // After a part that can fail on some ranks (each says why itself): true
  // when it succeeded on every rank.
  auto together = [&](bool ok, const std::string &what) {
    int bad = w.firstFailure(ok, what);
    if (bad > 0 && root)
      fprintf(stderr,
              "unroll-run: error: rank %d failed in %s (its message is above); stopping every "
              "rank\n",
              bad, what.c_str());
    return bad < 0;
  };
  if (cfg.batch % w.size() != 0) {
    if (root)
      fprintf(stderr,
              "unroll-run: error: --batch %lld is the global batch and does not split over %d "
              "ranks: give a multiple of %d\n",
              (long long)cfg.batch, w.size(), w.size());
    return stopAll(2);
  }
  const int64_t local = cfg.batch / w.size(), first = w.rank() * local;

  const nlohmann::json &mi = run.info();
  std::string ckptDir = cfg.out + "/checkpoint";
  TrainState st;
  Rng rng(cfg.seed); // initialization (data comes from promptSeed)
  bool ok = true;
  if (resume) {
    // Rank 0 reads the checkpoint and sends it: a resumed run may have
    // another number of ranks than the one that saved it.
    if (root) {
      nlohmann::json saved;
      if (!loadCheckpoint(ckptDir, mi, st, saved, err))
        err += " (cannot --resume)", ok = false;
      else if (!rng.restore(st.rng))
        err = ckptDir + ": corrupt RNG state", ok = false;
      if (!ok)
        die(err);
      else
        fprintf(stderr, "resuming from step %lld (%s)\n", (long long)st.step, ckptDir.c_str());
    }
  } else {
    initParameters(mi["params"], run.numParams(), st.theta, [&] { return rng.normal(); }, 0.02);
  }
  if (!together(ok, "loading the checkpoint"))
    return stopAll(2);
  if (dist)
    shareState(w, st);
  st.adam.lr = cfg.lr;
  st.adam.beta1 = cfg.beta1;
  st.adam.beta2 = cfg.beta2;
  st.adam.eps = cfg.eps;
  // The compiled optimizer keeps theta, the gradient and Adam's moments in
  // the library's resident buffers for the whole run; st holds a host copy
  // only at checkpoints and at the end.
  bool compiled = cfg.optimizer == "compiled" || (cfg.optimizer == "auto" && m.gpu());
  if (compiled && !run.hasAdam()) {
    if (root)
      die(m.path() + ": the library has no compiled optimizer step (@" +
          mi.value("name", std::string("M")) +
          "_adam); rebuild it with this unroll-opt, or train with --optimizer host");
    return stopAll(2);
  }
  ResidentState dev;
  if (compiled) {
    ok = dev.init(m, run.numParams(), m.info().value("element_type", "") == "f32", err);
    if (!ok)
      die(err);
    if (!together(ok, "allocating the training state"))
      return stopAll(2);
    dev.setGraphs(cfg.gpuGraphs);
    dev.upload(st.theta, st.adam.m, st.adam.v);
  }
  auto toHost = [&] {
    if (compiled)
      dev.download(st.theta, st.adam.m, st.adam.v);
  };
  // How the ranks' gradients meet: NCCL on the device buffers (GPU
  // libraries with the compiled optimizer), else MPI on a host copy.
  bool onDevice = false;
  void *reduced = nullptr; // NCCL's output: the local gradient stays in dev.grad
  if (dist && compiled && m.gpu() && cfg.allreduce != "mpi") {
    std::string why;
    if (w.initNccl(m, why)) {
      reduced = dev.allocate(size_t(dev.size) * (dev.f32 ? 4 : 8));
      if (!reduced)
        die("cannot allocate the all-reduce's buffer");
      if (!together(reduced != nullptr, "allocating the all-reduce's buffer"))
        return stopAll(2);
      onDevice = true;
    } else if (cfg.allreduce == "nccl") {
      if (root)
        die("--allreduce nccl: " + why);
      return stopAll(2);
    } else if (root) {
      fprintf(stderr, "NCCL cannot be used (%s): gradients meet over MPI through host memory\n",
              why.c_str());
    }
  } else if (cfg.allreduce == "nccl" && dist) {
    if (root)
      die("--allreduce nccl needs a GPU library trained with the compiled optimizer");
    return stopAll(2);
  }

  std::ofstream metrics;
  if (root) {
    ok = makeDirs(cfg.out, err) &&
         writeFileAtomic(cfg.out + "/config.json", cfg.toJson().dump(2) + "\n", err);
    if (ok) {
      metrics.open(cfg.out + "/metrics.jsonl", resume ? std::ios::app : std::ios::trunc);
      if (!metrics)
        err = cfg.out + "/metrics.jsonl: cannot write", ok = false;
    }
    if (!ok)
      die(err);
  }
  if (!together(ok, "writing " + cfg.out))
    return stopAll(2);

  auto save = [&]() {
    toHost();
    st.rng = rng.save();
    if (!saveCheckpoint(ckptDir, mi, st, cfg.toJson(), err)) {
      fprintf(stderr,
              "unroll-run: error: checkpoint at step %lld failed: %s (the previous "
              "checkpoint is kept)\n",
              (long long)st.step, err.c_str());
      return false;
    }
    return true;
  };
  // Rank 0 saves; every rank learns whether it could.
  auto saveTogether = [&]() { return together(root ? save() : true, "the checkpoint"); };
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);

  const GradientMode &gm = run.gradient();
  const bool concat = run.layout().concat;
  int64_t kept =
      activationBytesPerPrompt(mi, gm, cfg.window, cfg.loops, run.layout().tokens(cfg.points.end));
  double reduceBytes = double(run.numParams()) * (onDevice && dev.f32 ? 4 : 8);
  if (root) {
    std::string scheduleText;
    if (cfg.warmupSteps > 0)
      scheduleText += " (" + std::to_string(cfg.warmupSteps) + " warm-up steps";
    if (cfg.lrSchedule != "constant") {
      char b[64];
      snprintf(b, sizeof b, "%s%s decay to %g", scheduleText.empty() ? " (" : ", ",
               cfg.lrSchedule.c_str(), cfg.lrMin);
      scheduleText += b;
    }
    if (!scheduleText.empty())
      scheduleText += ")";
    std::string precisionText;
    if (cfg.cpuPrecision == "bf16") {
      // Which kernel multiplies them (libraries built before AMX support
      // do not say).
      auto kernel = reinterpret_cast<const char *(*)()>(m.symbol("unroll_cpu_bf16_kernel"));
      std::string k = kernel ? kernel() : "";
      precisionText = "; GEMM operands bf16 (f32 accumulation and weights" +
                      std::string(k == "amx"          ? "; AMX tiles"
                                  : k == "avx512bf16" ? "; vdpbf16ps"
                                                      : "") +
                      ")";
    }
    std::string loopsText = cfg.loopsRandomLo > 0
                                ? std::to_string(cfg.loopsRandomLo) + ".." +
                                      std::to_string(cfg.loopsRandomHi) + " (random)"
                                : std::to_string(cfg.loops);
    fprintf(stderr,
            "training %s on %s: %lld steps, batch %lld, lr %g%s, b %s, T %lld, %s curriculum; "
            "%lld parameters; Adam %s%s\n",
            mi["name"].get<std::string>().c_str(), cfg.task.c_str(), (long long)cfg.steps,
            (long long)cfg.batch, cfg.lr, scheduleText.c_str(), loopsText.c_str(),
            (long long)cfg.window, cfg.curriculum ? "with" : "no", (long long)run.numParams(),
            compiled ? (m.gpu() ? "compiled, state resident on the GPU" : "compiled")
                     : "on the host",
            precisionText.c_str());
    std::string micro;
    if (!m.gpu() && run.microBatchTokens() > 0)
      micro = "; threads run micro-batches of <= " + std::to_string(run.microBatchTokens()) +
              " tokens (--micro-batch-tokens)";
    fprintf(stderr, "gradient: %s; activations kept per prompt at b %lld, %lld points: %s%s\n",
            gm.str().c_str(), (long long)cfg.loops, (long long)cfg.points.end,
            kept < 0 ? "unknown" : (std::to_string((kept + 1023) / 1024) + " KiB").c_str(),
            micro.c_str());
    if (dist)
      fprintf(stderr,
              "data parallel: %d ranks (%s), %lld prompts each of the global batch %lld, %d "
              "thread%s per rank; gradients all-reduced %s, %.2f MB per step\n",
              w.size(), w.library().c_str(), (long long)local, (long long)cfg.batch, run.threads(),
              run.threads() == 1 ? "" : "s",
              onDevice ? ("with " + w.ncclVersion() + " on device buffers").c_str()
                       : "over MPI through host memory",
              reduceBytes / 1e6);
  }
  int64_t d = mi["prompt_dim"];
  {
    // A step's share of the batch: its prompts (host, and converted for the
    // library), the activations the gradient keeps (for the prompts whose
    // micro-batches run at once), and the parameter-sized vectors (theta,
    // gradient, Adam's moments).
    double n = double(run.layout().tokens(cfg.points.end)), b = (double)local;
    double live = (double)run.livePrompts(local, cfg.points.end);
    double needed =
        b * n * d * 8 * 3 + live * std::max<double>(kept, 0) + 8.0 * 6 * run.numParams();
    ok = checkMemory(needed, "a training step at batch " + std::to_string(local), // per rank
                     "--batch (or --loops, --window)", err);
    if (!ok)
      die(err);
    if (!together(ok, "the memory check"))
      return stopAll(2);
  }
  const Fault fault = Fault::fromEnvironment();
  auto t0 = Clock::now();
  int64_t startStep = st.step;
  double lossAvg = 0;
  int64_t lossN = 0;
  std::vector<double> losses, grad;
  // Per-step times after the first (its warm-up is not a step's cost).
  double warmSeconds = 0, warmGradient = 0, warmControl = 0;
  while (st.step < cfg.steps) {
    int64_t s = st.step;
    int64_t dims = cfg.curriculum ? cfg.dims.at(s) : cfg.dims.end;
    int64_t pts = cfg.curriculum ? cfg.points.at(s) : cfg.points.end;
    Rng stepRng(promptSeed(cfg.seed, s, -1)); // the same b on every rank
    int64_t b = cfg.loopsRandomLo > 0
                    ? cfg.loopsRandomLo + stepRng.below(cfg.loopsRandomHi - cfg.loopsRandomLo + 1)
                : cfg.curriculum
                    ? std::min(cfg.loops, cfg.window + cfg.loopInc * (s / cfg.loopInterval))
                    : cfg.loops;
    // Concat predicts one point per prompt, the last: each step draws how
    // many points precede it (0 .. pts - 1), so that training covers every
    // k as the interleaved loss does within one prompt.
    if (concat)
      pts = 1 + int64_t(stepRng.below(pts));
    Prompts p = cfg.spec->sampleAt(cfg.seed, s, first, local, pts, d, dims, cfg.noise);
    st.adam.lr = cfg.lrAt(s);
    double loss = 0;
    bool stopRequested = false;
    if (!dist) {
      // Compiled: loss, gradient and Adam in one call (one CUDA graph on a
      // GPU); the update is in dev, but a non-finite run stops without
      // saving it: the last checkpoint stays what it was.
      double normSq = 0;
      if (compiled)
        ++st.adam.step;
      if (!(compiled
                ? run.trainStep(p, dev, b, cfg.window, st.adam.compiledStep(), losses, normSq, err)
                : run.lossGrad(p, st.theta, b, cfg.window, losses, grad, err)))
        return die(err);
      for (double l : losses)
        loss += l;
      loss /= losses.size();
      bool finite = std::isfinite(loss);
      if (compiled) {
        finite = finite && std::isfinite(normSq);
      } else {
        for (double g : grad)
          finite = finite && std::isfinite(g);
      }
      if (!finite) {
        fprintf(stderr,
                "unroll-run: error: non-finite %s at step %lld; stopping (the last "
                "checkpoint in %s is kept)\n",
                std::isfinite(loss) ? "gradient" : "loss", (long long)s + 1, ckptDir.c_str());
        return 3;
      }
      if (!compiled)
        st.adam.update(st.theta, grad);
      stopRequested = gStop != 0;
    } else {
      // This rank's share: its loss and gradient.
      std::string stepErr;
      bool stepOk = compiled ? run.lossGrad(p, dev, b, cfg.window, losses, stepErr)
                             : run.lossGrad(p, st.theta, b, cfg.window, losses, grad, stepErr);
      if (!stepOk) {
        die("step " + std::to_string(s + 1) + ": " + stepErr);
        losses.assign(1, 0.0);
      }
      if (fault.at("hang", w.rank(), s + 1))
        for (;;)
          pause();
      if (fault.at("die", w.rank(), s + 1))
        raise(SIGKILL);
      if (stepOk && compiled && !onDevice)
        dev.readVector(grad, dev.grad);
      if (stepOk && fault.at("nan", w.rank(), s + 1)) {
        if (onDevice) {
          dev.readVector(grad, dev.grad);
          grad[0] = NAN;
          dev.writeVector(dev.grad, grad);
        } else {
          grad[0] = NAN;
        }
      }
      // Every rank's status and loss: all stop together, or none.
      double mine = 0;
      for (double l : losses)
        mine += l;
      mine /= losses.size();
      int code = stepOk ? 0 : 1;
      if (stepOk && !std::isfinite(mine))
        code |= 2;
      if (stepOk && !onDevice)
        for (double g : grad)
          if (!std::isfinite(g)) {
            code |= 4;
            break;
          }
      if (gStop)
        code |= 8;
      std::string sn = std::to_string(s + 1);
      std::vector<double> all = w.allgather({double(code), mine}, "status exchange of step " + sn);
      int flags = 0, failed = -1;
      for (int r = 0; r < w.size(); ++r) {
        int c = int(all[2 * r]);
        flags |= c;
        loss += all[2 * r + 1] / w.size();
        if ((c & 7) && failed < 0)
          failed = r;
      }
      auto promptsOf = [&](int r) {
        return "prompts " + std::to_string(r * local) + ".." + std::to_string((r + 1) * local - 1) +
               " of the step's batch";
      };
      if (flags & 1) {
        if (root && failed != 0)
          fprintf(stderr,
                  "unroll-run: error: rank %d failed at step %lld (its message is above); "
                  "stopping every rank (the last checkpoint in %s is kept)\n",
                  failed, (long long)s + 1, ckptDir.c_str());
        return stopAll(2);
      }
      if (flags & 6) {
        int c = int(all[2 * failed]);
        if (root)
          fprintf(stderr,
                  "unroll-run: error: non-finite %s at step %lld on rank %d (%s); stopping every "
                  "rank (the last checkpoint in %s is kept)\n",
                  c & 2 ? "loss" : "gradient", (long long)s + 1, failed, promptsOf(failed).c_str(),
                  ckptDir.c_str());
        return stopAll(3);
      }
      stopRequested = flags & 8;
      // The gradient of the global batch's mean loss: the mean of the
      // ranks' (equal shares).
      w.countAsGradient(true);
      if (onDevice) {
        w.allreduceMeanDevice(dev.grad, reduced, dev.size, dev.f32,
                              "gradient all-reduce of step " + sn);
      } else {
        w.allreduceSum(grad, "gradient all-reduce of step " + sn);
        for (double &g : grad)
          g /= w.size();
      }
      w.countAsGradient(false);
      if (!compiled) {
        st.adam.update(st.theta, grad);
      } else {
        if (!onDevice)
          dev.writeVector(dev.grad, grad);
        else
          std::swap(dev.grad, reduced); // Adam reads the all-reduced gradient
        ++st.adam.step;
        double normSq = run.adamStep(dev, st.adam.compiledStep());
        if (onDevice)
          std::swap(dev.grad, reduced);
        if (!std::isfinite(normSq)) {
          // Whose gradient: each rank's own is still in dev.grad.
          bool mineFinite = true;
          if (onDevice) {
            dev.readVector(grad, dev.grad);
            for (double g : grad)
              mineFinite = mineFinite && std::isfinite(g);
          }
          int bad = w.firstFailure(mineFinite, "the non-finite gradient's rank");
          if (root)
            fprintf(stderr,
                    "unroll-run: error: non-finite gradient at step %lld%s; stopping every rank "
                    "(the last checkpoint in %s is kept)\n",
                    (long long)s + 1,
                    bad >= 0
                        ? (" on rank " + std::to_string(bad) + " (" + promptsOf(bad) + ")").c_str()
                        : " after the all-reduce",
                    ckptDir.c_str());
          return stopAll(3);
        }
      }
    }
    st.step = s + 1; // completed steps: what every checkpoint below records
    lossAvg += loss;
    ++lossN;
    double el = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s == startStep) {
      warmSeconds = el;
      warmGradient = w.gradientTraffic().seconds;
      warmControl = w.controlTraffic().seconds;
    }
    bool last = s + 1 == cfg.steps;
    if (root) {
      nlohmann::json row{{"step", s + 1}, {"loss", loss},     {"loops", b},     {"dims", dims},
                         {"points", pts}, {"lr", st.adam.lr}, {"elapsed_s", el}};
      if (gm.fixedPoint())
        row["gradient_iterations"] = run.fixedPointStats().iterations;
      if (dist)
        row["allreduce_s"] = w.gradientTraffic().seconds;
      metrics << row.dump() << "\n";
      if ((s + 1) % cfg.logEvery == 0 || last || s == startStep) {
        double rate = (s + 1 - startStep) / std::max(el, 1e-9);
        std::string extra =
            gm.fixedPoint()
                ? " | g iters " + std::to_string(int64_t(run.fixedPointStats().iterations))
                : "";
        if (cfg.lrSchedule != "constant" || cfg.warmupSteps > 0) {
          char b[32];
          snprintf(b, sizeof b, " | lr %.2e", st.adam.lr);
          extra += b;
        }
        fprintf(stderr,
                "step %6lld/%lld | loss %.4f | b %lld d %lld k %lld%s | %.2f steps/s | ETA %s\n",
                (long long)(s + 1), (long long)cfg.steps, lossAvg / lossN, (long long)b,
                (long long)dims, (long long)pts, extra.c_str(), rate,
                hms((cfg.steps - s - 1) / rate).c_str());
        lossAvg = 0;
        lossN = 0;
        metrics.flush();
      }
    }
    if ((s + 1) % cfg.saveEvery == 0 && !last && !saveTogether())
      return stopAll(2);
    if (stopRequested) {
      if (root) {
        if (gStop)
          fprintf(stderr, "caught %s at step %lld: writing a checkpoint and stopping\n",
                  gStop == SIGINT ? "SIGINT" : "SIGTERM", (long long)st.step);
        else
          fprintf(stderr,
                  "another rank caught a signal at step %lld: writing a checkpoint and "
                  "stopping\n",
                  (long long)st.step);
      }
      return stopAll(saveTogether() ? 130 : 2);
    }
  }
  if (!saveTogether())
    return stopAll(2);
  if (!root)
    return 0; // rank 0 evaluates
  if (compiled)
    fprintf(stderr, "resident state: %llu entry-point arguments used in place (not copied)\n",
            (unsigned long long)dev.residentHits());
  if (compiled && m.gpu()) {
    const ResidentState::GraphStats &g = dev.graphStats();
    if (!dev.graphsUsable())
      fprintf(stderr, "CUDA graphs: off (%s)\n",
              cfg.gpuGraphs ? "the driver has none" : "--gpu-graphs off");
    else
      fprintf(stderr,
              "CUDA graphs: %llu captured; %s replayed %llu times, run directly %llu times%s%s\n",
              (unsigned long long)g.captured,
              dist ? "loss-and-gradient calls" : "training steps (loss, gradient, Adam)",
              (unsigned long long)g.replayed, (unsigned long long)g.direct,
              g.refused.empty() ? "" : "; a capture was refused: ", g.refused.c_str());
  }
  double total = std::chrono::duration<double>(Clock::now() - t0).count();
  if (dist) {
    int64_t n = cfg.steps - startStep - 1;
    double step = n > 0 ? (total - warmSeconds) / n : total;
    double reduce =
        n > 0 ? (w.gradientTraffic().seconds - warmGradient) / n : w.gradientTraffic().seconds;
    double control =
        n > 0 ? (w.controlTraffic().seconds - warmControl) / n : w.controlTraffic().seconds;
    fprintf(stderr,
            "data parallel: %d ranks x %d thread%s; per step %.2f ms, of which the gradient "
            "all-reduce %.3f ms (%.1f%%, %.2f MB %s) and the status exchange %.3f ms "
            "(rank 0's view; %lld steps after the first)\n",
            w.size(), run.threads(), run.threads() == 1 ? "" : "s", ms(step), ms(reduce),
            100 * reduce / std::max(step, 1e-12), reduceBytes / 1e6,
            onDevice ? "with NCCL" : "over MPI", ms(control), (long long)std::max<int64_t>(n, 0));
    nlohmann::json j{{"ranks", w.size()},
                     {"threads_per_rank", run.threads()},
                     {"global_batch", cfg.batch},
                     {"local_batch", local},
                     {"mpi", w.library()},
                     {"allreduce", onDevice ? "nccl" : "mpi"},
                     {"nccl", w.ncclVersion()},
                     {"bytes_per_step", reduceBytes},
                     {"steps_timed", std::max<int64_t>(n, 0)},
                     {"step_ms", ms(step)},
                     {"gradient_allreduce_ms", ms(reduce)},
                     {"status_exchange_ms", ms(control)},
                     {"allreduce_share", reduce / std::max(step, 1e-12)}};
    if (!writeFileAtomic(cfg.out + "/parallel.json", j.dump(2) + "\n", err))
      return die(err);
  }
  fprintf(stderr, "trained %lld steps in %s; checkpoint in %s\n",
          (long long)(cfg.steps - startStep), hms(total).c_str(), ckptDir.c_str());
  return cfg.evalPrompts > 0 ? evaluate(run, st.theta, cfg) : 0;
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

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
  int64_t d = mi["prompt_dim"], k = cfg.points.end, dims = cfg.dims.end;
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
  spec.title = mi["name"].get<std::string>() + " on " + cfg.task + " (d = " + std::to_string(dims) +
               ", " + (cfg.halting ? "halting" : loopsText) + ")";
  spec.xLabel = "in-context examples k";
  spec.yLabel = "normalized squared error";
  spec.logY = true;
  spec.yFloor = 1e-3; // least squares reaches ~1e-19 on noiseless data
  std::vector<double> ks(k);
  for (int64_t i = 0; i < k; ++i)
    ks[i] = i;
  spec.series = {{"model", ks, sModel}, {"model 5%", ks, lo}, {"model 95%", ks, hi}};
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
  const nlohmann::json &ei = mi["energy"];
  int64_t d = mi["prompt_dim"], k = cfg.points.end, dims = cfg.dims.end, L = cfg.evalLoops;
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
  nlohmann::json j{{"energy", ei.value("name", "")},
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
  spec.title = "energy @" + ei.value("name", std::string()) + " along " +
               mi["name"].get<std::string>() + "'s loop (" + std::to_string(prompts) + " prompts)";
  spec.xLabel = "loop iteration t";
  spec.yLabel = "median E(Y_t; P)";
  std::vector<double> ts(L + 1);
  for (int64_t t = 0; t <= L; ++t)
    ts[t] = t;
  spec.series = {{"median E(Y_t)", ts, median}};
  if (!writeReport(cfg.out, "energy", csv, j, spec))
    return 2;
  printf("energy @%s along the loop: %lld prompts, %lld loops, attention %s (%.1f s)\n",
         ei.value("name", "").c_str(), (long long)prompts, (long long)L,
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
  int64_t d = mi["prompt_dim"], k = cfg.points.end, dims = cfg.dims.end;
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
  spec.title = mi["name"].get<std::string>() + " on " + cfg.task +
               ": error vs loops (trained b = " + std::to_string(cfg.loops) +
               ", k = " + std::to_string(k - 1) + ")";
  spec.xLabel = "loop iterations";
  spec.yLabel = "normalized squared error";
  spec.logY = true;
  spec.yFloor = 1e-4;
  std::vector<double> xs(loops.begin(), loops.end());
  spec.series = {{"last position", xs, last},
                 {"5%", xs, lo},
                 {"95%", xs, hi},
                 {"mean over positions", xs, mean}};
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
