//===- unroll-run.cpp - run a compiled.so ---------------------------------===//
//
//   unroll-run compiled.so --info
//   unroll-run --gpu-info
//   unroll-run compiled.so --task energy --iterations 12 --seed 0 [--json]
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/Energy.h"
#include "unroll/runtime/Model.h"
#include "unroll/runtime/ModelRun.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Distributed.h"
#include "unroll/tooling/OptimizationTasks.h"
#include "unroll/tooling/Plot.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Safetensors.h"
#include "unroll/tooling/Tasks.h"
#include "unroll/tooling/Evaluate.h"
#include "unroll/tooling/Train.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <random>
#include <string>

using namespace unroll;

// From the GPU runtime (runtime/gpu/CudaRuntime.cpp, linked in statically).
extern "C" const char *unroll_gpu_init(void);
extern "C" const char *unroll_gpu_device(void);

static const char *kUsage = R"(usage: unroll-run MODEL.so [options]

Runs a library compiled by unroll (unroll-opt --lower-to-cpu | unroll-translate,
or --lower-to-gpu for an NVIDIA GPU: such a library needs a GPU and its driver).

  --info                 print the model info JSON and exit (no GPU needed)
  --gpu-info             (without MODEL.so) print the GPU a GPU library would
                         use, or why there is none; exit status 0 if usable
  --task NAME            what to run:
                           energy      (energies) iterate the derived descent
                                       steps from Y_0 = X, print E(Y_t) per t;
                                       (a model whose loop descends an energy)
                                       E(Y_t; P) along its loop on the task's
                                       prompts (the config's task, else
                                       icl_linear), with --checkpoint or the
                                       initial parameters; how many steps
                                       increase it
                           icl_linear  (models, the default) train on in-context
                                       linear regression, then evaluate against
                                       least squares, averaging and 3-NN
                           icl_noisy_linear  the same with noise std 0.1
                           icl_sparse_linear  w with 3 nonzero coordinates
                           icl_decision_tree  depth-4 trees on sign splits, N(0,1) leaves
                           icl_relu2nn  sqrt(2/100) relu(x W1) W2, hidden 100
                         (P2's sampling; points curriculum to 2d+1, or 5d+1 for
                         trees and ReLU nets; errors normalized by the zero
                         predictor's, with 5-95% bootstrap bands)
  --encoding E           how prompts become tokens, as the library was built
                         (`unroll.model @M encoding(E)`; checked, default: the
                         library's): interleaved (P2: x_1, y_1, x_2, ...; a
                         prediction at every x) or concat (tokens (x_i, y_i),
                         the query (x, 0) last; one prediction per prompt, so
                         each training step draws how many points precede the
                         query, and evaluation cuts each prompt after every
                         point). Recorded in the model info and checkpoints

Training and evaluation (models):
  --steps N              training steps (default 1000)
  --batch B              prompts per step (default 64)
  --lr X                 Adam learning rate (default 1e-4); with a schedule, its peak
  --lr-schedule S        constant (default), cosine or linear: after the warm-up,
                         decay from --lr to --lr-min at the last step
  --warmup N             linear warm-up over the first N steps (default 0)
  --lr-min X             the rate a cosine or linear decay ends at (default 0)
  --adam-beta1 B, --adam-beta2 B, --adam-eps E
                         Adam's other settings (defaults 0.9, 0.999, 1e-8)
  --optimizer WHERE      host: Adam in double precision here; compiled: the
                         library's own Adam step on weights and moments kept in
                         its resident buffers (on a GPU they never leave it);
                         auto (default): compiled for GPU libraries, else host
  --cpu-precision P      CPU libraries: f32 (default) or bf16, the f32 GEMMs' operands
                         rounded to bfloat16 (f32 accumulation, f32 weights and Adam;
                         attention and layer norms stay f32); needs AVX512_BF16,
                         and runs on AMX tiles where the CPU has them (Intel
                         Xeon: the paper step 2.3-2.4x faster than f32); prints a
                         note where bf16 measures slower than f32
  --micro-batch-tokens N CPU libraries: each thread runs its share of a batch in
                         micro-batches of at most N tokens (prompts x 2k), whose
                         gradients are summed: the same step, with activations that
                         stay in the caches (default 1536; 0: the whole share at once)
  --gpu-graphs on|off    GPU libraries: capture each shape's training step (loss,
                         gradient, Adam) once as a CUDA graph and replay it
                         (default on)
  --seed S               seed of initialization and data (default 0)
  --out DIR              checkpoints, metrics.jsonl, config.json, eval.* (default out/train)
  --no-curriculum        train at the final b, d and points from the start
  --loop-interval N      the loop curriculum adds 2 to b every N steps (P2: 500)
  --curriculum-interval N  the dims and points curricula step every N steps
                         (P2: 5000)
  --window T             loss over the last T iterations (default: the model's)
  --loops N              b for training, evaluation and --predict (default: the model's);
                         with --checkpoint, evaluate at N loops
  --loops auto           evaluation and --predict run each prompt until it halts:
                         ||Y_t - Y_t-1|| <= tol ||Y_t-1||, at most --max-loops; the
                         report gives loops used per prompt (mean, max, histogram).
                         The default when the model's loop has until(tol, max)
  --tol X                halting tolerance (default: the loop's until tol, else 1e-4)
  --max-loops N          halting cap (default: the loop's until max, else 500)
  --gradient MODE        how training differentiates the loop (default: the IR's
                         gradient(...) clause, else bptt):
                           bptt                through the last T iterates
                           implicit[:TOL[:MAX]]  implicit function theorem at Y_b,
                                               solved to TOL (1e-5), at most MAX (100)
                           jfb                 Jacobian-free: dL/dY_b only
                           phantom[:K[:TAU]]   K damped steps (5, damping 0.5)
                         the last three keep one iteration's activations for any b
                         and put the loss on Y_b alone (docs/training.md)
  --loops-random LO:HI   a fresh b per training step, uniform in LO..HI (replaces
                         the loop curriculum)
  --config FILE.json     settings as JSON (keys as written to DIR/config.json);
                         flags given as well take precedence
  --resume               continue from DIR/checkpoint
  --checkpoint C         evaluate (or --predict with) a checkpoint folder, one
                         of its snapshots (C/ckpt-NNNNNNN) or a model
                         .safetensors instead of training
  --eval-prompts N       evaluation prompts (default 1280; 0 skips evaluation)
  --baseline-prompts N   prompts for the baselines fitted per position (trees and
                         boosted trees for icl_decision_tree, a 2-layer ReLU net
                         for icl_relu2nn; default 64); least squares, averaging,
                         3-NN and Lasso use every evaluation prompt
  --log-every N          progress line every N steps (default 50)
  --save-every N         checkpoint every N steps (default 500)
  --eval-loops LIST      with --checkpoint: the loop study, error after each loop
                         count in LIST (1,2,5 or 1:500 or 1:500:10) on fresh prompts,
                         to loops.csv/json/svg (input injection stays stable past the
                         trained b; weight tying drifts)
  --predict              with --checkpoint, --input prompts.safetensors ('xs' [B,n,d],
                         'ys' [B,n]) and --output preds.safetensors ('preds' [B,n])
  --model NAME           which model of the library (default: the first)

More than one process (data-parallel training):
  mpirun -np N unroll-run MODEL.so --task icl_linear ...   (or srun)
                         each rank trains on --batch / N prompts of every step
                         (--batch stays the global batch: a multiple of N); the
                         gradients are summed over the ranks and every rank takes
                         the same Adam step, so N ranks train what one process
                         would (to rounding). Rank 0 alone writes checkpoints,
                         metrics, progress and the evaluation; --resume may use
                         another N. GPU libraries: one GPU per rank (the
                         node-local rank picks it). Threads per rank: the
                         rank's share of the node's cores ($UNROLL_THREADS wins)
  --allreduce HOW        auto (default): NCCL on device buffers for GPU libraries
                         where it can be used, else MPI through host memory;
                         mpi; nccl (an error where NCCL cannot be used)
  --rank-timeout S       a rank that waits S seconds for the others in a
                         collective ends the job, naming itself (default 600)

Unrolled optimization (energies with schedule ista / cccp):
  --task sparse_coding   an ista or fista energy's compiled descent on b = A x*:
                         A_ij ~ N(0, 1/m) with unit columns, x* Bernoulli(0.1) x
                         N(0, 1); NMSE in dB per iteration (default 1000), to
                         DIR/sparse_coding.csv/json/svg
  --task hopfield        retrieve N stored unit patterns from corrupted queries
                         with the compiled CCCP step: retrieval error after one
                         step and at convergence, steps, energy; descent counted
                         over 10,000 single-query cases; DIR/hopfield.csv/json/svg
  --samples N            validation samples / queries (default 1000)
  --patterns N           Hopfield: stored patterns (default 1000)
  --snr DB               sparse coding: measurement noise at DB dB (default none)
  --corrupt mask|noise   Hopfield queries: half the entries zeroed (default), or
                         noise of the pattern's norm
  (--out DIR as above, default out/TASK; --iterations caps the steps)
  An energy with trainable parameters (hand-written steps of unroll.lista_step:
  LISTA-CP, TiLISTA, ALISTA) is trained first on fresh samples: --steps (4000),
  --batch (64), --lr (5e-4, then x0.2 and x0.02 when the validation NMSE stalls
  for 5 evaluations), evaluated every --log-every steps (100); then NMSE per layer

Energies:
  --energy NAME          which energy of the library (default: the first)
  --iterations N         number of steps (default: the energy's iterations)
  --tokens N             number of tokens n of a random input (default 8, or
                         the model's fixed n)
  --dim D                feature size d of a random input (default 4, or the
                         model's fixed d)
  --scale S              std of the random input X (default 1.0); X is drawn
                         as |N(0, S²)| when E has an unroll.nonneg term
  --input FILE           .safetensors with 'X' [n, d] (or [samples, n, d]: one
                         trace per sample, reported as their mean and how many
                         descend monotonically) and, optionally, parameters by
                         name (others are drawn at random)
  --output FILE          write X, the final Y and the parameters
                         (.safetensors, written atomically)
  --plot FILE.svg        plot E(Y_t) against t
  --json                 print the result as JSON instead of a table
  -h, --help             this text
)";

static int die(const std::string &msg) {
  fprintf(stderr, "unroll-run: error: %s%s\n", world().who().c_str(), msg.c_str());
  return 2;
}

namespace {
struct Options {
  std::string model, task, energy, input, output, plot, modelName, checkpoint, config;
  bool info = false, json = false, resume = false, predict = false;
  int64_t iterations = -1, tokens = -1, dim = -1, loops = -1;
  std::vector<int64_t> evalLoops; // --eval-loops: the loop study
  uint64_t seed = 0;
  double scale = 1.0;
  int64_t samples = -1, patterns = -1; // --task sparse_coding / hopfield
  double snrDb = -1;
  std::string corrupt = "mask";
  /// Training settings given as flags, as config keys (override --config).
  nlohmann::json train = nlohmann::json::object();
  /// The arguments, for the check that every rank of a job got the same.
  std::string commandLine;
};

bool parseInt(const std::string &flag, const char *v, int64_t lo, int64_t &out, std::string &err) {
  char *end = nullptr;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (!*v || *end || errno || x < lo) {
    err = flag + " expects an integer >= " + std::to_string(lo) + ", got '" + v + "'";
    return false;
  }
  out = x;
  return true;
}

/// "1,2,5" or "1:500" or "1:500:10" (inclusive ranges), in any mix; sorted,
/// duplicates removed, every entry in 1..100000.
bool parseLoopList(const std::string &flag, const char *v, std::vector<int64_t> &out,
                   std::string &err) {
  std::string s = v;
  auto bad = [&] {
    err = flag + " expects loop counts like 1,2,5 or 1:500 or 1:500:10 (each in 1..100000), got '" +
          s + "'";
    return false;
  };
  out.clear();
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    std::string item = s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    std::vector<int64_t> parts;
    size_t p = 0;
    while (true) {
      size_t c = item.find(':', p);
      std::string num = item.substr(p, c == std::string::npos ? std::string::npos : c - p);
      char *e = nullptr;
      long long x = strtoll(num.c_str(), &e, 10);
      if (num.empty() || *e || x < 1 || x > 100000)
        return bad();
      parts.push_back(x);
      if (c == std::string::npos)
        break;
      p = c + 1;
    }
    if (parts.size() == 1)
      out.push_back(parts[0]);
    else if (parts.size() <= 3 && parts[0] <= parts[1])
      for (int64_t x = parts[0]; x <= parts[1]; x += parts.size() == 3 ? parts[2] : 1)
        out.push_back(x);
    else
      return bad();
    if (end == std::string::npos)
      break;
    pos = end + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return !out.empty() || bad();
}

bool parseDouble(const std::string &flag, const char *v, double &out, std::string &err) {
  char *end = nullptr;
  double x = strtod(v, &end);
  if (!*v || *end || !std::isfinite(x) || x <= 0) {
    err = flag + " expects a positive number, got '" + v + "'";
    return false;
  }
  out = x;
  return true;
}

bool parseArgs(int argc, char **argv, Options &o, std::string &err) {
  for (int i = 1; i < argc; ++i)
    o.commandLine += std::string(argv[i]) + '\n';
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) {
        err = a + " expects a value";
        return nullptr;
      }
      return argv[++i];
    };
    const char *v = nullptr;
    int64_t tmp;
    if (a == "--info")
      o.info = true;
    else if (a == "--json")
      o.json = true;
    else if (a == "--task") {
      if (!(v = value()))
        return false;
      o.task = v;
    } else if (a == "--energy") {
      if (!(v = value()))
        return false;
      o.energy = v;
    } else if (a == "--input") {
      if (!(v = value()))
        return false;
      o.input = v;
    } else if (a == "--output") {
      if (!(v = value()))
        return false;
      o.output = v;
    } else if (a == "--plot") {
      if (!(v = value()))
        return false;
      o.plot = v;
    } else if (a == "--model") {
      if (!(v = value()))
        return false;
      o.modelName = v;
    } else if (a == "--checkpoint") {
      if (!(v = value()))
        return false;
      o.checkpoint = v;
    } else if (a == "--config") {
      if (!(v = value()))
        return false;
      o.config = v;
    } else if (a == "--resume")
      o.resume = true;
    else if (a == "--predict")
      o.predict = true;
    else if (a == "--no-curriculum")
      o.train["curriculum"] = false;
    else if (a == "--gpu-graphs") {
      if (!(v = value()))
        return false;
      if (std::string(v) != "on" && std::string(v) != "off") {
        fprintf(stderr, "unroll-run: error: --gpu-graphs takes on or off, got '%s'\n", v);
        return false;
      }
      o.train["gpu_graphs"] = std::string(v) == "on";
    } else if (a == "--encoding") {
      if (!(v = value()))
        return false;
      if (std::string(v) != "interleaved" && std::string(v) != "concat") {
        fprintf(stderr, "unroll-run: error: --encoding takes interleaved or concat, got '%s'\n", v);
        return false;
      }
      o.train["encoding"] = v;
    } else if (a == "--cpu-precision") {
      if (!(v = value()))
        return false;
      o.train["cpu_precision"] = v;
    } else if (a == "--optimizer") {
      if (!(v = value()))
        return false;
      o.train["optimizer"] = v;
    } else if (a == "--out") {
      if (!(v = value()))
        return false;
      o.train["out"] = v;
    } else if (a == "--lr-schedule") {
      if (!(v = value()))
        return false;
      o.train["lr_schedule"] = v;
    } else if (a == "--lr-min") {
      double x;
      if (!(v = value()) || !parseDouble(a, v, x, err))
        return false;
      o.train["lr_min"] = x;
    } else if (a == "--warmup" || a == "--loop-interval" || a == "--curriculum-interval" ||
               a == "--micro-batch-tokens") {
      const bool fromZero = a == "--warmup" || a == "--micro-batch-tokens";
      if (!(v = value()) || !parseInt(a, v, fromZero ? 0 : 1, tmp, err))
        return false;
      if (a == "--warmup")
        o.train["warmup_steps"] = tmp;
      else if (a == "--micro-batch-tokens")
        o.train["micro_batch_tokens"] = tmp;
      else if (a == "--loop-interval")
        o.train["loop_interval"] = tmp;
      else
        o.train["curriculum_interval"] = tmp;
    } else if (a == "--lr" || a == "--adam-beta1" || a == "--adam-beta2" || a == "--adam-eps") {
      double x;
      if (!(v = value()) || !parseDouble(a, v, x, err))
        return false;
      std::string key = a.substr(2);
      for (char &c : key)
        if (c == '-')
          c = '_';
      o.train[key] = x;
    } else if (a == "--steps" || a == "--batch" || a == "--window" || a == "--eval-prompts" ||
               a == "--log-every" || a == "--save-every" || a == "--baseline-prompts") {
      int64_t lo = a == "--steps" || a == "--eval-prompts" || a == "--baseline-prompts" ? 0 : 1;
      if (!(v = value()) || !parseInt(a, v, lo, tmp, err))
        return false;
      std::string key = a.substr(2);
      for (char &c : key)
        if (c == '-')
          c = '_';
      o.train[key] = tmp;
    } else if (a == "--loops") {
      if (!(v = value()))
        return false;
      if (std::string(v) == "auto")
        o.train["halting"] = true;
      else if (!parseInt(a, v, 1, o.loops, err))
        return false;
      else
        o.train["halting"] = false; // a loop count given: run exactly that many
    } else if (a == "--tol") {
      double x;
      if (!(v = value()) || !parseDouble(a, v, x, err))
        return false;
      o.train["halt_tol"] = x;
    } else if (a == "--allreduce") {
      if (!(v = value()))
        return false;
      o.train["allreduce"] = v;
    } else if (a == "--rank-timeout") {
      double x;
      if (!(v = value()) || !parseDouble(a, v, x, err))
        return false;
      o.train["rank_timeout"] = x;
    } else if (a == "--max-loops") {
      if (!(v = value()) || !parseInt(a, v, 1, tmp, err))
        return false;
      o.train["max_loops"] = tmp;
    } else if (a == "--gradient") {
      if (!(v = value()))
        return false;
      GradientMode g;
      if (!parseGradientMode(v, g, err))
        return false;
      o.train["gradient"] = v;
    } else if (a == "--loops-random") {
      if (!(v = value()))
        return false;
      std::string s = v;
      size_t c = s.find(':');
      int64_t lo = 0, hi = 0;
      if (c == std::string::npos || !parseInt(a, s.substr(0, c).c_str(), 1, lo, err) ||
          !parseInt(a, s.substr(c + 1).c_str(), 1, hi, err) || hi < lo) {
        err = "--loops-random expects LO:HI with 1 <= LO <= HI, got '" + s + "'";
        return false;
      }
      o.train["loops_random"] = {lo, hi};
    } else if (a == "--eval-loops") {
      if (!(v = value()) || !parseLoopList(a, v, o.evalLoops, err))
        return false;
    } else if (a == "--iterations") {
      if (!(v = value()) || !parseInt(a, v, 0, o.iterations, err))
        return false;
    } else if (a == "--tokens") {
      if (!(v = value()) || !parseInt(a, v, 1, o.tokens, err))
        return false;
    } else if (a == "--dim") {
      if (!(v = value()) || !parseInt(a, v, 1, o.dim, err))
        return false;
    } else if (a == "--seed") {
      if (!(v = value()) || !parseInt(a, v, 0, tmp, err))
        return false;
      o.seed = static_cast<uint64_t>(tmp);
      o.train["seed"] = tmp;
    } else if (a == "--samples" || a == "--patterns") {
      if (!(v = value()) || !parseInt(a, v, 1, a == "--samples" ? o.samples : o.patterns, err))
        return false;
    } else if (a == "--snr") {
      if (!(v = value()) || !parseDouble(a, v, o.snrDb, err))
        return false;
    } else if (a == "--corrupt") {
      if (!(v = value()))
        return false;
      o.corrupt = v;
    } else if (a == "--scale") {
      if (!(v = value()) || !parseDouble(a, v, o.scale, err))
        return false;
    } else if (!a.empty() && a[0] == '-') {
      err = "unknown option '" + a + "' (see --help)";
      return false;
    } else if (o.model.empty()) {
      o.model = a;
    } else {
      err = "unexpected argument '" + a + "' (one model per run)";
      return false;
    }
  }
  if (o.model.empty()) {
    err = "no model given (see --help)";
    return false;
  }
  return true;
}

/// X and the parameters: from --input where given, else N(0, std²). A 3-d
/// X [samples, n, d] leaves all samples in in.x and their count in `samples`.
/// An energy's trace holds the token matrix and a few n x n pair matrices
/// (weights, distances, their masks), and the host keeps X, Y and one
/// energy per iteration: refused before anything is allocated when that
/// exceeds the available memory (--tokens 10^12, --iterations 10^11).
bool energyFits(const Options &o, const nlohmann::json &e, double n, double d, std::string &err) {
  double elem = e.value("element_type", "f64") == "f32" ? 4 : 8;
  double iters = o.iterations >= 0 ? (double)o.iterations : (double)e.value("iterations", 1);
  double needed = elem * (6 * n * n + 8 * n * d) + 16 * n * d + (8 + elem) * (iters + 1);
  return checkMemory(needed,
                     "the energy's trace at n = " + std::to_string((long long)n) +
                         ", d = " + std::to_string((long long)d) + ", " +
                         std::to_string((long long)iters) + " iterations",
                     "--tokens or --iterations", err);
}

bool makeInputs(const Options &o, const nlohmann::json &e, EnergyInputs &in, int64_t &samples,
                std::string &err) {
  samples = 1;
  TensorMap file;
  if (!o.input.empty() && !readSafetensors(o.input, file, err))
    return false;
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto fixed = [&](const char *key) -> int64_t {
    return e.contains(key) && e[key].is_number() ? e[key].get<int64_t>() : -1;
  };
  if (file.count("X")) {
    const Tensor &x = file["X"];
    if (x.shape.size() != 2 && x.shape.size() != 3)
      return err = o.input + ": tensor 'X' must be [n, d] or [samples, n, d]", false;
    if (x.shape.size() == 3)
      samples = x.shape[0];
    in.n = x.shape[x.shape.size() - 2];
    in.d = x.shape[x.shape.size() - 1];
    if (samples < 1 || in.n < 1 || in.d < 1)
      return err = o.input + ": tensor 'X' is empty", false;
    if (!checkFinite(x, o.input + ": tensor 'X'", err))
      return false;
    in.x = x.data;
  } else {
    if (!o.input.empty())
      return err = o.input + ": has no tensor 'X'", false;
    int64_t fn = fixed("tokens"), fd = fixed("dim");
    if (e.contains("graph"))
      fn = static_cast<int64_t>(e["graph"].size());
    if (o.tokens > 0 && fn > 0 && o.tokens != fn)
      return err = "--tokens " + std::to_string(o.tokens) +
                   " but the model is compiled for n = " + std::to_string(fn),
             false;
    if (o.dim > 0 && fd > 0 && o.dim != fd)
      return err = "--dim " + std::to_string(o.dim) +
                   " but the model is compiled for d = " + std::to_string(fd),
             false;
    in.n = o.tokens > 0 ? o.tokens : fn > 0 ? fn : 8;
    in.d = o.dim > 0 ? o.dim : fd > 0 ? fd : 4;
    if (!energyFits(o, e, in.n, in.d, err))
      return false;
    // With a non-negativity indicator in E, draw |N(0, scale²)| so that
    // E(Y_0) is finite.
    bool nonneg = false;
    for (const auto &t : e["terms"])
      nonneg |= t.value("op", "") == "nonneg";
    in.x.resize(in.n * in.d);
    for (double &v : in.x)
      v = nonneg ? std::abs(o.scale * normal(rng)) : o.scale * normal(rng);
  }
  // Parameters by their init rule, then those the file gives.
  initParameters(
      e["params"], e.value("num_params", (int64_t)0), in.theta, [&] { return normal(rng); }, 0.1);
  for (const auto &p : e["params"]) {
    std::string name = p["name"];
    int64_t off = p["offset"], numel = 1;
    std::vector<int64_t> shape = p["shape"];
    for (int64_t s : shape)
      numel *= s;
    if (file.count(name)) {
      const Tensor &t = file[name];
      if (t.shape != shape)
        return err = o.input + ": parameter '" + name + "' has shape " +
                     nlohmann::json(t.shape).dump() + ", expected " + nlohmann::json(shape).dump(),
               false;
      if (!checkFinite(t, o.input + ": parameter '" + name + "'", err))
        return false;
      for (int64_t i = 0; i < numel; ++i)
        in.theta[off + i] = t.data[i];
    }
  }
  return true;
}

/// --task sparse_coding / hopfield on an energy library.
int runOptimization(const Options &o, const Model &m, const std::string &task) {
  std::string err;
  const nlohmann::json *e = findEnergy(m, o.energy, err);
  if (!e)
    return die(err + " (--task " + task + " runs an energy with schedule " +
               (task == "hopfield" ? "cccp" : "ista") + ")");
  OptimizationOptions opt;
  opt.seed = o.seed;
  opt.iterations = o.iterations;
  opt.samples = o.samples;
  opt.patterns = o.patterns;
  opt.snrDb = o.snrDb;
  opt.corrupt = o.corrupt;
  opt.json = o.json;
  opt.out = o.train.value("out", "out/" + task);
  opt.steps = o.train.value("steps", opt.steps);
  opt.batch = o.train.value("batch", opt.batch);
  opt.lr = o.train.value("lr", opt.lr);
  opt.evalEvery = o.train.value("log_every", opt.evalEvery);
  int rc = task == "hopfield" ? hopfieldStudy(m, *e, opt, err) : sparseCodingStudy(m, *e, opt, err);
  if (rc != 0) {
    die(err);
    return rc;
  }
  return 0;
}

int runEnergy(const Options &o, const Model &m) {
  std::string err;
  const nlohmann::json *e = findEnergy(m, o.energy, err);
  if (!e)
    return die(err);
  if (!e->contains("trace") || !(*e)["trace"].is_string())
    return die("energy @" + e->value("name", "") + " (schedule " + e->value("schedule", "") +
               ") reads its input X as data, not as Y_0: run it with --task " +
               (e->value("schedule", "") == "cccp" ? "hopfield" : "sparse_coding"));
  EnergyInputs in;
  int64_t samples = 1;
  if (!makeInputs(o, *e, in, samples, err))
    return die(err);
  int64_t iters = o.iterations >= 0 ? o.iterations : e->value("iterations", 1);
  if (samples > 1 && !o.output.empty())
    return die("--output writes one sample's Y; --input " + o.input + " holds " +
               std::to_string(samples) + " samples");
  // One trace per sample; the report is their mean, the counts are over all.
  EnergyTrace tr;
  std::vector<double> all = in.x;
  int increases = 0, monotone = 0, rounding = 0;
  double worst = 0;
  // An increase within a few units of rounding of the trace's largest |E|
  // is rounding, not ascent (a descent that has reached E = 0 to rounding
  // wanders there).
  const double ulp = m.info().value("element_type", "") == "f32" ? 1.2e-7 : 2.2e-16;
  auto withinRounding = [&](const EnergyTrace &tr, size_t t) {
    double scale = 0;
    for (double v : tr.energies)
      scale = std::max(scale, std::abs(v));
    return tr.energies[t] - tr.energies[t - 1] <= 64 * ulp * scale;
  };
  for (int64_t smp = 0; smp < samples; ++smp) {
    in.x.assign(all.begin() + smp * in.n * in.d, all.begin() + (smp + 1) * in.n * in.d);
    EnergyTrace one;
    if (!runEnergyTrace(m, *e, in, iters, one, err))
      return die(samples > 1 ? "sample " + std::to_string(smp) + ": " + err : err);
    int before = increases;
    for (size_t t = 1; t < one.energies.size(); ++t)
      if (one.energies[t] > one.energies[t - 1] && withinRounding(one, t)) {
        ++rounding;
      } else if (one.energies[t] > one.energies[t - 1]) {
        ++increases;
        double rel = (one.energies[t] - one.energies[t - 1]) /
                     std::max(std::abs(one.energies[t - 1]), 1e-300);
        worst = std::max(worst, rel);
      }
    monotone += increases == before;
    if (smp == 0)
      tr = one;
    else
      for (size_t t = 0; t < one.energies.size(); ++t)
        tr.energies[t] += one.energies[t];
  }
  for (double &v : tr.energies)
    v /= samples;

  if (!o.output.empty()) {
    TensorMap out;
    out["X"] = {{in.n, in.d}, in.x};
    out["Y"] = {{in.n, in.d}, tr.y};
    for (const auto &p : (*e)["params"]) {
      std::vector<int64_t> shape = p["shape"];
      Tensor t{shape, {}};
      int64_t off = p["offset"];
      t.data.assign(in.theta.begin() + off, in.theta.begin() + off + t.numel());
      out[p["name"].get<std::string>()] = t;
    }
    if (!writeSafetensors(o.output, out, "F64", err))
      return die(err);
  }

  if (!o.plot.empty()) {
    PlotSpec spec;
    spec.title = "energy @" + (*e)["name"].get<std::string>() + " (" + e->value("schedule", "") +
                 ", rho " + e->value("rho", "") + ")";
    spec.xLabel = "iteration t";
    spec.yLabel =
        samples > 1 ? "mean E(Y_t) over " + std::to_string(samples) + " samples" : "E(Y_t)";
    Series s{samples > 1 ? "mean E(Y_t)" : "E(Y_t)", {}, tr.energies};
    for (size_t t = 0; t < tr.energies.size(); ++t)
      s.x.push_back(static_cast<double>(t));
    spec.series.push_back(s);
    if (!writeSvg(o.plot, spec, err))
      return die(err);
  }

  if (o.json) {
    nlohmann::json j{{"energy", (*e)["name"]},
                     {"n", in.n},
                     {"d", in.d},
                     {"iterations", iters},
                     {"seed", o.seed},
                     {"energies", tr.energies},
                     {"increases", increases},
                     {"increases_within_rounding", rounding},
                     {"max_relative_increase", worst}};
    if (samples > 1) {
      j["samples"] = samples;
      j["energies_are"] = "mean over samples";
      j["monotone_samples"] = monotone;
    }
    printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  printf("energy @%s: schedule %s, attention %s, rho %s, mask %s; n = %lld, "
         "d = %lld, %s, seed %llu\n",
         (*e)["name"].get<std::string>().c_str(), e->value("schedule", "?").c_str(),
         e->value("attention", "?").c_str(), e->value("rho", "?").c_str(),
         e->value("mask", "?").c_str(), (long long)in.n, (long long)in.d,
         m.info().value("element_type", "?").c_str(), (unsigned long long)o.seed);
  if (samples > 1)
    printf("mean over %lld samples of %s\n", (long long)samples, o.input.c_str());
  printf("%6s  %22s  %14s\n", "t", samples > 1 ? "mean E(Y_t)" : "E(Y_t)", "E(Y_t)-E(Y_t-1)");
  for (size_t t = 0; t < tr.energies.size(); ++t) {
    if (t == 0)
      printf("%6zu  %22.15g\n", t, tr.energies[t]);
    else
      printf("%6zu  %22.15g  %+14.6e%s\n", t, tr.energies[t], tr.energies[t] - tr.energies[t - 1],
             tr.energies[t] <= tr.energies[t - 1]    ? ""
             : samples == 1 && withinRounding(tr, t) ? "  (rounding)"
                                                     : "  increase");
  }
  if (samples > 1)
    printf("%lld of %lld samples descend monotonically; %d of %lld steps increased the energy",
           (long long)monotone, (long long)samples, increases, (long long)(iters * samples));
  else
    printf("%d of %lld steps increased the energy", increases, (long long)iters);
  if (increases)
    printf(" (largest relative increase %.3g)", worst);
  if (rounding)
    printf("; %d more by rounding (at most 64 ulp of the largest |E|)", rounding);
  printf("\n");
  return 0;
}
/// What to write when an energy library is asked to learn in context: a
/// model whose loop descends its (first) energy, with its sizes filled in.
std::string howToDeclareModel(const Model &m, const std::string &task) {
  const nlohmann::json &e = m.info()["energies"][0];
  std::string name = e.value("name", "E"), elem = m.info().value("element_type", "f32");
  std::string D = e["dim"].is_number() ? std::to_string(e["dim"].get<int64_t>()) : "D";
  std::string tok = "tensor<?x?x" + D + "x" + elem + ">";
  return m.path() + " holds the energy @" + name + " but no model, so it cannot learn " + task +
         " in context.\nDeclare a model whose loop descends the energy, next to it in the .mlir "
         "file, e.g. for prompts of d = 5:\n\n"
         "  unroll.model @" +
         name +
         "_icl {\n"
         "  ^bb0(%Z: tensor<?x?x5x" +
         elem +
         ">):\n"
         "    %Wi = unroll.param \"_read_in.weight\" : tensor<" +
         D + "x5x" + elem +
         ">\n"
         "    %bi = unroll.param \"_read_in.bias\" init(zeros) : tensor<" +
         D + "x" + elem +
         ">\n"
         "    %Wo = unroll.param \"_read_out.weight\" : tensor<1x" +
         D + "x" + elem +
         ">\n"
         "    %bo = unroll.param \"_read_out.bias\" init(zeros) : tensor<1x" +
         elem +
         ">\n"
         "    %P = unroll.linear %Z, %Wi, %bi : (...) -> " +
         tok +
         "\n"
         "    %Y = unroll.loop %P iterations(10) window(5) injection(none) : " +
         tok +
         " {\n"
         "    ^bb0(%y: " +
         tok + ", %p: " + tok +
         "):\n"
         "      %next = unroll.descend @" +
         name + "(%y, %p) steps(1) : " + tok +
         "\n"
         "      unroll.yield %next : " +
         tok +
         "\n"
         "    }\n"
         "    %pred = unroll.linear %Y, %Wo, %bo : (...) -> tensor<?x?x1x" +
         elem +
         ">\n"
         "    unroll.output %pred : tensor<?x?x1x" +
         elem +
         ">\n"
         "  }\n\n"
         "(examples/energy_icl.mlir is a complete one; the energy alone runs with --task energy)";
}

/// The effective settings of a model run: the model's defaults, --config,
/// the saved settings of a checkpoint being resumed, then the flags.
bool resolveConfig(const Options &o, const nlohmann::json &mi, const std::string &task,
                   bool energyOfModel, TrainConfig &cfg, std::string &err) {
  cfg.task = task;
  if (!o.config.empty()) {
    std::ifstream f(o.config);
    if (!f)
      return err = o.config + ": cannot open", false;
    auto j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded())
      return err = o.config + ": not valid JSON", false;
    if (!cfg.apply(j, err))
      return err = o.config + ": " + err, false;
  }
  if (!cfg.apply(o.train, err))
    return false;
  if (!o.task.empty() && !energyOfModel) // the flag wins over the config file's "task"
    cfg.task = o.task;
  if (o.resume) {
    // Resuming reuses the saved settings unless flags override them.
    TrainState st;
    nlohmann::json saved;
    std::string dir = cfg.out + "/checkpoint";
    if (!loadCheckpoint(dir, mi, st, saved, err))
      return err += " (cannot --resume)", false;
    TrainConfig prev;
    prev.task = task;
    if (!prev.apply(saved, err) || !prev.apply(o.train, err))
      return err = dir + ": " + err, false;
    if (!o.task.empty() && !energyOfModel)
      prev.task = o.task;
    cfg = prev;
  }
  if (o.loops > 0) {
    cfg.evalLoops = o.loops;
    if (o.checkpoint.empty() && !o.predict)
      cfg.loops = o.loops;
  }
  return cfg.finish(mi, err);
}

/// A training run of several ranks: rank 0 resolves the settings (it alone
/// reads --config files and checkpoints) and sends them; every rank must
/// have been started with the same arguments. False when the job stops
/// (every rank knows; rank 0 said why).
bool resolveForRanks(const Options &o, const nlohmann::json &mi, const std::string &task,
                     TrainConfig &cfg) {
  Communicator &w = world();
  std::string line = o.commandLine;
  w.broadcast(line, "the check of the command lines");
  int other = w.firstFailure(line == o.commandLine, "the check of the command lines");
  if (other >= 0) {
    if (w.root())
      fprintf(stderr,
              "unroll-run: error: rank %d was started with other arguments than rank 0: every "
              "rank of a job must run the same command\n",
              other);
    w.agreeToStop();
    return false;
  }
  std::string err, text;
  bool ok = true;
  if (w.root()) {
    ok = resolveConfig(o, mi, task, false, cfg, err);
    if (!ok)
      die(err);
    text = cfg.toJson().dump();
  }
  if (w.firstFailure(ok, "resolving the settings") >= 0) {
    w.agreeToStop();
    return false;
  }
  w.broadcast(text, "the settings");
  if (!w.root()) {
    cfg = TrainConfig();
    cfg.task = task;
    if (!cfg.apply(nlohmann::json::parse(text), err) || !cfg.finish(mi, err))
      return die("rank 0's settings: " + err), false;
  }
  return true;
}

/// Training, evaluation of a checkpoint, or prediction for a model library.
int runModel(const Options &o, const Model &m, const std::string &task,
             bool energyOfModel = false) {
  std::string err;
  const nlohmann::json *mi = findModel(m, o.modelName, err);
  if (!mi && m.info().contains("energies") && !m.info().contains("models"))
    return die(howToDeclareModel(m, task));
  if (!mi)
    return die(err + " (energies run with --task energy)");
  ModelRunner run;
  if (!run.init(m, *mi, err))
    return die(err);
  configureRunner(run);
  TrainConfig cfg;
  bool training = !energyOfModel && !o.predict && o.checkpoint.empty() && o.evalLoops.empty();
  if (training && world().distributed()) {
    if (!resolveForRanks(o, *mi, task, cfg))
      return 2;
  } else if (!resolveConfig(o, *mi, task, energyOfModel, cfg, err)) {
    return die(err);
  }
  if (!applyCpuPrecision(m, cfg.cpuPrecision, err))
    return die(err);
  if (cfg.microBatchTokens >= 0)
    run.setMicroBatchTokens(cfg.microBatchTokens);
  if (!cfg.gradient.empty()) {
    GradientMode g;
    if (!parseGradientMode(cfg.gradient, g, err) || !run.setGradient(g, err))
      return die(m.path() + ": " + err);
  }
  if (energyOfModel) {
    // The energy a model's loop descends, along the loop, on the task's
    // prompts: with the checkpoint's parameters, else the initial ones.
    if (!run.hasEnergyTrace())
      return die(m.path() + ": model @" + (*mi)["name"].get<std::string>() +
                 " does not descend an energy (its loop has no unroll.descend)");
    std::vector<double> theta;
    if (!o.checkpoint.empty()) {
      if (!loadParameters(o.checkpoint, *mi, theta, err))
        return die(err);
    } else {
      Rng rng(cfg.seed);
      initParameters((*mi)["params"], run.numParams(), theta, [&] { return rng.normal(); }, 0.02);
    }
    return energyStudy(run, theta, cfg);
  }
  if (o.predict || !o.checkpoint.empty()) {
    if (o.checkpoint.empty())
      return die("--predict needs --checkpoint (a checkpoint folder or model .safetensors)");
    std::vector<double> theta;
    if (!loadParameters(o.checkpoint, *mi, theta, err))
      return die(err);
    if (o.predict) {
      if (o.input.empty() || o.output.empty())
        return die("--predict needs --input prompts.safetensors and --output preds.safetensors");
      return predict(run, theta, o.input, o.output, o.loops > 0 ? o.loops : cfg.loops, cfg);
    }
    if (!o.evalLoops.empty())
      return loopStudy(run, theta, cfg, o.evalLoops);
    return evaluate(run, theta, cfg);
  }
  if (!o.evalLoops.empty())
    return die("--eval-loops needs --checkpoint (train first, then study the trained model)");
  return train(m, run, cfg, o.resume);
}

} // namespace

static int runMain(int argc, char **argv);

int main(int argc, char **argv) {
  // Under mpirun or srun this process is one rank of a job (a no-op
  // otherwise); finish() ends it with the others, or ends the job when this
  // rank failed alone.
  std::string err;
  if (!world().init(err))
    return die(err);
  int rc;
  // A size the machine cannot hold (--batch 100000000000) ends in a message,
  // not in std::terminate's abort.
  try {
    rc = runMain(argc, argv);
  } catch (const std::bad_alloc &) {
    rc = die("out of memory: the sizes asked for (--batch, --tokens, --iterations, --loops, "
             "--eval-prompts) need more memory than this machine can give");
  }
  return world().finish(rc);
}

static int runMain(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      if (world().root())
        fputs(kUsage, stdout);
      return 0;
    }
  if (argc == 2 && !strcmp(argv[1], "--gpu-info")) {
    if (const char *why = unroll_gpu_init()) {
      printf("%sno usable GPU: %s\n", world().who().c_str(), why);
      return 1;
    }
    printf("%s%s\n", world().who().c_str(), unroll_gpu_device());
    return 0;
  }
  Options o;
  std::string err;
  if (!parseArgs(argc, argv, o, err))
    return die(err);
  // One GPU per rank: the node-local rank picks it.
  Model m;
  if (!m.load(o.model, err, /*useDevice=*/!o.info, world().localRank()))
    return die(err);
  std::string kind = m.info().value("kind", "");
  std::string task = o.task.empty() ? (kind == "energy" ? "energy" : "icl_linear") : o.task;
  bool training = kind == "model" && !o.info && task.rfind("icl_", 0) == 0 && !o.predict &&
                  o.checkpoint.empty() && o.evalLoops.empty();
  if (world().distributed() && !training) {
    // Only training is data-parallel: rank 0 does the rest alone.
    if (!world().root())
      return 0;
    if (!o.info)
      fprintf(stderr, "note: only training runs on several ranks; rank 0 does this alone\n");
  }
  if (o.info) {
    printf("%s\n", m.info().dump(2).c_str());
    return 0;
  }
  if (m.gpu())
    setDeviceFreeBytes([&m] { return m.deviceFreeBytes(); });
  if (task == "sparse_coding" || task == "hopfield")
    return runOptimization(o, m, task);
  if (task == "energy")
    return kind == "model" ? runModel(o, m, "icl_linear", /*energyOfModel=*/true) : runEnergy(o, m);
  std::string known;
  if (!findTask(task, known))
    return die("unknown task '" + task + "' (tasks: energy, " + known + ")");
  return runModel(o, m, task);
}
