//===- StateRegistry.h - which buffers hold resident training state -*- C++ -*-===//
//
// Shared by the CPU and GPU runtimes linked into compiled.so. A caller that
// keeps weights, gradient and optimizer moments for a whole run allocates
// them with unroll_state_alloc (docs/abi.md). The entry points of GPU
// libraries copy their memref arguments into device-visible buffers on entry
// ("staging", unroll-gpu-stage-arguments), except arguments that lie inside
// such an allocation: those are used in place, so the state never leaves the
// device between calls. This registry answers "does this address lie inside
// a state allocation?" for the generated code (unroll_state_resident).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_COMMON_STATEREGISTRY_H
#define UNROLL_RUNTIME_COMMON_STATEREGISTRY_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace unroll {

class StateRegistry {
public:
  void add(const void *p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    ranges_[reinterpret_cast<uintptr_t>(p)] = bytes;
  }
  /// The size of the allocation that starts at `p` (0 when none), removed.
  size_t remove(const void *p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.find(reinterpret_cast<uintptr_t>(p));
    if (it == ranges_.end())
      return 0;
    size_t n = it->second;
    ranges_.erase(it);
    return n;
  }
  /// Whether `addr` lies inside a registered allocation.
  bool contains(uintptr_t addr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.upper_bound(addr);
    if (it == ranges_.begin())
      return false;
    --it;
    bool in = addr < it->first + it->second;
    hits_ += in;
    return in;
  }
  /// How many lookups found a registered allocation (arguments used in
  /// place instead of staged).
  uint64_t hits() {
    std::lock_guard<std::mutex> lock(mutex_);
    return hits_;
  }

private:
  std::mutex mutex_;
  std::map<uintptr_t, size_t> ranges_; // start -> bytes
  uint64_t hits_ = 0;
};

} // namespace unroll

#endif
