//===- ResidentState.cpp - a training run's state in the library's memory -===//
#include "unroll/runtime/ResidentState.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace unroll;

ResidentState::~ResidentState() {
  resetGraph(step_);
  resetGraph(train_);
  resetGraph(forward_);
  for (void *p : {theta, grad, m, v})
    if (p)
      free_ ? free_(p) : ::free(p);
  for (void *p : extra_)
    free_ ? free_(p) : ::free(p);
}

void *ResidentState::allocate(size_t bytes) {
  void *p = alloc_ ? alloc_(bytes) : aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  if (p)
    extra_.push_back(p);
  return p;
}

void ResidentState::resetGraph(StepGraph &g) {
  if (g.exec && graphDestroy_)
    graphDestroy_(g.exec);
  for (void *p : g.buffers)
    if (p && free_)
      free_(p);
  g = StepGraph();
}

bool ResidentState::init(const Model &lib, int64_t n, bool isF32, std::string &error) {
  size = n;
  f32 = isF32;
  alloc_ = reinterpret_cast<void *(*)(size_t)>(lib.symbol("unroll_state_alloc"));
  free_ = reinterpret_cast<void (*)(void *)>(lib.symbol("unroll_state_free"));
  write_ =
      reinterpret_cast<void (*)(void *, const void *, size_t)>(lib.symbol("unroll_state_write"));
  read_ = reinterpret_cast<void (*)(void *, const void *, size_t)>(lib.symbol("unroll_state_read"));
  hits_ = reinterpret_cast<uint64_t (*)()>(lib.symbol("unroll_state_hits"));
  graphsSupported_ = reinterpret_cast<int32_t (*)()>(lib.symbol("unroll_gpu_graphs_supported"));
  captureBegin_ = reinterpret_cast<void (*)()>(lib.symbol("unroll_gpu_capture_begin"));
  captureEnd_ = reinterpret_cast<void *(*)()>(lib.symbol("unroll_gpu_capture_end"));
  captureError_ = reinterpret_cast<const char *(*)()>(lib.symbol("unroll_gpu_capture_error"));
  graphLaunch_ = reinterpret_cast<void (*)(void *)>(lib.symbol("unroll_gpu_graph_launch"));
  graphDestroy_ = reinterpret_cast<void (*)(void *)>(lib.symbol("unroll_gpu_graph_destroy"));
  if (!captureBegin_ || !captureEnd_ || !captureError_ || !graphDestroy_)
    graphLaunch_ = nullptr;
  if (!alloc_ || !free_ || !write_ || !read_) {
    if (lib.gpu()) {
      error = lib.path() + ": the GPU library lacks the unroll_state_* functions (rebuild it "
                           "with this unroll-translate)";
      return false;
    }
    alloc_ = nullptr, free_ = nullptr, write_ = nullptr, read_ = nullptr, hits_ = nullptr;
  }
  size_t bytes = size_t(std::max<int64_t>(n, 1)) * (f32 ? 4 : 8);
  for (void **p : {&theta, &grad, &m, &v}) {
    *p = alloc_ ? alloc_(bytes) : aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!*p) {
      error = "cannot allocate " + std::to_string(bytes) + " bytes of training state";
      return false;
    }
  }
  return true;
}

void ResidentState::writeVector(void *dst, const std::vector<double> &src) {
  size_t bytes = size * (f32 ? 4 : 8);
  std::vector<float> f;
  std::vector<double> d;
  const void *host;
  if (f32) {
    f.assign(size, 0.0f);
    std::copy(src.begin(), src.begin() + std::min<int64_t>(size, src.size()), f.begin());
    host = f.data();
  } else {
    d.assign(size, 0.0);
    std::copy(src.begin(), src.begin() + std::min<int64_t>(size, src.size()), d.begin());
    host = d.data();
  }
  write_ ? write_(dst, host, bytes) : (void)memcpy(dst, host, bytes);
}

void ResidentState::readVector(std::vector<double> &dst, const void *src) const {
  size_t bytes = size * (f32 ? 4 : 8);
  dst.resize(size);
  if (f32) {
    std::vector<float> f(size);
    read_ ? read_(f.data(), src, bytes) : (void)memcpy(f.data(), src, bytes);
    std::copy(f.begin(), f.end(), dst.begin());
  } else {
    read_ ? read_(dst.data(), src, bytes) : (void)memcpy(dst.data(), src, bytes);
  }
}

void ResidentState::upload(const std::vector<double> &th, const std::vector<double> &mm,
                           const std::vector<double> &vv) {
  writeVector(theta, th);
  writeVector(m, mm); // empty: zeros
  writeVector(v, vv);
}

void ResidentState::download(std::vector<double> &th, std::vector<double> &mm,
                             std::vector<double> &vv) const {
  readVector(th, theta);
  readVector(mm, m);
  readVector(vv, v);
}

