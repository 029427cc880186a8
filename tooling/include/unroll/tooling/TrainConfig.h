//===- TrainConfig.h - every setting of a training run ----------*- C++ -*-===//
#ifndef UNROLL_TOOLING_TRAINCONFIG_H
#define UNROLL_TOOLING_TRAINCONFIG_H

#include "unroll/tooling/Tasks.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace unroll {

/// Every setting of a training run. Defaults come from the model (b, T, d)
/// and P2; `unroll-run --help` documents each flag.
struct TrainConfig {
  std::string task = "icl_linear";
  /// How prompts become tokens: the library's ("interleaved" or "concat",
  /// model info "encoding"); finish() refuses another one.
  std::string encoding;
  int64_t steps = 1000, batch = 64;
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8; // Adam
  /// The learning rate's schedule: linear warm-up from lr / warmupSteps to
  /// lr over the first warmupSteps steps, then "constant", or "cosine" /
  /// "linear" decay to lrMin at the last step.
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0;
  double lrMin = 0;
  /// The rate of step `step` (0 for the first).
  double lrAt(int64_t step) const;
  uint64_t seed = 0;
  std::string out = "out/train";
  bool curriculum = true;
  int64_t loops = 0, window = 0;           // b and T (0: the model's)
  int64_t loopInc = 2, loopInterval = 500; // b(step) = min(T + 2 floor(step/500), b)
  /// The dims and points curricula; a field left at -1 (not given) is
  /// filled by finish() from the model and the others: dims end at d and
  /// start at min(5, end), points end at 2 end_dims + 1 (5 end_dims + 1 for
  /// trees and ReLU nets) and start at the task's first count.
  Curriculum dims{-1, -1, -1, -1}, points{-1, -1, -1, -1};
  int64_t curriculumInterval = 0; // their interval (0: P2's 5000)
  double noise = 0.0;
  const TaskSpec *spec = nullptr; // set by finish()
  int64_t logEvery = 50, saveEvery = 500;
  int64_t evalPrompts = 1280, evalLoops = 0, evalBatch = 64;
  /// Where Adam runs: "host" (double precision, in unroll-run), "compiled"
  /// (the library's @M_adam on resident state: on a GPU, weights and moments
  /// never leave it) or "auto" (compiled for GPU libraries, else host).
  std::string optimizer = "auto";
  /// CPU libraries: the f32 GEMMs' operand precision, "f32" or "bf16"
  /// (bfloat16 operands, f32 accumulation and f32 weights; needs
  /// AVX512_BF16). Applied with applyCpuPrecision.
  std::string cpuPrecision = "f32";
  /// CPU libraries: each thread's share of a batch runs in micro-batches of
  /// about this many tokens (ModelRunner::setMicroBatchTokens; 0: the whole
  /// share at once; -1: the runner's default, 1536).
  int64_t microBatchTokens = -1;
  /// GPU libraries with the compiled optimizer: each shape's loss-and-
  /// gradient call captured once as a CUDA graph and replayed.
  bool gpuGraphs = true;
  /// How the loop is differentiated: "" (the model's choice), or bptt,
  /// implicit[:TOL[:MAX]], jfb, phantom[:K[:TAU]] (docs/training.md).
  std::string gradient;
  /// Training prompts from a file ('xs' [N, k, d], 'ys' [N, k]) instead of
  /// the task's generator: step s takes prompts s·batch … (mod N), at the
  /// file's k and d ("" = the task's).
  std::string trainData;
  /// A fresh b per step, uniform in [lo, hi] (0: off; replaces the loop
  /// curriculum).
  int64_t loopsRandomLo = 0, loopsRandomHi = 0;
  /// Evaluation and --predict run each prompt until it halts (@M_solve):
  /// relative change <= haltTol, at most maxLoops iterations. Defaults from
  /// the loop's until(...) clause, which also turns halting on.
  bool halting = false, haltingGiven = false;
  double haltTol = 0;   // 0: the loop's until(tol), else 1e-4
  int64_t maxLoops = 0; // 0: the loop's until(max), else 500
  /// Prompts on which the costly baselines (trees, boosting, the network)
  /// are fitted, at every 5th position beyond 41 points.
  int64_t baselinePrompts = 64;
  /// Data-parallel runs (several ranks): how the gradients meet, "auto"
  /// (NCCL on device buffers for GPU libraries where it can be used, else
  /// MPI), "mpi" (through host memory) or "nccl"; and how long a rank waits
  /// for the others in a collective before it ends the job.
  std::string allreduce = "auto";
  double rankTimeout = 600;

  nlohmann::json toJson() const;
  /// Applies the keys present in `j`; unknown keys and bad values are errors.
  bool apply(const nlohmann::json &j, std::string &error);
  /// Fills unset values from the model info and checks the whole config.
  bool finish(const nlohmann::json &modelInfo, std::string &error);
};

} // namespace unroll

#endif
