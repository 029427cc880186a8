//===- Train.h - the training loop ------------------------------*- C++ -*-===//
#ifndef UNROLL_TOOLING_TRAIN_H
#define UNROLL_TOOLING_TRAIN_H

#include "unroll/runtime/ModelRun.h"
#include "unroll/tooling/TrainConfig.h"

#include <string>

namespace unroll {

/// Sets the CPU library's f32 GEMM operand precision ("f32" or "bf16",
/// TrainConfig::cpuPrecision). False with the reason where bf16 cannot run:
/// a GPU or f64 library, a library built before bf16 support, a CPU without
/// AVX512_BF16.
bool applyCpuPrecision(const Model &m, const std::string &precision, std::string &error);

/// Trains (from scratch, or from the checkpoint in out/checkpoint when
/// `resume`), then evaluates. Returns a process exit code.
int train(const Model &m, const ModelRunner &run, TrainConfig cfg, bool resume);

} // namespace unroll

#endif
