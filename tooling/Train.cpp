//===- Train.cpp - the training loop: set-up, steps, checkpoints, reports -===//
//
// train() is a Trainer: set-up (weights, optimizer, how gradients meet, the
// output folder), then steps made of draw / step / record / checkpoint, then
// the run's report and the evaluation (Evaluate.cpp). Every part that can
// fail on one rank of a data-parallel job ends with a collective, so that the
// ranks stop together.
//
//===----------------------------------------------------------------------===//
#include "unroll/tooling/Train.h"
#include "unroll/tooling/Adam.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Distributed.h"
#include "unroll/tooling/Evaluate.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Safetensors.h"

#include "unroll/runtime/ModelInfo.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace key = ::unroll::info;

using namespace unroll;
using Clock = std::chrono::steady_clock;

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
  else if (m.info().value(key::kElementType, "f32") != "f32")
    error = what + m.path() + " computes in " + m.info().value(key::kElementType, "") +
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
    // (with its AMX tiles, the default there, at 4.6x). The library times
    // both (~10 ms) and the user hears of it; bf16 stays on, as asked.
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

/// What a part of the run returns to go on (any other value is the
/// process's exit code).
constexpr int kGoOn = -1;

/// One training run. Each part returns kGoOn, or an exit code after every
/// rank has agreed to stop.
class Trainer {
public:
  Trainer(const Model &m, const ModelRunner &run, TrainConfig cfg)
      : m_(m), run_(run), cfg_(std::move(cfg)), w_(world()), mi_(run.info()),
        ckptDir_(cfg_.out + "/checkpoint"), rng_(cfg_.seed), gm_(run.gradient()) {}

  int operator()(bool resume) {
    for (auto part : {&Trainer::startState, &Trainer::setUpOptimizer, &Trainer::chooseAllreduce,
                      &Trainer::openOutputs})
      if (int rc = (this->*part)(resume); rc != kGoOn)
        return rc;
    kept_ = activationBytesPerPrompt(mi_, gm_, cfg_.window, cfg_.loops,
                                     run_.layout().tokens(cfg_.points.end));
    if (root_)
      announce();
    if (int rc = checkStepMemory(); rc != kGoOn)
      return rc;
    return loop();
  }

private:
  // --- set-up (each part takes whether the run resumes) --------------------
  int startState(bool resume);
  int setUpOptimizer(bool);
  int chooseAllreduce(bool);
  int openOutputs(bool resume);
  void announce() const;
  int checkStepMemory();
  // --- the loop -----------------------------------------------------------
  int loop();
  Prompts draw(int64_t s, int64_t &b, int64_t &dims, int64_t &pts) const;
  int stepAlone(const Prompts &p, int64_t s, int64_t b, double &loss, bool &stop);
  int stepTogether(const Prompts &p, int64_t s, int64_t b, double &loss, bool &stop);
  void record(int64_t s, double loss, int64_t b, int64_t dims, int64_t pts);
  int stopOnSignal();
  bool save();
  bool saveTogether() { return together(root_ ? save() : true, "the checkpoint"); }
  int finish();
  void reportResident() const;
  int reportParallel(double total);

  /// This rank alone failed (Communicator::finish then ends the job).
  int die(const std::string &msg) const {
    fprintf(stderr, "unroll-run: error: %s%s\n", w_.who().c_str(), msg.c_str());
    return 2;
  }
  /// Every rank learned from a collective that the job stops with `rc`.
  int stopAll(int rc) {
    w_.agreeToStop();
    return rc;
  }
  /// After a part that can fail on some ranks (each says why itself): true
  /// when it succeeded on every rank.
  bool together(bool ok, const std::string &what) {
    int bad = w_.firstFailure(ok, what);
    if (bad > 0 && root_)
      fprintf(stderr,
              "unroll-run: error: rank %d failed in %s (its message is above); stopping every "
              "rank\n",
              bad, what.c_str());
    return bad < 0;
  }
  void toHost() {
    if (compiled_)
      dev_.download(st_.theta, st_.adam.m, st_.adam.v);
  }
  std::string promptsOf(int r) const {
    return "prompts " + std::to_string(r * local_) + ".." + std::to_string((r + 1) * local_ - 1) +
           " of the step's batch";
  }

  const Model &m_;
  const ModelRunner &run_;
  TrainConfig cfg_;
  Communicator &w_;
  const nlohmann::json &mi_;
  const std::string ckptDir_;
  Rng rng_; // initialization (data comes from promptSeed)
  const GradientMode &gm_;
  const bool root_ = w_.root(), dist_ = w_.distributed();
  int64_t local_ = 0, first_ = 0; // this rank's prompts of a step's batch
  Prompts data_;                   // --train-data's prompts (batch = N), else empty
  bool loadTrainData();
  TrainState st_;
  std::string err_;
  /// The compiled optimizer keeps theta, the gradient and Adam's moments in
  /// the library's resident buffers for the whole run; st_ holds a host copy
  /// only at checkpoints and at the end.
  bool compiled_ = false;
  ResidentState dev_;
  /// How the ranks' gradients meet: NCCL on the device buffers (GPU
  /// libraries with the compiled optimizer), else MPI on a host copy.
  bool onDevice_ = false;
  void *reduced_ = nullptr; // NCCL's output: the local gradient stays in dev_.grad
  double reduceBytes_ = 0;
  int64_t kept_ = -1; // activation bytes kept per prompt
  std::ofstream metrics_;
  const Fault fault_ = Fault::fromEnvironment();
  // Progress.
  Clock::time_point t0_;
  int64_t startStep_ = 0;
  double lossAvg_ = 0;
  int64_t lossN_ = 0;
  std::vector<double> losses_, grad_;
  // Per-step times after the first (its warm-up is not a step's cost).
  double warmSeconds_ = 0, warmGradient_ = 0, warmControl_ = 0;
};

//===----------------------------------------------------------------------===//
// Set-up
//===----------------------------------------------------------------------===//

int Trainer::startState(bool resume) {
  w_.setTimeout(cfg_.rankTimeout);
  if (cfg_.batch % w_.size() != 0) {
    if (root_)
      fprintf(stderr,
              "unroll-run: error: --batch %lld is the global batch and does not split over %d "
              "ranks: give a multiple of %d\n",
              (long long)cfg_.batch, w_.size(), w_.size());
    return stopAll(2);
  }
  local_ = cfg_.batch / w_.size();
  first_ = w_.rank() * local_;
  bool ok = cfg_.trainData.empty() || loadTrainData();
  if (!together(ok, "reading --train-data"))
    return stopAll(2);
  if (resume) {
    // Rank 0 reads the checkpoint and sends it: a resumed run may have
    // another number of ranks than the one that saved it.
    if (root_) {
      nlohmann::json saved;
      if (!loadCheckpoint(ckptDir_, mi_, st_, saved, err_))
        err_ += " (cannot --resume)", ok = false;
      else if (!rng_.restore(st_.rng))
        err_ = ckptDir_ + ": corrupt RNG state", ok = false;
      if (!ok)
        die(err_);
      else
        fprintf(stderr, "resuming from step %lld (%s)\n", (long long)st_.step, ckptDir_.c_str());
    }
  } else {
    initParameters(
        mi_[key::kParams], run_.numParams(), st_.theta, [&] { return rng_.normal(); }, 0.02);
  }
  if (!together(ok, "loading the checkpoint"))
    return stopAll(2);
  if (dist_)
    shareState(w_, st_);
  st_.adam.lr = cfg_.lr;
  st_.adam.beta1 = cfg_.beta1;
  st_.adam.beta2 = cfg_.beta2;
  st_.adam.eps = cfg_.eps;
  return kGoOn;
}

int Trainer::setUpOptimizer(bool) {
  compiled_ = cfg_.optimizer == "compiled" || (cfg_.optimizer == "auto" && m_.gpu());
  if (!compiled_)
    return kGoOn;
  if (!run_.hasAdam()) {
    if (root_)
      die(m_.path() + ": the library has no compiled optimizer step (@" +
          mi_.value(key::kName, std::string("M")) +
          "_adam); rebuild it with this unroll-opt, or train with --optimizer host");
    return stopAll(2);
  }
  bool ok = dev_.init(m_, run_.numParams(), m_.info().value(key::kElementType, "") == "f32", err_);
  if (!ok)
    die(err_);
  if (!together(ok, "allocating the training state"))
    return stopAll(2);
  dev_.setGraphs(cfg_.gpuGraphs);
  dev_.upload(st_.theta, st_.adam.m, st_.adam.v);
  return kGoOn;
}

int Trainer::chooseAllreduce(bool) {
  if (dist_ && compiled_ && m_.gpu() && cfg_.allreduce != "mpi") {
    std::string why;
    if (w_.initNccl(m_, why)) {
      reduced_ = dev_.allocate(size_t(dev_.size) * (dev_.f32 ? 4 : 8));
      if (!reduced_)
        die("cannot allocate the all-reduce's buffer");
      if (!together(reduced_ != nullptr, "allocating the all-reduce's buffer"))
        return stopAll(2);
      onDevice_ = true;
    } else if (cfg_.allreduce == "nccl") {
      if (root_)
        die("--allreduce nccl: " + why);
      return stopAll(2);
    } else if (root_) {
      fprintf(stderr, "NCCL cannot be used (%s): gradients meet over MPI through host memory\n",
              why.c_str());
    }
  } else if (cfg_.allreduce == "nccl" && dist_) {
    if (root_)
      die("--allreduce nccl needs a GPU library trained with the compiled optimizer");
    return stopAll(2);
  }
  reduceBytes_ = double(run_.numParams()) * (onDevice_ && dev_.f32 ? 4 : 8);
  return kGoOn;
}

int Trainer::openOutputs(bool resume) {
  bool ok = true;
  if (root_) {
    ok = makeDirs(cfg_.out, err_) &&
         writeFileAtomic(cfg_.out + "/config.json", cfg_.toJson().dump(2) + "\n", err_);
    if (ok) {
      // A resumed run keeps the rows up to its checkpoint's step.
      ok = openMetrics(cfg_.out + "/metrics.jsonl", resume ? st_.step : 0, metrics_, err_);
    }
    if (!ok)
      die(err_);
  }
  if (!together(ok, "writing " + cfg_.out))
    return stopAll(2);
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  return kGoOn;
}

/// The run's header: what is trained, how, and what a step keeps.
void Trainer::announce() const {
  std::string scheduleText;
  if (cfg_.warmupSteps > 0)
    scheduleText += " (" + std::to_string(cfg_.warmupSteps) + " warm-up steps";
  if (cfg_.lrSchedule != "constant") {
    char b[64];
    snprintf(b, sizeof b, "%s%s decay to %g", scheduleText.empty() ? " (" : ", ",
             cfg_.lrSchedule.c_str(), cfg_.lrMin);
    scheduleText += b;
  }
  if (!scheduleText.empty())
    scheduleText += ")";
  std::string precisionText;
  if (cfg_.cpuPrecision == "bf16") {
    // Which kernel multiplies them (libraries built before AMX support do
    // not say).
    auto kernel = reinterpret_cast<const char *(*)()>(m_.symbol("unroll_cpu_bf16_kernel"));
    std::string k = kernel ? kernel() : "";
    precisionText = "; GEMM operands bf16 (f32 accumulation and weights" +
                    std::string(k == "amx"          ? "; AMX tiles"
                                : k == "avx512bf16" ? "; vdpbf16ps"
                                                    : "") +
                    ")";
  }
  std::string loopsText = cfg_.loopsRandomLo > 0
                              ? std::to_string(cfg_.loopsRandomLo) + ".." +
                                    std::to_string(cfg_.loopsRandomHi) + " (random)"
                              : std::to_string(cfg_.loops);
  fprintf(stderr,
          "training %s on %s: %lld steps, batch %lld, lr %g%s, b %s, T %lld, %s curriculum; "
          "%lld parameters; Adam %s%s\n",
          mi_[key::kName].get<std::string>().c_str(),
          data_.batch > 0 ? (cfg_.trainData + " (" + std::to_string(data_.batch) + " prompts of " +
                             std::to_string(data_.points) + " points)")
                                .c_str()
                          : cfg_.task.c_str(),
          (long long)cfg_.steps, (long long)cfg_.batch, cfg_.lr, scheduleText.c_str(),
          loopsText.c_str(), (long long)cfg_.window,
          cfg_.curriculum ? (data_.batch > 0 ? "loop" : "with") : "no", (long long)run_.numParams(),
          compiled_ ? (m_.gpu() ? "compiled, state resident on the GPU" : "compiled")
                    : "on the host",
          precisionText.c_str());
  std::string micro;
  if (!m_.gpu() && run_.microBatchTokens() > 0)
    micro = "; threads run micro-batches of <= " + std::to_string(run_.microBatchTokens()) +
            " tokens (--micro-batch-tokens)";
  fprintf(stderr, "gradient: %s; activations kept per prompt at b %lld, %lld points: %s%s\n",
          gm_.str().c_str(), (long long)cfg_.loops, (long long)cfg_.points.end,
          kept_ < 0 ? "unknown" : (std::to_string((kept_ + 1023) / 1024) + " KiB").c_str(),
          micro.c_str());
  if (dist_)
    fprintf(stderr,
            "data parallel: %d ranks (%s), %lld prompts each of the global batch %lld, %d "
            "thread%s per rank; gradients all-reduced %s, %.2f MB per step\n",
            w_.size(), w_.library().c_str(), (long long)local_, (long long)cfg_.batch,
            run_.threads(), run_.threads() == 1 ? "" : "s",
            onDevice_ ? ("with " + w_.ncclVersion() + " on device buffers").c_str()
                      : "over MPI through host memory",
            reduceBytes_ / 1e6);
}

/// A step's share of the batch: its prompts (host, and converted for the
/// library), the activations the gradient keeps (for the prompts whose
/// micro-batches run at once), and the parameter-sized vectors (theta,
/// gradient, Adam's moments).
int Trainer::checkStepMemory() {
  int64_t d = mi_[key::kPromptDim];
  double n = double(run_.layout().tokens(cfg_.points.end)), b = (double)local_;
  double live = (double)run_.livePrompts(local_, cfg_.points.end);
  double needed =
      b * n * d * 8 * 3 + live * std::max<double>(kept_, 0) + 8.0 * 6 * run_.numParams();
  bool ok = checkMemory(needed, "a training step at batch " + std::to_string(local_), // per rank
                        "--batch (or --loops, --window)", err_);
  if (!ok)
    die(err_);
  if (!together(ok, "the memory check"))
    return stopAll(2);
  return kGoOn;
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

int Trainer::loop() {
  t0_ = Clock::now();
  startStep_ = st_.step;
  while (st_.step < cfg_.steps) {
    int64_t s = st_.step, b, dims, pts;
    Prompts p = draw(s, b, dims, pts);
    st_.adam.lr = cfg_.lrAt(s);
    double loss = 0;
    bool stop = false;
    int rc = dist_ ? stepTogether(p, s, b, loss, stop) : stepAlone(p, s, b, loss, stop);
    if (rc != kGoOn)
      return rc;
    st_.step = s + 1; // completed steps: what every checkpoint below records
    record(s, loss, b, dims, pts);
    if ((s + 1) % cfg_.saveEvery == 0 && s + 1 != cfg_.steps && !saveTogether())
      return stopAll(2);
    if (stop)
      return stopOnSignal();
  }
  return finish();
}

/// Step s's prompts (this rank's share), loops b, dims and points.
/// --train-data: every rank reads the file; its prompts must fit the model.
bool Trainer::loadTrainData() {
  const std::string &f = cfg_.trainData;
  TensorMap t;
  if (!readSafetensors(f, t, err_))
    return die("--train-data " + err_), false;
  const int64_t d = mi_[key::kPromptDim];
  auto bad = [&](const std::string &why) {
    die("--train-data " + f + ": " + why);
    return false;
  };
  if (!t.count("xs") || !t.count("ys"))
    return bad("expected tensors 'xs' [N, k, " + std::to_string(d) + "] and 'ys' [N, k]");
  const Tensor &xs = t["xs"], &ys = t["ys"];
  if (xs.shape.size() != 3 || xs.shape[2] != d || xs.shape[0] < 1 || xs.shape[1] < 1)
    return bad("'xs' has shape " + nlohmann::json(xs.shape).dump() + ", expected [N, k, " +
               std::to_string(d) + "] (d: the model's)");
  if (ys.shape != std::vector<int64_t>{xs.shape[0], xs.shape[1]})
    return bad("'ys' has shape " + nlohmann::json(ys.shape).dump() + ", expected [" +
               std::to_string(xs.shape[0]) + ", " + std::to_string(xs.shape[1]) + "]");
  if (run_.layout().concat)
    return bad("takes models with the interleaved encoding");
  if (mi_.contains(key::kPositions) && 2 * xs.shape[1] > mi_[key::kPositions].get<int64_t>())
    return bad(std::to_string(xs.shape[1]) + " points per prompt are " +
               std::to_string(2 * xs.shape[1]) + " tokens, past the model's " +
               mi_[key::kPositions].dump() + " positions");
  if (!checkFinite(xs, f + ": 'xs'", err_) || !checkFinite(ys, f + ": 'ys'", err_))
    return die(err_), false;
  data_.batch = xs.shape[0];
  data_.points = xs.shape[1];
  // The file's k and d are the run's (memory estimates, reports).
  cfg_.points.start = cfg_.points.end = data_.points;
  cfg_.dims.start = cfg_.dims.end = d;
  data_.dim = d;
  data_.xs = xs.data;
  data_.ys = ys.data;
  return true;
}

Prompts Trainer::draw(int64_t s, int64_t &b, int64_t &dims, int64_t &pts) const {
  dims = cfg_.curriculum ? cfg_.dims.at(s) : cfg_.dims.end;
  pts = cfg_.curriculum ? cfg_.points.at(s) : cfg_.points.end;
  if (data_.batch > 0)
    dims = data_.dim, pts = data_.points;
  Rng stepRng(promptSeed(cfg_.seed, s, -1)); // the same b on every rank
  b = cfg_.loopsRandomLo > 0
          ? cfg_.loopsRandomLo + stepRng.below(cfg_.loopsRandomHi - cfg_.loopsRandomLo + 1)
      : cfg_.curriculum
          ? std::min(cfg_.loops, cfg_.window + cfg_.loopInc * (s / cfg_.loopInterval))
          : cfg_.loops;
  // Concat predicts one point per prompt, the last: each step draws how
  // many points precede it (0 .. pts - 1), so that training covers every k
  // as the interleaved loss does within one prompt.
  if (run_.layout().concat)
    pts = 1 + int64_t(stepRng.below(pts));
  int64_t d = mi_[key::kPromptDim];
  if (data_.batch > 0) {
    // This rank's prompts of step s: s·batch + first_ + i, mod N.
    Prompts p;
    p.batch = local_, p.points = pts, p.dim = d;
    for (int64_t i = 0; i < local_; ++i) {
      int64_t r = (s * cfg_.batch + first_ + i) % data_.batch;
      p.xs.insert(p.xs.end(), data_.xs.begin() + r * pts * d, data_.xs.begin() + (r + 1) * pts * d);
      p.ys.insert(p.ys.end(), data_.ys.begin() + r * pts, data_.ys.begin() + (r + 1) * pts);
    }
    return p;
  }
  return cfg_.spec->sampleAt(cfg_.seed, s, first_, local_, pts, d, dims, cfg_.noise);
}

/// One process: loss, gradient and update. Compiled: all three in one call
/// (one CUDA graph on a GPU); the update is in dev_, but a non-finite run
/// stops without saving it: the last checkpoint stays what it was.
int Trainer::stepAlone(const Prompts &p, int64_t s, int64_t b, double &loss, bool &stop) {
  double normSq = 0;
  if (compiled_)
    ++st_.adam.step;
  if (!(compiled_ ? run_.trainStep(p, dev_, b, cfg_.window, st_.adam.compiledStep(), losses_,
                                   normSq, err_)
                  : run_.lossGrad(p, st_.theta, b, cfg_.window, losses_, grad_, err_)))
    return die(err_);
  for (double l : losses_)
    loss += l;
  loss /= losses_.size();
  bool finite = std::isfinite(loss);
  if (compiled_) {
    finite = finite && std::isfinite(normSq);
  } else {
    for (double g : grad_)
      finite = finite && std::isfinite(g);
  }
  if (!finite) {
    fprintf(stderr,
            "unroll-run: error: non-finite %s at step %lld; stopping (the last checkpoint in %s "
            "is kept)\n",
            std::isfinite(loss) ? "gradient" : "loss", (long long)s + 1, ckptDir_.c_str());
    return 3;
  }
  if (!compiled_)
    st_.adam.update(st_.theta, grad_);
  stop = gStop != 0;
  return kGoOn;
}

/// Several ranks: each computes its share's loss and gradient, all learn
/// each other's status (all stop together, or none), the gradients are
/// averaged, and every rank applies the same update.
int Trainer::stepTogether(const Prompts &p, int64_t s, int64_t b, double &loss, bool &stop) {
  std::string stepErr;
  bool stepOk = compiled_ ? run_.lossGrad(p, dev_, b, cfg_.window, losses_, stepErr)
                          : run_.lossGrad(p, st_.theta, b, cfg_.window, losses_, grad_, stepErr);
  if (!stepOk) {
    die("step " + std::to_string(s + 1) + ": " + stepErr);
    losses_.assign(1, 0.0);
  }
  if (fault_.at("hang", w_.rank(), s + 1))
    for (;;)
      pause();
  if (fault_.at("die", w_.rank(), s + 1))
    raise(SIGKILL);
  if (stepOk && compiled_ && !onDevice_)
    dev_.readVector(grad_, dev_.grad);
  if (stepOk && fault_.at("nan", w_.rank(), s + 1)) {
    if (onDevice_) {
      dev_.readVector(grad_, dev_.grad);
      grad_[0] = NAN;
      dev_.writeVector(dev_.grad, grad_);
    } else {
      grad_[0] = NAN;
    }
  }
  // Every rank's status and loss.
  double mine = 0;
  for (double l : losses_)
    mine += l;
  mine /= losses_.size();
  int code = stepOk ? 0 : 1;
  if (stepOk && !std::isfinite(mine))
    code |= 2;
  if (stepOk && !onDevice_)
    for (double g : grad_)
      if (!std::isfinite(g)) {
        code |= 4;
        break;
      }
  if (gStop)
    code |= 8;
  std::string sn = std::to_string(s + 1);
  std::vector<double> all = w_.allgather({double(code), mine}, "status exchange of step " + sn);
  int flags = 0, failed = -1;
  for (int r = 0; r < w_.size(); ++r) {
    int c = int(all[2 * r]);
    flags |= c;
    loss += all[2 * r + 1] / w_.size();
    if ((c & 7) && failed < 0)
      failed = r;
  }
  if (flags & 1) {
    if (root_ && failed != 0)
      fprintf(stderr,
              "unroll-run: error: rank %d failed at step %lld (its message is above); stopping "
              "every rank (the last checkpoint in %s is kept)\n",
              failed, (long long)s + 1, ckptDir_.c_str());
    return stopAll(2);
  }
  if (flags & 6) {
    int c = int(all[2 * failed]);
    if (root_)
      fprintf(stderr,
              "unroll-run: error: non-finite %s at step %lld on rank %d (%s); stopping every "
              "rank (the last checkpoint in %s is kept)\n",
              c & 2 ? "loss" : "gradient", (long long)s + 1, failed, promptsOf(failed).c_str(),
              ckptDir_.c_str());
    return stopAll(3);
  }
  stop = flags & 8;
  // The gradient of the global batch's mean loss: the mean of the ranks'
  // (equal shares).
  w_.countAsGradient(true);
  if (onDevice_) {
    w_.allreduceMeanDevice(dev_.grad, reduced_, dev_.size, dev_.f32,
                           "gradient all-reduce of step " + sn);
  } else {
    w_.allreduceSum(grad_, "gradient all-reduce of step " + sn);
    for (double &g : grad_)
      g /= w_.size();
  }
  w_.countAsGradient(false);
  if (!compiled_) {
    st_.adam.update(st_.theta, grad_);
    return kGoOn;
  }
  if (!onDevice_)
    dev_.writeVector(dev_.grad, grad_);
  else
    std::swap(dev_.grad, reduced_); // Adam reads the all-reduced gradient
  ++st_.adam.step;
  double normSq = run_.adamStep(dev_, st_.adam.compiledStep());
  if (onDevice_)
    std::swap(dev_.grad, reduced_);
  if (std::isfinite(normSq))
    return kGoOn;
  // Whose gradient: each rank's own is still in dev_.grad.
  bool mineFinite = true;
  if (onDevice_) {
    dev_.readVector(grad_, dev_.grad);
    for (double g : grad_)
      mineFinite = mineFinite && std::isfinite(g);
  }
  int bad = w_.firstFailure(mineFinite, "the non-finite gradient's rank");
  if (root_)
    fprintf(stderr,
            "unroll-run: error: non-finite gradient at step %lld%s; stopping every rank (the "
            "last checkpoint in %s is kept)\n",
            (long long)s + 1,
            bad >= 0 ? (" on rank " + std::to_string(bad) + " (" + promptsOf(bad) + ")").c_str()
                     : " after the all-reduce",
            ckptDir_.c_str());
  return stopAll(3);
}

/// metrics.jsonl's row for step s, and the progress line every logEvery
/// steps (and at the first and last).
void Trainer::record(int64_t s, double loss, int64_t b, int64_t dims, int64_t pts) {
  lossAvg_ += loss;
  ++lossN_;
  double el = std::chrono::duration<double>(Clock::now() - t0_).count();
  if (s == startStep_) {
    warmSeconds_ = el;
    warmGradient_ = w_.gradientTraffic().seconds;
    warmControl_ = w_.controlTraffic().seconds;
  }
  if (!root_)
    return;
  nlohmann::json row{{"step", s + 1}, {"loss", loss},      {"loops", b},     {"dims", dims},
                     {"points", pts}, {"lr", st_.adam.lr}, {"elapsed_s", el}};
  if (gm_.fixedPoint())
    row["gradient_iterations"] = run_.fixedPointStats().iterations;
  if (dist_)
    row["allreduce_s"] = w_.gradientTraffic().seconds;
  metrics_ << row.dump() << "\n";
  if ((s + 1) % cfg_.logEvery != 0 && s + 1 != cfg_.steps && s != startStep_)
    return;
  double rate = (s + 1 - startStep_) / std::max(el, 1e-9);
  std::string extra =
      gm_.fixedPoint()
          ? " | g iters " + std::to_string(int64_t(run_.fixedPointStats().iterations))
          : "";
  if (cfg_.lrSchedule != "constant" || cfg_.warmupSteps > 0) {
    char buf[32];
    snprintf(buf, sizeof buf, " | lr %.2e", st_.adam.lr);
    extra += buf;
  }
  fprintf(stderr, "step %6lld/%lld | loss %.4f | b %lld d %lld k %lld%s | %.2f steps/s | ETA %s\n",
          (long long)(s + 1), (long long)cfg_.steps, lossAvg_ / lossN_, (long long)b,
          (long long)dims, (long long)pts, extra.c_str(), rate,
          hms((cfg_.steps - s - 1) / rate).c_str());
  lossAvg_ = 0;
  lossN_ = 0;
  metrics_.flush();
}

/// SIGINT or SIGTERM on some rank: every rank writes the checkpoint and stops.
int Trainer::stopOnSignal() {
  if (root_) {
    if (gStop)
      fprintf(stderr, "caught %s at step %lld: writing a checkpoint and stopping\n",
              gStop == SIGINT ? "SIGINT" : "SIGTERM", (long long)st_.step);
    else
      fprintf(stderr,
              "another rank caught a signal at step %lld: writing a checkpoint and stopping\n",
              (long long)st_.step);
  }
  return stopAll(saveTogether() ? 130 : 2);
}

/// Rank 0's checkpoint (written atomically: a failure keeps the previous one).
bool Trainer::save() {
  toHost();
  st_.rng = rng_.save();
  // The rows up to this step reach the file before the checkpoint that
  // a resume keeps them by.
  metrics_.flush();
  if (saveCheckpoint(ckptDir_, mi_, st_, cfg_.toJson(), err_))
    return true;
  fprintf(stderr,
          "unroll-run: error: checkpoint at step %lld failed: %s (the previous checkpoint is "
          "kept)\n",
          (long long)st_.step, err_.c_str());
  return false;
}

//===----------------------------------------------------------------------===//
// The end: checkpoint, reports, evaluation
//===----------------------------------------------------------------------===//

int Trainer::finish() {
  if (!saveTogether())
    return stopAll(2);
  if (!root_)
    return 0; // rank 0 evaluates
  reportResident();
  double total = std::chrono::duration<double>(Clock::now() - t0_).count();
  if (dist_ && reportParallel(total) != kGoOn)
    return 2;
  fprintf(stderr, "trained %lld steps in %s; checkpoint in %s\n",
          (long long)(cfg_.steps - startStep_), hms(total).c_str(), ckptDir_.c_str());
  return cfg_.evalPrompts > 0 ? evaluate(run_, st_.theta, cfg_) : 0;
}

/// What the compiled optimizer's resident state saved: arguments used in
/// place, and on a GPU the CUDA graphs captured and replayed.
void Trainer::reportResident() const {
  if (!compiled_)
    return;
  fprintf(stderr, "resident state: %llu entry-point arguments used in place (not copied)\n",
          (unsigned long long)dev_.residentHits());
  if (!m_.gpu())
    return;
  const ResidentState::GraphStats &g = dev_.graphStats();
  if (!dev_.graphsUsable())
    fprintf(stderr, "CUDA graphs: off (%s)\n",
            cfg_.gpuGraphs ? "the driver has none" : "--gpu-graphs off");
  else
    fprintf(stderr,
            "CUDA graphs: %llu captured; %s replayed %llu times, run directly %llu times%s%s\n",
            (unsigned long long)g.captured,
            dist_ ? "loss-and-gradient calls" : "training steps (loss, gradient, Adam)",
            (unsigned long long)g.replayed, (unsigned long long)g.direct,
            g.refused.empty() ? "" : "; a capture was refused: ", g.refused.c_str());
}

/// Data-parallel runs: the step's time and the all-reduce's share, printed
/// and written to parallel.json.
int Trainer::reportParallel(double total) {
  int64_t n = cfg_.steps - startStep_ - 1;
  double step = n > 0 ? (total - warmSeconds_) / n : total;
  double reduce =
      n > 0 ? (w_.gradientTraffic().seconds - warmGradient_) / n : w_.gradientTraffic().seconds;
  double control =
      n > 0 ? (w_.controlTraffic().seconds - warmControl_) / n : w_.controlTraffic().seconds;
  fprintf(stderr,
          "data parallel: %d ranks x %d thread%s; per step %.2f ms, of which the gradient "
          "all-reduce %.3f ms (%.1f%%, %.2f MB %s) and the status exchange %.3f ms (rank 0's "
          "view; %lld steps after the first)\n",
          w_.size(), run_.threads(), run_.threads() == 1 ? "" : "s", ms(step), ms(reduce),
          100 * reduce / std::max(step, 1e-12), reduceBytes_ / 1e6,
          onDevice_ ? "with NCCL" : "over MPI", ms(control), (long long)std::max<int64_t>(n, 0));
  nlohmann::json j{{"ranks", w_.size()},
                   {"threads_per_rank", run_.threads()},
                   {"global_batch", cfg_.batch},
                   {"local_batch", local_},
                   {"mpi", w_.library()},
                   {"allreduce", onDevice_ ? "nccl" : "mpi"},
                   {"nccl", w_.ncclVersion()},
                   {"bytes_per_step", reduceBytes_},
                   {"steps_timed", std::max<int64_t>(n, 0)},
                   {"step_ms", ms(step)},
                   {"gradient_allreduce_ms", ms(reduce)},
                   {"status_exchange_ms", ms(control)},
                   {"allreduce_share", reduce / std::max(step, 1e-12)}};
  if (!writeFileAtomic(cfg_.out + "/parallel.json", j.dump(2) + "\n", err_))
    return die(err_);
  return kGoOn;
}

} // namespace

int unroll::train(const Model &m, const ModelRunner &run, TrainConfig cfg, bool resume) {
  return Trainer(m, run, std::move(cfg))(resume);
}
