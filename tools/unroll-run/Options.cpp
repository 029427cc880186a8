//===- Options.cpp - unroll-run's flags, as one table ---------------------===//
//
// Each flag once: its names, its value, its help, and what it sets. The
// table parses the command line and writes --help.
//
//===----------------------------------------------------------------------===//
#include "Options.h"

#include "unroll/runtime/GradientMode.h"
#include "unroll/tooling/Distributed.h"
#include "unroll/tooling/Flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace unroll;

int unroll::die(const std::string &msg) {
  fprintf(stderr, "unroll-run: error: %s%s\n", world().who().c_str(), msg.c_str());
  return 2;
}

namespace {

/// "1,2,5" or "1:500" or "1:500:10" (inclusive ranges), in any mix; sorted,
/// duplicates removed, every entry in 1..100000.
bool parseLoopList(const std::string &flag, const std::string &s, std::vector<int64_t> &out,
                   std::string &err) {
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

/// The table, with setters that write into `o`.
FlagTable table(Options &o) {
  FlagTable t("unroll-run", "unroll-run MODEL.so [options]",
              "Runs a library compiled by unroll (unroll-opt --lower-to-cpu | unroll-translate,\n"
              "or --lower-to-gpu for an NVIDIA GPU: such a library needs a GPU and its driver).");
  // Setters for the common kinds of value.
  auto text = [](std::string &into) {
    return [&into](const std::string &v, std::string &) { return into = v, true; };
  };
  auto key = [&o](const char *k) {
    return [&o, k](const std::string &v, std::string &) { return o.train[k] = v, true; };
  };
  auto count = [&o](const char *flag, const char *k, int64_t lo) {
    return [&o, flag, k, lo](const std::string &v, std::string &err) {
      int64_t x;
      return parseInteger(flag, v, lo, x, err) && (o.train[k] = x, true);
    };
  };
  auto positive = [&o](const char *flag, const char *k) {
    return [&o, flag, k](const std::string &v, std::string &err) {
      double x;
      return parsePositive(flag, v, x, err) && (o.train[k] = x, true);
    };
  };
  auto integer = [](const char *flag, int64_t lo, int64_t &into) {
    return [flag, lo, &into](const std::string &v, std::string &err) {
      return parseInteger(flag, v, lo, into, err);
    };
  };

  t.flag("--info", "print the model info JSON and exit (no GPU needed)", [&o] { o.info = true; });
  t.text("  --gpu-info             (without MODEL.so) print the GPU a GPU library would\n"
         "                         use, or why there is none; exit status 0 if usable");
  t.option("--task", "NAME",
           "what to run:\n"
           "  energy      (energies) iterate the derived descent\n"
           "              steps from Y_0 = X, print E(Y_t) per t;\n"
           "              (a model whose loop descends an energy)\n"
           "              E(Y_t; P) along its loop on the task's\n"
           "              prompts (the config's task, else\n"
           "              icl_linear), with --checkpoint or the\n"
           "              initial parameters; how many steps\n"
           "              increase it\n"
           "  icl_linear  (models, the default) train on in-context\n"
           "              linear regression, then evaluate against\n"
           "              least squares, averaging and 3-NN\n"
           "  icl_noisy_linear  the same with noise std 0.1\n"
           "  icl_sparse_linear  w with 3 nonzero coordinates\n"
           "  icl_decision_tree  depth-4 trees on sign splits, N(0,1) leaves\n"
           "  icl_relu2nn  sqrt(2/100) relu(x W1) W2, hidden 100\n"
           "(P2's sampling; points curriculum to 2d+1, or 5d+1 for\n"
           "trees and ReLU nets; errors normalized by the zero\n"
           "predictor's, with 5-95% bootstrap bands)",
           text(o.task));
  t.option("--encoding", "E",
           "how prompts become tokens, as the library was built\n"
           "(`unroll.model @M encoding(E)`; checked, default: the\n"
           "library's): interleaved (P2: x_1, y_1, x_2, ...; a\n"
           "prediction at every x) or concat (tokens (x_i, y_i),\n"
           "the query (x, 0) last; one prediction per prompt, so\n"
           "each training step draws how many points precede the\n"
           "query, and evaluation cuts each prompt after every\n"
           "point). Recorded in the model info and checkpoints",
           [&o](const std::string &v, std::string &err) {
             return parseChoice("--encoding", v, {"interleaved", "concat"}, err) &&
                    (o.train["encoding"] = v, true);
           });

  t.section("Training and evaluation (models)");
  t.option("--steps", "N", "training steps (default 1000)", count("--steps", "steps", 0));
  t.option("--batch", "B", "prompts per step (default 64)", count("--batch", "batch", 1));
  t.option("--lr", "X", "Adam learning rate (default 1e-4); with a schedule, its peak",
           positive("--lr", "lr"));
  t.option("--lr-schedule", "S",
           "constant (default), cosine or linear: after the warm-up,\n"
           "decay from --lr to --lr-min at the last step",
           key("lr_schedule"));
  t.option("--warmup", "N", "linear warm-up over the first N steps (default 0)",
           count("--warmup", "warmup_steps", 0));
  t.option("--lr-min", "X", "the rate a cosine or linear decay ends at (default 0)",
           positive("--lr-min", "lr_min"));
  t.option("--adam-beta1", "B", "Adam's beta1 (default 0.9)", positive("--adam-beta1", "adam_beta1"));
  t.option("--adam-beta2", "B", "Adam's beta2 (default 0.999)",
           positive("--adam-beta2", "adam_beta2"));
  t.option("--adam-eps", "E", "Adam's epsilon (default 1e-8)", positive("--adam-eps", "adam_eps"));
  t.option("--optimizer", "WHERE",
           "host: Adam in double precision here; compiled: the\n"
           "library's own Adam step on weights and moments kept in\n"
           "its resident buffers (on a GPU they never leave it);\n"
           "auto (default): compiled for GPU libraries, else host",
           key("optimizer"));
  t.option("--cpu-precision", "P",
           "CPU libraries: f32 (default) or bf16, the f32 GEMMs' operands\n"
           "rounded to bfloat16 (f32 accumulation, f32 weights and Adam;\n"
           "attention and layer norms stay f32); needs AVX512_BF16,\n"
           "and runs on AMX tiles where the CPU has them (Intel\n"
           "Xeon: the paper step 2.3-2.4x faster than f32); prints a\n"
           "note where bf16 measures slower than f32",
           key("cpu_precision"));
  t.option("--micro-batch-tokens", "N",
           "CPU libraries: each thread runs its share of a batch in\n"
           "micro-batches of at most N tokens (prompts x 2k), whose\n"
           "gradients are summed: the same step, with activations that\n"
           "stay in the caches (default 1536; 0: the whole share at once)",
           count("--micro-batch-tokens", "micro_batch_tokens", 0));
  t.option("--gpu-graphs", "on|off",
           "GPU libraries: capture each shape's training step (loss,\n"
           "gradient, Adam) once as a CUDA graph and replay it\n"
           "(default on)",
           [&o](const std::string &v, std::string &err) {
             return parseChoice("--gpu-graphs", v, {"on", "off"}, err) &&
                    (o.train["gpu_graphs"] = v == "on", true);
           });
  t.option("--seed", "S", "seed of initialization and data (default 0)",
           [&o](const std::string &v, std::string &err) {
             int64_t x;
             if (!parseInteger("--seed", v, 0, x, err))
               return false;
             o.seed = static_cast<uint64_t>(x);
             o.train["seed"] = x;
             return true;
           });
  t.option("--out", "DIR", "checkpoints, metrics.jsonl, config.json, eval.* (default out/train)",
           key("out"));
  t.flag("--no-curriculum", "train at the final b, d and points from the start",
         [&o] { o.train["curriculum"] = false; });
  t.option("--train-data", "FILE",
           "train on these prompts ('xs' [N,k,d], 'ys' [N,k]; step s\n"
           "takes prompts s*batch.. mod N) at the file's k and d,\n"
           "instead of the task's fresh draws",
           [&o](const std::string &v, std::string &) { return o.train["train_data"] = v, true; });
  t.option("--loop-interval", "N", "the loop curriculum adds 2 to b every N steps (P2: 500)",
           count("--loop-interval", "loop_interval", 1));
  t.option("--curriculum-interval", "N",
           "the dims and points curricula step every N steps\n(P2: 5000)",
           count("--curriculum-interval", "curriculum_interval", 1));
  t.option("--window", "T", "loss over the last T iterations (default: the model's)",
           count("--window", "window", 1));
  t.option("--loops", "N|auto",
           "b for training, evaluation and --predict (default: the model's);\n"
           "with --checkpoint, evaluate at N loops. auto: evaluation and\n"
           "--predict run each prompt until it halts:\n"
           "||Y_t - Y_t-1|| <= tol ||Y_t-1||, at most --max-loops; the\n"
           "report gives loops used per prompt (mean, max, histogram).\n"
           "The default when the model's loop has until(tol, max)",
           [&o](const std::string &v, std::string &err) {
             if (v == "auto")
               return o.train["halting"] = true, true;
             if (!parseInteger("--loops", v, 1, o.loops, err))
               return false;
             o.train["halting"] = false; // a loop count given: run exactly that many
             return true;
           });
  t.option("--tol", "X", "halting tolerance (default: the loop's until tol, else 1e-4)",
           positive("--tol", "halt_tol"));
  t.option("--max-loops", "N", "halting cap (default: the loop's until max, else 500)",
           count("--max-loops", "max_loops", 1));
  t.option("--gradient", "MODE",
           "how training differentiates the loop (default: the IR's\n"
           "gradient(...) clause, else bptt):\n"
           "  bptt                through the last T iterates\n"
           "  implicit[:TOL[:MAX]]  implicit function theorem at Y_b,\n"
           "                      solved to TOL (1e-5), at most MAX (100)\n"
           "  jfb                 Jacobian-free: dL/dY_b only\n"
           "  phantom[:K[:TAU]]   K damped steps (5, damping 0.5)\n"
           "the last three keep one iteration's activations for any b\n"
           "and put the loss on Y_b alone (docs/training.md)",
           [&o](const std::string &v, std::string &err) {
             GradientMode g;
             return parseGradientMode(v, g, err) && (o.train["gradient"] = v, true);
           });
  t.option("--loops-random", "LO:HI",
           "a fresh b per training step, uniform in LO..HI (replaces\n"
           "the loop curriculum)",
           [&o](const std::string &s, std::string &err) {
             size_t c = s.find(':');
             int64_t lo = 0, hi = 0;
             if (c == std::string::npos || !parseInteger("--loops-random", s.substr(0, c), 1, lo, err) ||
                 !parseInteger("--loops-random", s.substr(c + 1), 1, hi, err) || hi < lo) {
               err = "--loops-random expects LO:HI with 1 <= LO <= HI, got '" + s + "'";
               return false;
             }
             o.train["loops_random"] = {lo, hi};
             return true;
           });
  t.option("--config", "FILE.json",
           "settings as JSON (keys as written to DIR/config.json);\n"
           "flags given as well take precedence",
           text(o.config));
  t.flag("--resume", "continue from DIR/checkpoint", [&o] { o.resume = true; });
  t.option("--checkpoint", "C",
           "evaluate (or --predict with) a checkpoint folder, one\n"
           "of its snapshots (C/ckpt-NNNNNNN) or a model\n"
           ".safetensors instead of training",
           text(o.checkpoint));
  t.option("--eval-prompts", "N", "evaluation prompts (default 1280; 0 skips evaluation)",
           count("--eval-prompts", "eval_prompts", 0));
  t.option("--baseline-prompts", "N",
           "prompts for the baselines fitted per position (trees and\n"
           "boosted trees for icl_decision_tree, a 2-layer ReLU net\n"
           "for icl_relu2nn; default 64); least squares, averaging,\n"
           "3-NN and Lasso use every evaluation prompt",
           count("--baseline-prompts", "baseline_prompts", 0));
  t.option("--log-every", "N", "progress line every N steps (default 50)",
           count("--log-every", "log_every", 1));
  t.option("--save-every", "N", "checkpoint every N steps (default 500)",
           count("--save-every", "save_every", 1));
  t.option("--eval-loops", "LIST",
           "with --checkpoint: the loop study, error after each loop\n"
           "count in LIST (1,2,5 or 1:500 or 1:500:10) on fresh prompts,\n"
           "to loops.csv/json/svg (input injection stays stable past the\n"
           "trained b; weight tying drifts)",
           [&o](const std::string &v, std::string &err) {
             return parseLoopList("--eval-loops", v, o.evalLoops, err);
           });
  t.flag("--predict",
         "with --checkpoint, --input prompts.safetensors ('xs' [B,n,d],\n"
         "'ys' [B,n]) and --output preds.safetensors ('preds' [B,n])",
         [&o] { o.predict = true; });
  t.option("--model", "NAME", "which model of the library (default: the first)",
           text(o.modelName));

  t.section("More than one process (data-parallel training)");
  t.text("  mpirun -np N unroll-run MODEL.so --task icl_linear ...   (or srun)\n"
         "                         each rank trains on --batch / N prompts of every step\n"
         "                         (--batch stays the global batch: a multiple of N); the\n"
         "                         gradients are summed over the ranks and every rank takes\n"
         "                         the same Adam step, so N ranks train what one process\n"
         "                         would (to rounding). Rank 0 alone writes checkpoints,\n"
         "                         metrics, progress and the evaluation; --resume may use\n"
         "                         another N. GPU libraries: one GPU per rank (the\n"
         "                         node-local rank picks it). Threads per rank: the\n"
         "                         rank's share of the node's cores ($UNROLL_THREADS wins)");
  t.option("--allreduce", "HOW",
           "auto (default): NCCL on device buffers for GPU libraries\n"
           "where it can be used, else MPI through host memory;\n"
           "mpi; nccl (an error where NCCL cannot be used)",
           key("allreduce"));
  t.option("--rank-timeout", "S",
           "a rank that waits S seconds for the others in a\n"
           "collective ends the job, naming itself (default 600)",
           positive("--rank-timeout", "rank_timeout"));

  t.section("Unrolled optimization (energies with schedule ista / cccp)");
  t.text("  --task sparse_coding   an ista or fista energy's compiled descent on b = A x*:\n"
         "                         A_ij ~ N(0, 1/m) with unit columns, x* Bernoulli(0.1) x\n"
         "                         N(0, 1); NMSE in dB per iteration (default 1000), to\n"
         "                         DIR/sparse_coding.csv/json/svg\n"
         "  --task hopfield        retrieve N stored unit patterns from corrupted queries\n"
         "                         with the compiled CCCP step: retrieval error after one\n"
         "                         step and at convergence, steps, energy; descent counted\n"
         "                         over 10,000 single-query cases; DIR/hopfield.csv/json/svg");
  t.option("--samples", "N", "validation samples / queries (default 1000)",
           integer("--samples", 1, o.samples));
  t.option("--patterns", "N", "Hopfield: stored patterns (default 1000)",
           integer("--patterns", 1, o.patterns));
  t.option("--snr", "DB", "sparse coding: measurement noise at DB dB (default none)",
           [&o](const std::string &v, std::string &err) {
             return parsePositive("--snr", v, o.snrDb, err);
           });
  t.option("--corrupt", "mask|noise",
           "Hopfield queries: half the entries zeroed (default), or\n"
           "noise of the pattern's norm",
           text(o.corrupt));
  t.text("  (--out DIR as above, default out/TASK; --iterations caps the steps)\n"
         "  An energy with trainable parameters (hand-written steps of unroll.lista_step:\n"
         "  LISTA, LISTA-CP(SS), TiLISTA, ALISTA) is trained first on fresh batches\n"
         "  (--batch, default 64), validated every --log-every steps (100), then reported\n"
         "  as NMSE per layer. --lr (5e-4) and --steps (the whole run; default: no cap,\n"
         "  4000 end-to-end) apply; the config file (--config) takes the same keys.\n"
         "  It trains with the library's compiled Adam (@E_adam). Each stage ends with\n"
         "  a checkpoint in DIR/checkpoint; --resume goes on from the last one (the same\n"
         "  settings; a run killed mid-stage redoes that stage, and ends as the\n"
         "  uninterrupted run would). --checkpoint C evaluates trained parameters on\n"
         "  --seed's samples without training; with --predict, --input FILE ('b'\n"
         "  [B, m], the measurements) and --output FILE, it writes their codes after\n"
         "  the last layer ('x' [B, n]) and the dictionary they are codes for ('A').\n"
         "  A learned unrolling written as a model too (the examples' @alista_model: a\n"
         "  loop that reads b as data, encoding(dense)) runs the same way on the model's\n"
         "  entry points, one forward and one backward pass a step; --energy NAME runs\n"
         "  the energy form instead. The two forms share checkpoints.");
  t.option("--dict-seed", "S",
           "sparse coding: seed of the dictionary A (default 0);\n"
           "--seed draws the samples, so a trained unrolling is\n"
           "checked on fresh samples of the same problem",
           count("--dict-seed", "dict_seed", 0));
  t.option("--dictionary", "FILE",
           "sparse coding: the dictionary A from FILE ('A' [m, n]\n"
           "in a .safetensors, F32 or F64, used as it is) instead\n"
           "of --dict-seed's; a checkpoint remembers its values,\n"
           "so evaluating it needs the same file",
           key("dictionary"));
  t.option("--training", "stagewise|end-to-end",
           "stagewise (default, as the LISTA/ALISTA reference\n"
           "code): layer t's new parameters at lr with the loss\n"
           "at layer t, then every parameter of layers <= t at\n"
           "0.2 lr and 0.02 lr; end-to-end: the whole stack at\n"
           "lr, 0.2 lr, 0.02 lr",
           [&o](const std::string &v, std::string &err) {
             return parseChoice("--training", v, {"stagewise", "end-to-end"}, err) &&
                    (o.train["training"] = v, true);
           });
  t.option("--stage-steps", "N", "the most steps of one stage (default 2000)",
           count("--stage-steps", "stage_steps", 1));
  t.option("--held-out", "N",
           "the samples on which each stage chooses its best point\n"
           "(default 1000; drawn apart from the validation ones);\n"
           "each evaluation descends all N",
           count("--held-out", "held_out", 1));
  t.option("--patience", "N",
           "a stage ends after N validations without a 0.01 dB\n"
           "improvement (default 5)",
           count("--patience", "patience", 1));
  t.option("--layer-decay", "R",
           "stagewise: layer j's learning rate is scaled by\n"
           "R^(t - j) in layer t's stages (default 1; the reference\n"
           "code's 0.3 trains ALISTA to -47 dB where 1 gives -60,\n"
           "with --loss l2 and no fine-tune)",
           positive("--layer-decay", "layer_decay"));
  t.option("--loss", "log|l2",
           "a batch's loss at layer t: log, log sum ||x_t - x*||^2\n"
           "(default: each batch's step relative to its own error,\n"
           "so deep layers train further), or l2, 1/2 sum\n"
           "||x_t - x*||^2 (the reference code's)",
           [&o](const std::string &v, std::string &err) {
             return parseChoice("--loss", v, {"l2", "log"}, err) && (o.train["loss"] = v, true);
           });
  t.option("--finetune-steps", "N",
           "stagewise: then the whole stack at the last layer,\n"
           "at --finetune-lr, 0.2 and 0.02 times it, each stage at\n"
           "most N steps (default 1500; 0: none)",
           count("--finetune-steps", "finetune_steps", 0));
  t.option("--finetune-lr", "LR", "the fine-tuning stages' first rate (default 2e-3)",
           positive("--finetune-lr", "finetune_lr"));

  t.section("Energies");
  t.option("--energy", "NAME", "which energy of the library (default: the first)",
           text(o.energy));
  t.option("--iterations", "N", "number of steps (default: the energy's iterations)",
           integer("--iterations", 0, o.iterations));
  t.option("--tokens", "N",
           "number of tokens n of a random input (default 8, or\n"
           "the model's fixed n)",
           integer("--tokens", 1, o.tokens));
  t.option("--dim", "D",
           "feature size d of a random input (default 4, or the\n"
           "model's fixed d)",
           integer("--dim", 1, o.dim));
  t.option("--scale", "S",
           "std of the random input X (default 1.0); X is drawn\n"
           "as |N(0, S²)| when E has an unroll.nonneg term",
           [&o](const std::string &v, std::string &err) {
             return parsePositive("--scale", v, o.scale, err);
           });
  t.option("--input", "FILE",
           ".safetensors with 'X' [n, d] (or [samples, n, d]: one\n"
           "trace per sample, reported as their mean and how many\n"
           "descend monotonically) and, optionally, parameters by\n"
           "name (others are drawn at random)",
           text(o.input));
  t.option("--output", "FILE",
           "write X, the final Y and the parameters\n"
           "(.safetensors, written atomically)",
           text(o.output));
  t.option("--plot", "FILE.svg", "plot E(Y_t) against t", text(o.plot));
  t.flag("--json", "print the result as JSON instead of a table", [&o] { o.json = true; });
  t.flag("-h, --help", "this text", [] {});
  return t;
}

} // namespace

bool unroll::parseOptions(int argc, char **argv, Options &o, std::string &err) {
  for (int i = 1; i < argc; ++i)
    o.commandLine += std::string(argv[i]) + '\n';
  std::vector<std::string> positional;
  if (!table(o).parse(argc, argv, positional, err))
    return false;
  if (positional.size() > 1) {
    err = "unexpected argument '" + positional[1] + "' (one model per run)";
    return false;
  }
  if (positional.empty()) {
    err = "no model given (see --help)";
    return false;
  }
  o.model = positional[0];
  return true;
}

std::string unroll::usageText() {
  Options unused;
  return table(unused).usage();
}
