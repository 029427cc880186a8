//===- OptimizationTasks.h - the unrolled-optimization tasks ----*- C++ -*-===//
//
// `unroll-run energy.so --task sparse_coding` and `--task hopfield`: the
// standard synthetic problems of the two families, run through an energy's
// compiled descent (@E_descend), with their metrics, a CSV, a JSON report
// and an SVG plot.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_OPTIMIZATIONTASKS_H
#define UNROLL_TOOLING_OPTIMIZATIONTASKS_H

#include "unroll/runtime/Model.h"

#include <cstdint>
#include <string>

namespace unroll {

struct OptimizationOptions {
  uint64_t seed = 0;            // validation samples, training batches, initialization
  uint64_t dictSeed = 0;        // sparse coding: the dictionary A (the problem itself)
  std::string dictionary;       // sparse coding: A from this file ('A' [m, n]) instead
  std::string checkpoint;       // sparse coding: evaluate these trained parameters
  bool resume = false;          // sparse coding: go on from out/checkpoint
  bool predict = false;         // sparse coding, with checkpoint: codes for `input`
  std::string input, output;    // --predict: measurements 'b' [B, m] in, codes 'x' [B, n] out
  int64_t iterations = -1;      // -1: the task's default
  int64_t samples = -1;         // sparse coding: validation samples; Hopfield: queries
  int64_t patterns = -1;        // Hopfield: stored patterns N
  double snrDb = -1;            // sparse coding: measurement noise (< 0: noiseless)
  std::string corrupt = "mask"; // Hopfield queries: "mask" (half the entries) or "noise"
  std::string out;              // folder for CSV, JSON and SVG ("" = none)
  // Learned unrollings (energies with trainable parameters), trained with
  // Adam on fresh batches.
  // - "stagewise" (the reference code's schedule): for each layer t, its new
  //   parameters at lr, then every parameter of layers <= t at 0.2 lr and
  //   0.02 lr (layer j's rate times layerDecay^(t - j): 1 here, 0.3 in the
  //   reference code), each stage at most stageSteps steps; then, with
  //   finetuneSteps > 0, the whole stack at the last layer at finetuneLr,
  //   0.2 and 0.02 times it, each at most finetuneSteps steps.
  // - "end-to-end": the whole stack at lr, 0.2 lr, 0.02 lr.
  // A stage ends when the held-out NMSE has not improved for `patience`
  // evaluations; the run, after `steps`. A batch's loss at depth t is "log",
  // log Σ ‖x_t − x*‖² (each batch's gradient relative to its own error, so
  // that Adam's moments are not ruled by the rare batches whose codes the
  // unrolling cannot recover), or "l2", ½ Σ ‖x_t − x*‖² (the reference
  // code's).
  std::string training = "stagewise", loss = "log";
  int64_t steps = INT64_MAX, stageSteps = 2000, batch = 64, evalEvery = 100, patience = 5;
  int64_t finetuneSteps = 1500;
  // The held-out samples on which each stage chooses its best point (a
  // stream of their own, apart from the reported validation samples).
  int64_t heldOut = 1000;
  double lr = 5e-4, layerDecay = 1.0, finetuneLr = 2e-3;
  bool json = false; // print the JSON report instead of the table
};

/// An ISTA or FISTA energy's compiled descent on b = A x* (+ noise): NMSE in
/// dB per iteration, energy increases (ISTA), FISTA's rate constant. An energy with
/// trainable parameters (a learned unrolling: LISTA-CP, TiLISTA, ALISTA) is
/// trained first on fresh samples, then reported per layer. Returns the exit
/// status; `error` says why on failure.
int sparseCodingStudy(const Model &m, const nlohmann::json &energy, const OptimizationOptions &o,
                      std::string &error);

/// Retrieval of stored patterns from corrupted queries with the compiled
/// CCCP step: error after one step and at convergence, steps, energy trace,
/// and the descent count over 10,000 single-query cases.
int hopfieldStudy(const Model &m, const nlohmann::json &energy, const OptimizationOptions &o,
                  std::string &error);

} // namespace unroll

#endif
