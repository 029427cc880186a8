//===- ResidentState.h - a training run's state in the library's memory -*- C++ -*-===//
//
// Part of the runtime library: weights, gradient and Adam moments allocated
// by the compiled library (device memory for GPU libraries), and the CUDA
// graphs that replay a shape's calls on them.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_RESIDENTSTATE_H
#define UNROLL_RUNTIME_RESIDENTSTATE_H

#include "unroll/runtime/Model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace unroll {

/// Weights, gradient and Adam moments of a training run in memory from the
/// library's own allocator (unroll_state_alloc, docs/abi.md), in the
/// library's element type. A GPU library's entry points use such buffers in
/// place: the state stays on the GPU for the whole run, and crosses to the
/// host only through upload / download (start, checkpoints, the end).
class ResidentState {
public:
  ResidentState() = default;
  ResidentState(const ResidentState &) = delete;
  ResidentState &operator=(const ResidentState &) = delete;
  ~ResidentState();
  /// Allocates four vectors of `n` elements of 4 (f32) or 8 (f64) bytes.
  bool init(const Model &m, int64_t n, bool f32, std::string &error);
  /// theta, m, v from the host (m, v empty: zeros).
  void upload(const std::vector<double> &theta, const std::vector<double> &m,
              const std::vector<double> &v);
  void download(std::vector<double> &theta, std::vector<double> &m, std::vector<double> &v) const;
  /// Entry-point arguments used in place so far (the library's count).
  uint64_t residentHits() const { return hits_ ? hits_() : 0; }

  /// Another buffer of `bytes` from the library's allocator (device memory
  /// on a GPU), freed with the state; nullptr if it cannot be had.
  void *allocate(size_t bytes);

  /// One of the four buffers from / to a host vector (converted).
  void writeVector(void *dst, const std::vector<double> &src);
  void readVector(std::vector<double> &dst, const void *src) const;

  void *theta = nullptr, *grad = nullptr, *m = nullptr, *v = nullptr;
  int64_t size = 0;
  bool f32 = false;

  /// GPU libraries: run the training step (loss, gradient and Adam), its
  /// loss and gradient alone, and the forward on resident weights, as one
  /// CUDA graph per shape each (captured on the second call of a shape,
  /// replayed after); on by default where the driver has graphs.
  void setGraphs(bool on) { graphsWanted_ = on; }
  bool graphsUsable() const {
    return graphsWanted_ && graphLaunch_ && graphsSupported_ && graphsSupported_();
  }
  struct GraphStats {
    uint64_t captured = 0, replayed = 0, direct = 0; // training steps (or loss and gradient)
    uint64_t forwardReplayed = 0;                    // forward calls replayed
    std::string refused;                             // why the last capture was refused, if one was
  };
  const GraphStats &graphStats() const { return graphStats_; }

private:
  friend class ModelRunner;
  /// A call's inputs and outputs in resident buffers, and its graph.
  struct StepGraph {
    std::vector<int64_t> key; // the shape: batch, points, dim, loops (, window)
    std::vector<void *> buffers;
    void *exec = nullptr;
    bool warm = false, refused = false;
  };
  void resetGraph(StepGraph &g);
  /// Runs `call` for the shape `key` with resident buffers of `bytes`
  /// (allocated when the shape changes): directly the first time, captured
  /// the second, replayed after. Returns false if it ran directly.
  template <typename Fill, typename Call>
  bool graphed(StepGraph &g, const std::vector<int64_t> &key, const std::vector<size_t> &bytes,
               Fill fill, Call call);
  bool graphsWanted_ = true;
  std::vector<void *> extra_; // allocate()'s buffers
  StepGraph step_, train_, forward_;
  GraphStats graphStats_;
  int32_t (*graphsSupported_)() = nullptr;
  void (*captureBegin_)() = nullptr;
  void *(*captureEnd_)() = nullptr;
  const char *(*captureError_)() = nullptr;
  void (*graphLaunch_)(void *) = nullptr;
  void (*graphDestroy_)(void *) = nullptr;

  void *(*alloc_)(size_t) = nullptr;
  void (*free_)(void *) = nullptr;
  void (*write_)(void *, const void *, size_t) = nullptr;
  void (*read_)(void *, const void *, size_t) = nullptr;
  uint64_t (*hits_)() = nullptr;
};

template <typename Fill, typename Call>
bool ResidentState::graphed(StepGraph &g, const std::vector<int64_t> &key,
                            const std::vector<size_t> &bytes, Fill fill, Call call) {
  if (g.key != key) { // a new shape: new buffers, and a new graph later
    resetGraph(g);
    g.key = key;
    for (size_t b : bytes)
      g.buffers.push_back(alloc_(b));
  }
  fill(g.buffers);
  if (g.exec) {
    graphLaunch_(g.exec);
    return true;
  }
  if (!g.warm || g.refused) {
    // The first call of a shape runs directly: the pool then holds every
    // buffer the call needs, so its capture allocates nothing.
    call(g.buffers);
    g.warm = true;
    return false;
  }
  captureBegin_();
  call(g.buffers);
  g.exec = captureEnd_();
  if (!g.exec) {
    g.refused = true;
    graphStats_.refused = captureError_();
    call(g.buffers);
    return false;
  }
  ++graphStats_.captured;
  graphLaunch_(g.exec);
  return true;
}

} // namespace unroll

#endif
