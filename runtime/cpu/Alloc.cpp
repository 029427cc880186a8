//===- Alloc.cpp - the buffer pool of CPU compiled.so ---------------------===//
//
// The CPU pipeline routes memref.alloc / memref.dealloc through
// _mlir_memref_to_llvm_alloc / _free (finalize-memref-to-llvm with generic
// functions). A training step allocates and frees the same few hundred
// buffers every iteration; with plain malloc, the large ones are fresh mmap'd
// pages each time, and the page faults and zeroing cost more than the
// arithmetic (measured: 35% of a small-config training step). This pool keeps
// freed blocks by exact size and hands them out again, so after the first
// call a library runs without system allocations.
//
// One mutex guards the pool: calls from unroll-run's threads allocate per op,
// not per element, so it is uncontended in practice. Blocks are 64-byte
// aligned (cache lines, AVX-512 loads).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

struct Pool {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void *>> free; // by rounded size
  std::unordered_map<void *, size_t> live;
  size_t liveBytes = 0, peakBytes = 0; // of blocks handed out and not yet freed
  void took(void *b, size_t size) {
    live[b] = size;
    liveBytes += size;
    peakBytes = std::max(peakBytes, liveBytes);
  }
  ~Pool() {
    for (auto &[size, blocks] : free)
      for (void *p : blocks)
        ::free(p);
  }
};

Pool &pool() {
  static Pool *p = new Pool; // never destroyed: libraries may free late
  return *p;
}

void *allocate(size_t bytes) {
  size_t size = ((bytes ? bytes : 1) + 63) / 64 * 64;
  Pool &p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    auto it = p.free.find(size);
    if (it != p.free.end() && !it->second.empty()) {
      void *b = it->second.back();
      it->second.pop_back();
      p.took(b, size);
      return b;
    }
  }
  void *b = aligned_alloc(64, size);
  if (!b)
    return nullptr;
  std::lock_guard<std::mutex> lock(p.mutex);
  p.took(b, size);
  return b;
}

void release(void *b) {
  if (!b)
    return;
  Pool &p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.live.find(b);
  if (it == p.live.end()) {
    ::free(b); // not from the pool
    return;
  }
  p.free[it->second].push_back(b);
  p.liveBytes -= it->second;
  p.live.erase(it);
}

} // namespace

extern "C" {
void *_mlir_memref_to_llvm_alloc(size_t bytes) { return allocate(bytes); }
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  // Pool blocks are 64-byte aligned; larger alignments are never requested
  // by unroll's lowering, but honour them anyway.
  if (alignment > 64)
    return aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  return allocate(bytes);
}
void _mlir_memref_to_llvm_free(void *p) { release(p); }

/// The most bytes of compiled-code buffers live at once since the last
/// reset (tests measure an entry point's working memory with it).
__attribute__((visibility("default"))) uint64_t unroll_alloc_peak_bytes(void) {
  std::lock_guard<std::mutex> lock(pool().mutex);
  return pool().peakBytes;
}
__attribute__((visibility("default"))) void unroll_alloc_reset_peak(void) {
  std::lock_guard<std::mutex> lock(pool().mutex);
  pool().peakBytes = pool().liveBytes;
}
}

//===----------------------------------------------------------------------===//
// Resident training state (docs/abi.md). On the CPU every buffer is
// "device-visible"; the registry still answers for the staging code that
// --lower-to-gpu-emulated generates, so the CPU oracle takes the same
// in-place path as a GPU library.
//===----------------------------------------------------------------------===//

#include "../common/StateRegistry.h"
#include "unroll/runtime/CpuKernels.h"

#include <cstring>

namespace {
unroll::StateRegistry &states() {
  static auto *r = new unroll::StateRegistry;
  return *r;
}
} // namespace

#define UNROLL_EXPORT extern "C" __attribute__((visibility("default")))

UNROLL_EXPORT void *unroll_state_alloc(size_t bytes) {
  size_t size = ((bytes ? bytes : 1) + 63) / 64 * 64;
  void *p = aligned_alloc(64, size);
  if (p) {
    memset(p, 0, size);
    states().add(p, size);
  }
  return p;
}
UNROLL_EXPORT void unroll_state_free(void *p) {
  if (p && states().remove(p))
    ::free(p);
}
UNROLL_EXPORT int32_t unroll_state_resident(uintptr_t addr) { return states().contains(addr); }
UNROLL_EXPORT uint64_t unroll_state_hits(void) { return states().hits(); }
UNROLL_EXPORT void unroll_state_write(void *state, const void *host, size_t bytes) {
  memcpy(state, host, bytes);
}
UNROLL_EXPORT void unroll_state_read(void *host, const void *state, size_t bytes) {
  memcpy(host, state, bytes);
}
