//===- RunEnergy.cpp - unroll-run on energy libraries ---------------------===//
//
// --task energy on an energy (its trace from Y_0 = X, random or --input),
// and --task sparse_coding / hopfield (the unrolled-optimization studies).
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
#include <map>
#include <random>
#include <string>

namespace key = ::unroll::info;

using namespace unroll;

namespace {

/// X and the parameters: from --input where given, else N(0, std²). A 3-d
/// X [samples, n, d] leaves all samples in in.x and their count in `samples`.
/// An energy's trace holds the token matrix and a few n x n pair matrices
/// (weights, distances, their masks), and the host keeps X, Y and one
/// energy per iteration: refused before anything is allocated when that
/// exceeds the available memory (--tokens 10^12, --iterations 10^11).
bool energyFits(const Options &o, const nlohmann::json &e, double n, double d, std::string &err) {
  double elem = e.value(key::kElementType, "f64") == "f32" ? 4 : 8;
  double iters = o.iterations >= 0 ? (double)o.iterations : (double)e.value(key::kIterations, 1);
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
    int64_t fn = fixed(key::kTokens), fd = fixed(key::kDim);
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
      e[key::kParams], e.value(key::kNumParams, (int64_t)0), in.theta, [&] { return normal(rng); },
      0.1);
  for (const auto &p : e[key::kParams]) {
    std::string name = p[key::kName];
    int64_t off = p[key::kOffset], numel = 1;
    std::vector<int64_t> shape = p[key::kShape];
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
} // namespace

int unroll::runOptimization(const Options &o, const Model &m, const std::string &task) {
  std::string err;
  // A learned unrolling written as a model (examples/alista.mlir's
  // @alista_model) runs as the energy it descends, on the model's entry
  // points; --energy NAME runs the energy form instead.
  nlohmann::json ofModel;
  const nlohmann::json *e = nullptr;
  if (!o.energy.empty() && !o.modelName.empty())
    return die("--energy and --model both pick what --task " + task +
               " runs: give one (--energy: the energy form of a learned unrolling, --model: "
               "its model form)");
  if (m.info().value(key::kKind, "") == "model" && task == "sparse_coding" && o.energy.empty()) {
    const nlohmann::json *mi = findModel(m, o.modelName, err);
    if (!mi || !unrollingOfModel(*mi, ofModel, err))
      return die(m.path() + ": " + err);
    e = &ofModel;
  } else {
    e = findEnergy(m, o.energy, err);
  }
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
  // The settings: the config file's keys, then the flags over them.
  static const std::map<std::string, std::string> known = {
      {"out", "string"},        {"steps", "count"},       {"batch", "integer"},
      {"seed", "count"},        {"dict_seed", "count"},   {"lr", "number"},
      {"log_every", "integer"}, {"training", "string"},   {"stage_steps", "integer"},
      {"patience", "integer"},  {"layer_decay", "number"},  {"loss", "string"},
      {"finetune_steps", "count"}, {"finetune_lr", "number"}, {"dictionary", "string"},
      {"held_out", "integer"}};
  auto check = [&](const nlohmann::json &j, const std::string &file) -> std::string {
    for (auto &[k, v] : j.items()) {
      std::string flag = "--" + k;
      std::replace(flag.begin(), flag.end(), '_', '-');
      std::string where = file.empty() ? flag : file + ": key '" + k + "'";
      auto it = known.find(k);
      if (it == known.end())
        return where + " does not apply to --task " + task;
      const std::string &kind = it->second;
      bool ok = kind == "string"    ? v.is_string()
                : kind == "count"   ? v.is_number_integer() && v.get<int64_t>() >= 0
                : kind == "integer" ? v.is_number_integer() && v.get<int64_t>() > 0
                                    : v.is_number() && v.get<double>() > 0;
      if (k == "training")
        ok = v == "stagewise" || v == "end-to-end";
      if (k == "loss")
        ok = v == "l2" || v == "log";
      if (!ok)
        return where + " must be " +
               (k == "training"   ? std::string("\"stagewise\" or \"end-to-end\"")
                : k == "loss"     ? std::string("\"l2\" or \"log\"")
                : kind == "count" ? std::string("an integer >= 0")
                                  : "a positive " + kind) +
               ", got " + v.dump();
    }
    return "";
  };
  nlohmann::json settings = nlohmann::json::object();
  if (!o.config.empty()) {
    std::ifstream f(o.config);
    if (!f)
      return die(o.config + ": cannot open");
    settings = nlohmann::json::parse(f, nullptr, false);
    if (!settings.is_object())
      return die(o.config + ": not a JSON object");
    if (std::string bad = check(settings, o.config); !bad.empty())
      return die(bad);
  }
  if (std::string bad = check(o.train, ""); !bad.empty())
    return die(bad);
  for (auto &[k, v] : o.train.items())
    settings[k] = v;
  opt.out = settings.value("out", "out/" + task);
  opt.seed = settings.value("seed", opt.seed);
  opt.dictSeed = settings.value("dict_seed", opt.dictSeed);
  opt.dictionary = settings.value("dictionary", opt.dictionary);
  if (!opt.dictionary.empty() && settings.contains("dict_seed"))
    return die("--dictionary reads the dictionary from " + opt.dictionary +
               "; --dict-seed draws one: pass one of them");
  if (!opt.dictionary.empty() && task == "hopfield")
    return die("--dictionary does not apply to --task hopfield (it stores random patterns)");
  opt.checkpoint = o.checkpoint;
  opt.resume = o.resume;
  opt.predict = o.predict;
  opt.input = o.input;
  opt.output = o.output;
  if (task == "hopfield" && (o.resume || o.predict))
    return die(std::string(o.resume ? "--resume" : "--predict") +
               " does not apply to --task hopfield (its energy has no trained parameters)");
  if (o.predict && o.checkpoint.empty())
    return die("--predict needs --checkpoint DIR: the trained parameters to predict with");
  if (o.resume && !o.checkpoint.empty())
    return die("--resume goes on training from OUT/checkpoint; --checkpoint evaluates a trained "
               "one: pass one of them");
  opt.training = settings.value("training", opt.training);
  opt.steps = settings.value("steps", opt.training == "end-to-end" ? int64_t(4000) : opt.steps);
  opt.stageSteps = settings.value("stage_steps", opt.stageSteps);
  opt.batch = settings.value("batch", opt.batch);
  opt.lr = settings.value("lr", opt.lr);
  opt.layerDecay = settings.value("layer_decay", opt.layerDecay);
  opt.loss = settings.value("loss", opt.loss);
  opt.finetuneSteps = settings.value("finetune_steps", opt.finetuneSteps);
  opt.finetuneLr = settings.value("finetune_lr", opt.finetuneLr);
  if (opt.training == "end-to-end") {
    if (settings.contains("finetune_steps") && opt.finetuneSteps > 0)
      return die("--finetune-steps follows the stages of --training stagewise; end-to-end "
                 "training already trains the whole stack (give --steps instead)");
    opt.finetuneSteps = 0;
  }
  opt.patience = settings.value("patience", opt.patience);
  opt.heldOut = settings.value("held_out", opt.heldOut);
  opt.evalEvery = settings.value("log_every", opt.evalEvery);
  int rc = task == "hopfield" ? hopfieldStudy(m, *e, opt, err) : sparseCodingStudy(m, *e, opt, err);
  if (rc != 0) {
    die(err);
    return rc;
  }
  return 0;
}

int unroll::runEnergy(const Options &o, const Model &m) {
  std::string err;
  const nlohmann::json *e = findEnergy(m, o.energy, err);
  if (!e)
    return die(err);
  if (!e->contains(key::kTrace) || !(*e)[key::kTrace].is_string())
    return die("energy @" + e->value(key::kName, "") + " (schedule " +
               e->value(key::kSchedule, "") +
               ") reads its input X as data, not as Y_0: run it with --task " +
               (e->value(key::kSchedule, "") == "cccp" ? "hopfield" : "sparse_coding"));
  EnergyInputs in;
  int64_t samples = 1;
  if (!makeInputs(o, *e, in, samples, err))
    return die(err);
  int64_t iters = o.iterations >= 0 ? o.iterations : e->value(key::kIterations, 1);
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
  const double ulp = m.info().value(key::kElementType, "") == "f32" ? 1.2e-7 : 2.2e-16;
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
    for (const auto &p : (*e)[key::kParams]) {
      std::vector<int64_t> shape = p[key::kShape];
      Tensor t{shape, {}};
      int64_t off = p[key::kOffset];
      t.data.assign(in.theta.begin() + off, in.theta.begin() + off + t.numel());
      out[p[key::kName].get<std::string>()] = t;
    }
    if (!writeSafetensors(o.output, out, "F64", err))
      return die(err);
  }

  if (!o.plot.empty()) {
    PlotSpec spec;
    spec.title = "energy @" + (*e)[key::kName].get<std::string>() + " (" +
                 e->value(key::kSchedule, "") + ", rho " + e->value("rho", "") + ")";
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
    nlohmann::json j{{"energy", (*e)[key::kName]},
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
         (*e)[key::kName].get<std::string>().c_str(), e->value(key::kSchedule, "?").c_str(),
         e->value("attention", "?").c_str(), e->value("rho", "?").c_str(),
         e->value("mask", "?").c_str(), (long long)in.n, (long long)in.d,
         m.info().value(key::kElementType, "?").c_str(), (unsigned long long)o.seed);
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
