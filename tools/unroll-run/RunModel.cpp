//===- RunModel.cpp - unroll-run on model libraries -----------------------===//
//
// Training (alone or data-parallel), evaluation of a checkpoint, the loop
// study, prediction, and the energy along a loop that descends one.
//
//===----------------------------------------------------------------------===//
#include "Options.h"

#include "unroll/runtime/Energy.h"
#include "unroll/runtime/Model.h"
#include "unroll/runtime/ModelRun.h"
#include "unroll/tooling/Checkpoint.h"
#include "unroll/tooling/Distributed.h"
#include "unroll/tooling/Evaluate.h"
#include "unroll/tooling/OptimizationTasks.h"
#include "unroll/tooling/Plot.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Safetensors.h"
#include "unroll/tooling/Tasks.h"
#include "unroll/tooling/Train.h"

#include "unroll/runtime/ModelInfo.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

namespace key = ::unroll::info;

using namespace unroll;

namespace {

/// What to write when an energy library is asked to learn in context: a
/// model whose loop descends its (first) energy, with its sizes filled in.
std::string howToDeclareModel(const Model &m, const std::string &task) {
  const nlohmann::json &e = m.info()[key::kEnergies][0];
  std::string name = e.value(key::kName, "E"), elem = m.info().value(key::kElementType, "f32");
  std::string D = e[key::kDim].is_number() ? std::to_string(e[key::kDim].get<int64_t>()) : "D";
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
} // namespace

int unroll::runModel(const Options &o, const Model &m, const std::string &task,
                     bool energyOfModel) {
  std::string err;
  const nlohmann::json *mi = findModel(m, o.modelName, err);
  if (!mi && m.info().contains(key::kEnergies) && !m.info().contains(key::kModels))
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
      return die(m.path() + ": model @" + (*mi)[key::kName].get<std::string>() +
                 " does not descend an energy (its loop has no unroll.descend)");
    std::vector<double> theta;
    if (!o.checkpoint.empty()) {
      if (!loadParameters(o.checkpoint, *mi, theta, err))
        return die(err);
    } else {
      Rng rng(cfg.seed);
      initParameters((*mi)[key::kParams], run.numParams(), theta, [&] { return rng.normal(); },
                     0.02);
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
