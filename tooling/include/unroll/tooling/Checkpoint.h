//===- Checkpoint.h - training checkpoints ---------------------*- C++ -*-===//
//
// A checkpoint folder holds step directories and a `latest` pointer:
//
//   DIR/ckpt-0000500/model.safetensors      parameters, F32, P2's names
//   DIR/ckpt-0000500/optimizer.safetensors  F64 master weights and Adam m, v
//   DIR/ckpt-0000500/state.json             step, RNG state, config
//   DIR/latest                              "ckpt-0000500"
//
// A save writes a new step directory (every file fsynced), then replaces
// `latest` atomically, then removes older step directories: a crash at any
// point leaves a complete checkpoint that `latest` names.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_CHECKPOINT_H
#define UNROLL_TOOLING_CHECKPOINT_H

#include "unroll/tooling/Adam.h"

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>
#include <vector>

namespace unroll {

struct TrainState {
  int64_t step = 0;
  std::string rng;
  Adam adam;
  std::vector<double> theta;
};

bool saveCheckpoint(const std::string &dir, const nlohmann::json &modelInfo,
                    const TrainState &state, const nlohmann::json &config, std::string &error);

/// Loads the checkpoint `latest` names in `dir`.
bool loadCheckpoint(const std::string &dir, const nlohmann::json &modelInfo, TrainState &state,
                    nlohmann::json &config, std::string &error);

/// The step folder that `dir`/latest names (dir/ckpt-NNNNNNN).
bool latestStep(const std::string &dir, std::string &stepDir, std::string &error);

/// Parameters only, from a checkpoint folder or a model .safetensors file
/// (P2's names; extra tensors are an error, so are missing ones).
bool loadParameters(const std::string &path, const nlohmann::json &modelInfo,
                    std::vector<double> &theta, std::string &error);

/// The "config" a checkpoint was saved with (state.json), from a checkpoint
/// folder or one of its snapshots; `stepDir` names the snapshot read. An
/// empty object where the snapshot has none.
bool checkpointConfig(const std::string &path, nlohmann::json &config, std::string &stepDir,
                      std::string &error);
/// The parameters of one snapshot (DIR/ckpt-NNNNNNN): its f64 master copy
/// (optimizer.safetensors) where it has one, else model.safetensors.
bool loadSnapshotParameters(const std::string &stepDir, const nlohmann::json &modelInfo,
                            std::vector<double> &theta, std::string &error);
/// Writes `text` to `path` atomically (temp, fsync, rename).
bool writeFileAtomic(const std::string &path, const std::string &text, std::string &error);

/// Creates `dir` and its parents; false with a message if it cannot.
bool makeDirs(const std::string &dir, std::string &error);

/// Opens a run's metrics.jsonl (one JSON row per step, "step" counting from
/// 1) for appending: a fresh file, or on a resume (`keepThrough` > 0) the
/// rows of steps up to keepThrough, the checkpoint's step, rewritten
/// atomically, so that the rows a killed run wrote after its checkpoint
/// are not there twice.
bool openMetrics(const std::string &path, int64_t keepThrough, std::ofstream &out,
                 std::string &error);

} // namespace unroll

#endif
