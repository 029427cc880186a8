//===- Evaluate.h - evaluation, loop and energy studies, prediction -*- C++ -*-===//
#ifndef UNROLL_TOOLING_EVALUATE_H
#define UNROLL_TOOLING_EVALUATE_H

#include "unroll/runtime/ModelRun.h"
#include "unroll/tooling/TrainConfig.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace unroll {

/// Evaluates parameters on fresh prompts against the baselines; writes
/// eval.csv / eval.json / eval.svg into cfg.out and prints a table.
int evaluate(const ModelRunner &run, const std::vector<double> &theta, const TrainConfig &cfg);

/// Loop study: error after each of `loops` (sorted, >= 1) iterations, on
/// fresh prompts of the final curriculum size, at the last prompt position
/// (with 5-95% bootstrap bands) and averaged over positions; writes
/// loops.csv / loops.json / loops.svg into cfg.out and prints a table.
int loopStudy(const ModelRunner &run, const std::vector<double> &theta, const TrainConfig &cfg,
              const std::vector<int64_t> &loops);

/// For a model whose loop descends an energy: the energy E(Y_t; P) of every
/// iterate on fresh prompts (up to 256 of the evaluation's), how often an
/// iteration's steps increase it and how many prompts descend monotonically;
/// writes energy.csv / energy.json / energy.svg into cfg.out and prints a
/// table. Returns a process exit code.
int energyStudy(const ModelRunner &run, const std::vector<double> &theta, const TrainConfig &cfg);

/// 5% and 95% quantiles, over `resamples` bootstrap resamples of the prompts,
/// of the mean of errs[prompt, i] / norm, for each position i < k.
void bootstrapBands(const std::vector<double> &errs, int64_t prompts, int64_t k, double norm,
                    int64_t resamples, uint64_t seed, std::vector<double> &lo,
                    std::vector<double> &hi);

/// --predict: xs [B, n, d] and ys [B, n] in `input`, preds [B, n] to `output`.
/// With cfg.halting, each prompt runs until it halts and the output also
/// holds 'loops' [B], the iterations each used.
int predict(const ModelRunner &run, const std::vector<double> &theta, const std::string &input,
            const std::string &output, int64_t loops, const TrainConfig &cfg);

/// Loops used per prompt under halting: mean, max and a histogram, for the
/// JSON reports and the tables.
nlohmann::json loopsUsedJson(const std::vector<double> &loops, int64_t maxLoops);

} // namespace unroll

#endif
