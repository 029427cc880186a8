//===- Model.h - loading compiled.so ---------------------------*- C++ -*-===//
#ifndef UNROLL_RUNTIME_MODEL_H
#define UNROLL_RUNTIME_MODEL_H

#include "unroll/runtime/ModelInfo.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace unroll {

/// The ABI version this runtime speaks (docs/abi.md).
constexpr int kAbiVersion = info::kAbiVersion;

/// A loaded compiled.so: its handle, ABI version and model info.
class Model {
public:
  /// Loads `path`; on failure returns false and sets `error` to a message
  /// that names the file and what is wrong with it.
  /// A GPU library (model info "target": "gpu") is refused when no GPU can
  /// be used, unless `useDevice` is false (only the model info is read).
  /// `device` chooses the GPU (modulo the count; one per rank of a
  /// data-parallel job).
  bool load(const std::string &path, std::string &error, bool useDevice = true, int device = 0);
  ~Model();

  const nlohmann::json &info() const { return info_; }
  const std::string &infoText() const { return infoText_; }
  /// Looks up an exported symbol (nullptr when absent).
  void *symbol(const std::string &name) const;
  /// The C-interface wrapper `_mlir_ciface_<name>` of an entry point.
  void *entry(const std::string &name) const { return symbol("_mlir_ciface_" + name); }
  const std::string &path() const { return path_; }
  /// Built by --lower-to-gpu (model info "target": "gpu").
  bool gpu() const { return info_.value("target", "cpu") == "gpu"; }
  /// A GPU library's free device memory in bytes; -1 for CPU libraries,
  /// before the device is set up, or from a library without the query.
  double deviceFreeBytes() const {
    auto fn = gpu() ? reinterpret_cast<int64_t (*)()>(symbol("unroll_gpu_free_bytes")) : nullptr;
    return fn ? static_cast<double>(fn()) : -1.0;
  }
  /// The device a GPU library runs on, e.g. "NVIDIA H200 (sm_90)".
  const std::string &device() const { return device_; }

private:
  void *handle_ = nullptr;
  std::string path_;
  std::string infoText_;
  std::string device_;
  nlohmann::json info_;
};

/// Checks that every key of a library's model info that the runtime and the
/// tools read has its type and range (names are strings, counts integers,
/// parameter shapes and offsets within num_params, ...); false with a
/// message naming `path` and the key otherwise. Model::load calls it, so a
/// malformed or hostile info is refused before anything reads it.
bool validateModelInfo(const nlohmann::json &info, const std::string &path, std::string &error);

/// Sets each parameter of `params` (a model info "params" array) in theta
/// (resized to `numParams`) by its init rule (docs/abi.md): "normal" draws
/// std · normal() (std from the entry, else `defaultStd`), "zeros", "ones",
/// "constant" (every entry "value").
void initParameters(const nlohmann::json &params, int64_t numParams, std::vector<double> &theta,
                    const std::function<double()> &normal, double defaultStd);

} // namespace unroll

#endif
