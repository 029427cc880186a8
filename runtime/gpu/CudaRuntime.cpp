//===- CudaRuntime.cpp - the mgpu* functions of GPU compiled.so ----------===//
//
// `unroll-opt --lower-to-gpu` produces host code that calls MLIR's GPU
// runtime interface (mgpuModuleLoad, mgpuLaunchKernel, mgpuMemAlloc, ...).
// unroll-translate links this file (as libunroll_cuda_runtime.a) into every
// GPU compiled.so, so the library needs nothing but an NVIDIA driver at run
// time:
//
//  * the driver API is opened with dlopen("libcuda.so.1"); no CUDA headers or
//    toolkit libraries are needed to build or to run;
//  * modules are loaded once per embedded binary and cached, as are kernel
//    handles; one stream per thread carries every launch, copy and GEMM of
//    an entry point (unroll-gpu-async), and the host waits once per call;
//  * buffers are plain device memory (cuMemAlloc) from a pool keyed by size:
//    a buffer freed during a call is reused by a later allocation of the
//    same size without a wait, since all work is ordered on the one stream;
//    memory is never oversubscribed, and an allocation that does not fit
//    after the pool's cached blocks are released is one clear error;
//  * host memory (memref.alloc of the host's deallocation bookkeeping) comes
//    from malloc; _mlir_memref_to_llvm_free tells the two apart.
//
// Errors in the driver are fatal: the message names the call and the CUDA
// error, and the process exits with status 70 (a GPU fault mid-call cannot be
// recovered into a consistent state). `unroll_gpu_init` checks everything up
// front and returns an error string instead, so unroll-run can refuse a GPU
// library on a machine without a GPU with a clear message.
//
//===----------------------------------------------------------------------===//
#include "../common/StateRegistry.h"
#include "Driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

using namespace unroll::gpu;

namespace {

constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int kDefaultSharedBytes = 48 * 1024;

std::mutex gMutex;
Driver gDriver;
bool gInitDone = false;
std::string gInitError; // empty: initialized
CUcontext gContext = nullptr;
CUdevice gDevice = 0;
int gOrdinal = 0;     // which device (unroll_gpu_select_device; modulo the count)
int gDeviceCount = 0; // as the driver reports
std::string gDeviceName;
int gCapability = 0;

std::string errorName(CUresult r) {
  const char *name = nullptr;
  if (gDriver.cuGetErrorName && gDriver.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
    return name;
  return "CUDA error " + std::to_string(r);
}

/// Opens the driver and makes the primary context of the selected device
/// (0 unless unroll_gpu_select_device said otherwise); idempotent.
const std::string &initLocked() {
  if (gInitDone)
    return gInitError;
  gInitDone = true;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    gInitError = std::string("the NVIDIA driver library libcuda.so.1 cannot be loaded (") +
                 (e ? e : "?") + "); this machine has no usable NVIDIA driver";
    return gInitError;
  }
  bool ok = true;
  auto load = [&](auto &fn, const char *name, const char *fallback = nullptr) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn && fallback)
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, fallback));
    if (!fn && ok) {
      gInitError = std::string("libcuda.so.1 lacks ") + name + " (driver too old?)";
      ok = false;
    }
  };
  Driver &d = gDriver;
  load(d.cuInit, "cuInit");
  load(d.cuDeviceGetCount, "cuDeviceGetCount");
  load(d.cuDeviceGet, "cuDeviceGet");
  load(d.cuDeviceGetName, "cuDeviceGetName");
  load(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  load(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load(d.cuCtxSetCurrent, "cuCtxSetCurrent");
  load(d.cuCtxSynchronize, "cuCtxSynchronize");
  load(d.cuModuleLoadData, "cuModuleLoadData");
  load(d.cuModuleGetFunction, "cuModuleGetFunction");
  load(d.cuFuncSetAttribute, "cuFuncSetAttribute");
  load(d.cuLaunchKernel, "cuLaunchKernel");
  load(d.cuStreamCreate, "cuStreamCreate");
  load(d.cuStreamSynchronize, "cuStreamSynchronize");
  load(d.cuMemAlloc, "cuMemAlloc_v2");
  load(d.cuMemFree, "cuMemFree_v2");
  load(d.cuMemGetInfo, "cuMemGetInfo_v2");
  load(d.cuMemcpy, "cuMemcpy");
  load(d.cuMemcpyAsync, "cuMemcpyAsync");
  load(d.cuMemsetD32Async, "cuMemsetD32Async");
  load(d.cuMemsetD16Async, "cuMemsetD16Async");
  load(d.cuEventCreate, "cuEventCreate");
  load(d.cuEventRecord, "cuEventRecord");
  load(d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  load(d.cuGetErrorName, "cuGetErrorName");
  // Optional: graphs (CUDA >= 12 drivers have them all).
  auto optional = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
  };
  optional(d.cuStreamBeginCapture, "cuStreamBeginCapture_v2");
  optional(d.cuStreamEndCapture, "cuStreamEndCapture");
  optional(d.cuGraphInstantiate, "cuGraphInstantiateWithFlags");
  optional(d.cuGraphLaunch, "cuGraphLaunch");
  optional(d.cuGraphExecDestroy, "cuGraphExecDestroy");
  optional(d.cuGraphDestroy, "cuGraphDestroy");
  if (!ok)
    return gInitError;
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    gInitError = "cuInit failed: " + errorName(r) + " (no GPU, or the driver is not loaded)";
    return gInitError;
  }
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS || count == 0) {
    gInitError = "the NVIDIA driver reports no CUDA device";
    return gInitError;
  }
  gDeviceCount = count;
  gOrdinal %= count;
  CUresult r = d.cuDeviceGet(&gDevice, gOrdinal);
  if (r == CUDA_SUCCESS)
    r = d.cuDevicePrimaryCtxRetain(&gContext, gDevice);
  if (r != CUDA_SUCCESS) {
    gInitError =
        "cannot create a CUDA context on device " + std::to_string(gOrdinal) + ": " + errorName(r);
    return gInitError;
  }
  char name[256] = {0};
  d.cuDeviceGetName(name, sizeof name - 1, gDevice);
  gDeviceName = name;
  int major = 0, minor = 0;
  d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, gDevice);
  d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, gDevice);
  gCapability = major * 10 + minor;
  return gInitError;
}

// Caches: one module per embedded binary, one handle per kernel (and its
// name, for the profile), kernels whose shared-memory limit was raised.
std::unordered_map<const void *, CUmodule> gModules;
std::map<std::pair<CUmodule, std::string>, CUfunction> gFunctions;
std::unordered_map<CUfunction, std::string> gFunctionNames;
std::unordered_map<CUfunction, int> gSharedLimit;

//===----------------------------------------------------------------------===//
// The device-memory pool: free blocks by size; live blocks remember theirs.
//===----------------------------------------------------------------------===//

std::multimap<size_t, void *> gFree;
std::unordered_map<void *, size_t> gLive;
size_t gPooledBytes = 0;

/// Gives the cached free blocks back to the driver (after the GPU is done
/// with them); with gMutex held.
void releaseCachedLocked() {
  UNROLL_CU_CHECK(gDriver.cuCtxSynchronize());
  for (auto &[bytes, p] : gFree) {
    UNROLL_CU_CHECK(gDriver.cuMemFree(reinterpret_cast<CUdeviceptr>(p)));
    gPooledBytes -= bytes;
  }
  gFree.clear();
}

[[noreturn]] void outOfMemory(size_t bytes) {
  size_t freeBytes = 0, total = 0;
  gDriver.cuMemGetInfo(&freeBytes, &total);
  fprintf(stderr,
          "unroll GPU runtime: error: out of GPU memory: allocating %zu bytes failed; this "
          "process holds %zu bytes in its pool and the device has %zu of %zu bytes free. Use a "
          "smaller batch or fewer tokens.\n",
          bytes, gPooledBytes, freeBytes, total);
  exit(70);
}

//===----------------------------------------------------------------------===//
// Capture: while a thread's stream is captured, nothing may allocate from
// the driver, copy from pageable memory or wait; what would is recorded and
// the capture is refused at its end.
//===----------------------------------------------------------------------===//

thread_local bool tCapturing = false;
thread_local std::string tCaptureError;
bool gGraphsExist = false; // graphs hold pool blocks: never release them

void breakCapture(const char *why) {
  if (tCaptureError.empty())
    tCaptureError = why;
}

//===----------------------------------------------------------------------===//
// Profile: an event pair around each launch or library call, read when the
// host next waits for the stream.
//===----------------------------------------------------------------------===//

bool gProfiling = false;
struct Pending {
  CUevent start, end;
  std::string name;
};
std::vector<Pending> gPending;
std::vector<std::pair<CUevent, CUevent>> gSpareEvents;
struct KernelTime {
  uint64_t calls = 0;
  double ms = 0;
};
std::map<std::string, KernelTime> gTimes;

/// After a wait: the pending intervals are complete; with gMutex held.
void drainProfileLocked() {
  for (Pending &p : gPending) {
    float ms = 0;
    if (!p.name.empty() && gDriver.cuEventElapsedTime(&ms, p.start, p.end) == CUDA_SUCCESS) {
      KernelTime &t = gTimes[p.name];
      ++t.calls;
      t.ms += ms;
    }
    gSpareEvents.push_back({p.start, p.end});
  }
  gPending.clear();
}

void waitStream(CUstream stream) {
  if (tCapturing)
    return; // the entry point's final wait: replays are waited for by their caller
  UNROLL_CU_CHECK(gDriver.cuStreamSynchronize(stream));
  if (gProfiling) {
    std::lock_guard<std::mutex> lock(gMutex);
    drainProfileLocked();
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Services shared with Blas.cpp (Driver.h).
//===----------------------------------------------------------------------===//

namespace unroll::gpu {

const Driver &driver() { return gDriver; }

[[noreturn]] void fatal(const char *call, CUresult r) {
  fprintf(stderr, "unroll GPU runtime: error: %s failed: %s\n", call, errorName(r).c_str());
  exit(70);
}

void ensureReady() {
  thread_local bool current = false;
  if (current)
    return;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    const std::string &e = initLocked();
    if (!e.empty()) {
      fprintf(stderr, "unroll GPU runtime: error: %s\n", e.c_str());
      exit(70);
    }
  }
  UNROLL_CU_CHECK(gDriver.cuCtxSetCurrent(gContext));
  current = true;
}

CUstream threadStream() {
  thread_local CUstream stream = nullptr;
  if (!stream) {
    ensureReady();
    UNROLL_CU_CHECK(gDriver.cuStreamCreate(&stream, 0));
  }
  return stream;
}

void *deviceAlloc(size_t bytes) {
  ensureReady();
  if (bytes == 0)
    bytes = 1;
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gFree.find(bytes);
  void *p;
  if (it != gFree.end()) {
    p = it->second;
    gFree.erase(it);
  } else {
    if (tCapturing)
      breakCapture("an allocation missed the pool (the call allocated more than its "
                   "uncaptured run before)");
    CUdeviceptr dp = 0;
    CUresult r = gDriver.cuMemAlloc(&dp, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && !gFree.empty() && !gGraphsExist) {
      releaseCachedLocked();
      r = gDriver.cuMemAlloc(&dp, bytes);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
      outOfMemory(bytes);
    if (r != CUDA_SUCCESS)
      fatal("cuMemAlloc", r);
    p = reinterpret_cast<void *>(dp);
    gPooledBytes += bytes;
  }
  gLive[p] = bytes;
  return p;
}

/// Back to the pool; false if `p` is not a live pool block.
static bool poolFree(void *p) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gLive.find(p);
  if (it == gLive.end())
    return false;
  gFree.emplace(it->second, p);
  gLive.erase(it);
  return true;
}

void deviceFree(void *p) {
  if (p)
    poolFree(p);
}

bool profiling() { return gProfiling && !tCapturing; }

bool capturing() { return tCapturing; }

int profileBegin(CUstream stream) {
  std::lock_guard<std::mutex> lock(gMutex);
  std::pair<CUevent, CUevent> ev;
  if (!gSpareEvents.empty()) {
    ev = gSpareEvents.back();
    gSpareEvents.pop_back();
  } else {
    UNROLL_CU_CHECK(gDriver.cuEventCreate(&ev.first, 0));
    UNROLL_CU_CHECK(gDriver.cuEventCreate(&ev.second, 0));
  }
  UNROLL_CU_CHECK(gDriver.cuEventRecord(ev.first, stream));
  gPending.push_back({ev.first, ev.second, std::string()});
  return static_cast<int>(gPending.size()) - 1;
}

void profileEnd(int token, CUstream stream, const char *name) {
  std::lock_guard<std::mutex> lock(gMutex);
  Pending &p = gPending[token];
  UNROLL_CU_CHECK(gDriver.cuEventRecord(p.end, stream));
  p.name = name;
}

} // namespace unroll::gpu

//===----------------------------------------------------------------------===//
// Queried by unroll-run (and any other caller) before the first entry point.
//===----------------------------------------------------------------------===//

extern "C" {

#define UNROLL_EXPORT __attribute__((visibility("default")))

/// nullptr when a GPU is usable, else why not.
UNROLL_EXPORT const char *unroll_gpu_init(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  const std::string &e = initLocked();
  return e.empty() ? nullptr : e.c_str();
}

/// Which device the library will use (one GPU per rank of a data-parallel
/// job: unroll-run passes its node-local rank), taken modulo the device
/// count; only before the first unroll_gpu_init or entry point, else -1.
UNROLL_EXPORT int32_t unroll_gpu_select_device(int32_t ordinal) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gInitDone || ordinal < 0)
    return -1;
  gOrdinal = ordinal;
  return 0;
}

/// The device count and the ordinal in use, after a successful
/// unroll_gpu_init (else 0 and -1).
UNROLL_EXPORT int32_t unroll_gpu_device_count(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  return gInitDone && gInitError.empty() ? gDeviceCount : 0;
}
UNROLL_EXPORT int32_t unroll_gpu_device_ordinal(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  return gInitDone && gInitError.empty() ? gOrdinal : -1;
}

/// The calling thread's stream (a CUstream), with the library's context
/// current: where a caller's own work on the library's buffers (an NCCL
/// all-reduce of the gradient) goes, in order with the entry points'.
UNROLL_EXPORT void *unroll_gpu_stream(void) { return threadStream(); }

/// Waits for the calling thread's stream.
UNROLL_EXPORT void unroll_gpu_sync(void) { waitStream(threadStream()); }

/// "NVIDIA H200 (sm_90)" after a successful unroll_gpu_init.
UNROLL_EXPORT const char *unroll_gpu_device(void) {
  static std::string s;
  std::lock_guard<std::mutex> lock(gMutex);
  s = gDeviceName + " (sm_" + std::to_string(gCapability) + ")";
  if (gDeviceCount > 1)
    s += ", device " + std::to_string(gOrdinal) + " of " + std::to_string(gDeviceCount);
  return s.c_str();
}

/// The device's free memory in bytes (cuMemGetInfo), -1 before a successful
/// unroll_gpu_init: what unroll-run compares a run's estimate with.
UNROLL_EXPORT int64_t unroll_gpu_free_bytes(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gInitDone || !gInitError.empty())
    return -1;
  size_t freeBytes = 0, total = 0;
  if (gDriver.cuMemGetInfo(&freeBytes, &total) != CUDA_SUCCESS)
    return -1;
  return static_cast<int64_t>(freeBytes);
}

/// Device memory held by the pool, in bytes.
UNROLL_EXPORT uint64_t unroll_gpu_pool_bytes(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  return gPooledBytes;
}

/// Starts (or restarts) the per-kernel profile: from now on every launch
/// and library call is timed with a pair of events.
UNROLL_EXPORT void unroll_gpu_profile_start(void) {
  ensureReady();
  std::lock_guard<std::mutex> lock(gMutex);
  gTimes.clear();
  gProfiling = true;
}

/// The profile so far, as a table of the `top` kernels by total time (all
/// work of every call is complete: each entry point waits before returning).
UNROLL_EXPORT const char *unroll_gpu_profile_report(int top) {
  static std::string out;
  std::lock_guard<std::mutex> lock(gMutex);
  drainProfileLocked();
  std::vector<std::pair<std::string, KernelTime>> rows(gTimes.begin(), gTimes.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto &a, const auto &b) { return a.second.ms > b.second.ms; });
  double total = 0;
  uint64_t calls = 0;
  for (auto &[name, t] : rows) {
    total += t.ms;
    calls += t.calls;
  }
  char line[512];
  snprintf(line, sizeof line, "GPU profile: %llu launches, %.3f ms in kernels\n",
           (unsigned long long)calls, total);
  out = line;
  out += "  share     total ms    calls    mean us  kernel\n";
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(top); ++i) {
    const KernelTime &t = rows[i].second;
    snprintf(line, sizeof line, "  %5.1f%%  %10.3f  %7llu  %9.2f  %s\n",
             total > 0 ? 100 * t.ms / total : 0.0, t.ms, (unsigned long long)t.calls,
             1000 * t.ms / t.calls, rows[i].first.c_str());
    out += line;
  }
  return out.c_str();
}

/// A scalar of device memory for host control flow (unroll-gpu-serial-kernels):
/// waits for the stream, then copies it back.
#define UNROLL_READ(NAME, T)                                                                       \
  UNROLL_EXPORT T NAME(uintptr_t addr) {                                                           \
    CUstream s = threadStream();                                                                   \
    T value = 0;                                                                                   \
    if (tCapturing) {                                                                              \
      breakCapture("host control flow reads a device value");                                      \
      return value;                                                                                \
    }                                                                                              \
    UNROLL_CU_CHECK(                                                                               \
        gDriver.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(&value), addr, sizeof(T), s));         \
    waitStream(s);                                                                                 \
    return value;                                                                                  \
  }
UNROLL_READ(unroll_gpu_read_f32, float)
UNROLL_READ(unroll_gpu_read_f64, double)
UNROLL_READ(unroll_gpu_read_i8, int8_t)
UNROLL_READ(unroll_gpu_read_i32, int32_t)
UNROLL_READ(unroll_gpu_read_i64, int64_t)
#undef UNROLL_READ

//===----------------------------------------------------------------------===//
// CUDA graphs of whole calls (docs/gpu.md): the caller runs a call once
// uncaptured (the pool then holds every buffer it needs), captures the next
// one between begin and end, and replays the graph for every later call
// with the same shapes, its inputs and outputs in resident state.
//===----------------------------------------------------------------------===//

/// Whether this driver has graphs.
UNROLL_EXPORT int32_t unroll_gpu_graphs_supported(void) {
  ensureReady();
  const Driver &d = gDriver;
  return d.cuStreamBeginCapture && d.cuStreamEndCapture && d.cuGraphInstantiate &&
         d.cuGraphLaunch && d.cuGraphExecDestroy && d.cuGraphDestroy;
}

UNROLL_EXPORT void unroll_gpu_capture_begin(void) {
  CUstream s = threadStream();
  tCaptureError.clear();
  // Thread-local mode: only this thread's unsafe calls interfere.
  UNROLL_CU_CHECK(gDriver.cuStreamBeginCapture(s, /*CU_STREAM_CAPTURE_MODE_THREAD_LOCAL=*/1));
  tCapturing = true;
}

/// The instantiated graph, or nullptr if the capture was refused
/// (unroll_gpu_capture_error says why).
UNROLL_EXPORT void *unroll_gpu_capture_end(void) {
  CUstream s = threadStream();
  tCapturing = false;
  CUgraph graph = nullptr;
  UNROLL_CU_CHECK(gDriver.cuStreamEndCapture(s, &graph));
  if (!tCaptureError.empty()) {
    if (graph)
      gDriver.cuGraphDestroy(graph);
    return nullptr;
  }
  CUgraphExec exec = nullptr;
  UNROLL_CU_CHECK(gDriver.cuGraphInstantiate(&exec, graph, 0));
  UNROLL_CU_CHECK(gDriver.cuGraphDestroy(graph));
  std::lock_guard<std::mutex> lock(gMutex);
  gGraphsExist = true;
  return exec;
}

UNROLL_EXPORT const char *unroll_gpu_capture_error(void) { return tCaptureError.c_str(); }

/// Queues a replay on the calling thread's stream (the caller's next
/// unroll_state_read waits for it).
UNROLL_EXPORT void unroll_gpu_graph_launch(void *exec) {
  CUstream s = threadStream();
  int token = profiling() ? profileBegin(s) : -1;
  UNROLL_CU_CHECK(gDriver.cuGraphLaunch(exec, s));
  if (token >= 0)
    profileEnd(token, s, "CUDA graph (whole call)");
}

UNROLL_EXPORT void unroll_gpu_graph_destroy(void *exec) {
  if (exec)
    UNROLL_CU_CHECK(gDriver.cuGraphExecDestroy(exec));
}

//===----------------------------------------------------------------------===//
// MLIR's GPU runtime interface (the calls gpu-to-llvm emits, MLIR 19).
//===----------------------------------------------------------------------===//

CUmodule mgpuModuleLoad(void *data, size_t /*size*/) {
  ensureReady();
  std::lock_guard<std::mutex> lock(gMutex);
  CUmodule &m = gModules[data];
  if (!m)
    UNROLL_CU_CHECK(gDriver.cuModuleLoadData(&m, data));
  return m;
}

/// PTX (--gpu-format=isa): the driver JIT-compiles it; cached the same way.
CUmodule mgpuModuleLoadJIT(void *data, int /*optLevel*/) { return mgpuModuleLoad(data, 0); }

void mgpuModuleUnload(CUmodule) {} // cached for the life of the process

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  std::lock_guard<std::mutex> lock(gMutex);
  CUfunction &f = gFunctions[{module, name}];
  if (!f) {
    UNROLL_CU_CHECK(gDriver.cuModuleGetFunction(&f, module, name));
    gFunctionNames[f] = name;
  }
  return f;
}

void mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                      intptr_t blockX, intptr_t blockY, intptr_t blockZ, int32_t smem,
                      CUstream stream, void **params, void **extra, size_t /*paramsCount*/) {
  ensureReady();
  if (smem > kDefaultSharedBytes) {
    // Above 48 KB a kernel must opt in to its dynamic shared memory.
    std::lock_guard<std::mutex> lock(gMutex);
    int &limit = gSharedLimit[function];
    if (limit < smem) {
      UNROLL_CU_CHECK(gDriver.cuFuncSetAttribute(
          function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
      limit = smem;
    }
  }
  int token = profiling() ? profileBegin(stream) : -1;
  UNROLL_CU_CHECK(gDriver.cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                                         smem, stream, params, extra));
  if (token >= 0) {
    std::string name;
    {
      std::lock_guard<std::mutex> lock(gMutex);
      name = gFunctionNames[function];
    }
    profileEnd(token, stream, name.c_str());
  }
}

/// The calling thread's stream, for every async region of every call.
CUstream mgpuStreamCreate() { return threadStream(); }

void mgpuStreamDestroy(CUstream) {} // the thread's stream is reused

void mgpuStreamSynchronize(CUstream stream) { waitStream(stream); }

void *mgpuMemAlloc(uint64_t bytes, CUstream /*stream*/, bool isHostShared) {
  if (isHostShared) {
    fprintf(stderr, "unroll GPU runtime: error: host-shared allocations are not supported "
                    "(the GPU lowering never emits them)\n");
    exit(70);
  }
  return deviceAlloc(bytes);
}

void mgpuMemFree(void *ptr, CUstream /*stream*/) { deviceFree(ptr); }

void mgpuMemcpy(void *dst, void *src, size_t bytes, CUstream stream) {
  ensureReady();
  if (tCapturing) {
    // The only copies an entry point makes are its arguments' staging.
    breakCapture("an argument is not resident state (it would be copied from host memory)");
    return;
  }
  UNROLL_CU_CHECK(gDriver.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                                        reinterpret_cast<CUdeviceptr>(src), bytes, stream));
}

void mgpuMemset32(void *dst, unsigned value, size_t count, CUstream stream) {
  ensureReady();
  UNROLL_CU_CHECK(
      gDriver.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count, stream));
}

void mgpuMemset16(void *dst, unsigned short value, size_t count, CUstream stream) {
  ensureReady();
  UNROLL_CU_CHECK(
      gDriver.cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value, count, stream));
}

void mgpuSetDefaultDevice(int32_t) {}

//===----------------------------------------------------------------------===//
// memref.alloc / memref.dealloc of the host code (use-generic-functions).
// Only the host's own bookkeeping is allocated here (buffers that kernels
// use are gpu.alloc, i.e. mgpuMemAlloc); a free may be of either.
//===----------------------------------------------------------------------===//

void *_mlir_memref_to_llvm_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return aligned_alloc(alignment, rounded ? rounded : alignment);
}

void _mlir_memref_to_llvm_free(void *ptr) {
  if (ptr && !poolFree(ptr))
    free(ptr);
}

//===----------------------------------------------------------------------===//
// Resident training state (docs/abi.md): weights, gradient and Adam moments
// that a caller keeps for a whole run, in device memory. The staging code of
// every entry point uses them in place (unroll_state_resident), and the
// caller moves data in and out only with unroll_state_write/read, i.e. at
// start-up and at checkpoints.
//===----------------------------------------------------------------------===//

namespace {
unroll::StateRegistry &states() {
  static auto *r = new unroll::StateRegistry;
  return *r;
}
} // namespace

UNROLL_EXPORT void *unroll_state_alloc(size_t bytes) {
  ensureReady();
  if (bytes == 0)
    bytes = 1;
  CUdeviceptr dp = 0;
  CUresult r = gDriver.cuMemAlloc(&dp, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    outOfMemory(bytes);
  if (r != CUDA_SUCCESS)
    fatal("cuMemAlloc", r);
  CUstream s = threadStream();
  UNROLL_CU_CHECK(gDriver.cuMemsetD32Async(dp, 0, (bytes + 3) / 4, s));
  waitStream(s);
  states().add(reinterpret_cast<void *>(dp), bytes);
  return reinterpret_cast<void *>(dp);
}

UNROLL_EXPORT void unroll_state_free(void *p) {
  if (p && states().remove(p)) {
    UNROLL_CU_CHECK(gDriver.cuCtxSynchronize());
    UNROLL_CU_CHECK(gDriver.cuMemFree(reinterpret_cast<CUdeviceptr>(p)));
  }
}

UNROLL_EXPORT int32_t unroll_state_resident(uintptr_t addr) { return states().contains(addr); }

UNROLL_EXPORT uint64_t unroll_state_hits(void) { return states().hits(); }

UNROLL_EXPORT void unroll_state_write(void *state, const void *host, size_t bytes) {
  // Ordered before the next call on this stream; from pageable memory the
  // copy returns once the source has been read, so no wait is needed.
  CUstream s = threadStream();
  UNROLL_CU_CHECK(gDriver.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(state),
                                        reinterpret_cast<CUdeviceptr>(host), bytes, s));
}

UNROLL_EXPORT void unroll_state_read(void *host, const void *state, size_t bytes) {
  // Everything any thread queued must be done before the host reads.
  ensureReady();
  UNROLL_CU_CHECK(gDriver.cuCtxSynchronize());
  UNROLL_CU_CHECK(gDriver.cuMemcpy(reinterpret_cast<CUdeviceptr>(host),
                                   reinterpret_cast<CUdeviceptr>(state), bytes));
}

} // extern "C"
