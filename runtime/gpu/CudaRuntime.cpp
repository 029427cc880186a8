//===- CudaRuntime.cpp - the mgpu* functions of GPU compiled.so ----------===//
//
// `unroll-opt --lower-to-gpu` produces host code that calls MLIR's GPU
// runtime interface (mgpuModuleLoad, mgpuLaunchKernel, ...) and allocates
// through _mlir_memref_to_llvm_alloc/free. unroll-translate links this file
// (as libunroll_cuda_runtime.a) into every GPU compiled.so, so the library
// needs nothing but an NVIDIA driver at run time:
//
//  * the driver API is opened with dlopen("libcuda.so.1"); no CUDA headers or
//    toolkit libraries are needed to build or to run;
//  * modules are loaded once per embedded binary and cached, as are kernel
//    handles; one stream per thread is reused for every launch;
//  * every allocation is CUDA managed memory (reachable from kernels and from
//    the little host code that touches buffers), taken from a pool keyed by
//    size, so the activations of one call reuse the device memory of the
//    previous call instead of calling cuMemAllocManaged again.
//
// Errors in the driver are fatal: the message names the call and the CUDA
// error, and the process exits with status 70 (a GPU fault mid-call cannot be
// recovered into a consistent state). `unroll_gpu_init` checks everything up
// front and returns an error string instead, so unroll-run can refuse a GPU
// library on a machine without a GPU with a clear message.
//
//===----------------------------------------------------------------------===//
#include "../common/StateRegistry.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// The few driver API types and entry points used (cuda.h, CUDA >= 11).
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUdeviceptr = unsigned long long;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr unsigned CU_MEM_ATTACH_GLOBAL = 1;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*cuMemsetD32)(CUdeviceptr, unsigned, size_t);
  CUresult (*cuMemsetD16)(CUdeviceptr, unsigned short, size_t);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuMemAdvise)(CUdeviceptr, size_t, int, CUdevice);
};

std::mutex gMutex;
Driver gDriver;
bool gInitDone = false;
std::string gInitError; // empty: initialized
CUcontext gContext = nullptr;
CUdevice gDevice = 0;
std::string gDeviceName;
int gCapability = 0;

std::string errorName(CUresult r) {
  const char *name = nullptr;
  if (gDriver.cuGetErrorName && gDriver.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
    return name;
  return "CUDA error " + std::to_string(r);
}

[[noreturn]] void fatal(const char *call, CUresult r) {
  fprintf(stderr, "unroll GPU runtime: error: %s failed: %s\n", call, errorName(r).c_str());
  exit(70);
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS)                                                                        \
      fatal(#call, r_);                                                                            \
  } while (0)

/// Opens the driver and makes the primary context of device 0; idempotent.
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
  auto load = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
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
  load(d.cuModuleLoadData, "cuModuleLoadData");
  load(d.cuModuleGetFunction, "cuModuleGetFunction");
  load(d.cuLaunchKernel, "cuLaunchKernel");
  load(d.cuStreamCreate, "cuStreamCreate");
  load(d.cuStreamSynchronize, "cuStreamSynchronize");
  load(d.cuMemAllocManaged, "cuMemAllocManaged");
  load(d.cuMemFree, "cuMemFree_v2");
  load(d.cuMemcpy, "cuMemcpy");
  load(d.cuMemsetD32, "cuMemsetD32_v2");
  load(d.cuMemsetD16, "cuMemsetD16_v2");
  load(d.cuCtxSynchronize, "cuCtxSynchronize");
  load(d.cuGetErrorName, "cuGetErrorName");
  // Optional (an advice only): the v1 signature, kept by every driver since CUDA 8.
  d.cuMemAdvise = reinterpret_cast<decltype(d.cuMemAdvise)>(dlsym(lib, "cuMemAdvise"));
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
  CUresult r = d.cuDeviceGet(&gDevice, 0);
  if (r == CUDA_SUCCESS)
    r = d.cuDevicePrimaryCtxRetain(&gContext, gDevice);
  if (r != CUDA_SUCCESS) {
    gInitError = "cannot create a CUDA context on device 0: " + errorName(r);
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

/// Every mgpu* entry: initialized driver, context current on this thread.
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
  CHECK(gDriver.cuCtxSetCurrent(gContext));
  current = true;
}

// Caches: one module per embedded binary, one handle per kernel.
std::unordered_map<const void *, CUmodule> gModules;
std::map<std::pair<CUmodule, std::string>, CUfunction> gFunctions;

// The managed-memory pool: free blocks by size; live blocks remember theirs.
std::multimap<size_t, void *> gFree;
std::unordered_map<void *, size_t> gLive;
size_t gPooledBytes = 0;

void *poolAlloc(size_t bytes) {
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
    CUdeviceptr dp = 0;
    CHECK(gDriver.cuMemAllocManaged(&dp, bytes, CU_MEM_ATTACH_GLOBAL));
    p = reinterpret_cast<void *>(dp);
    gPooledBytes += bytes;
  }
  gLive[p] = bytes;
  return p;
}

void poolFree(void *p) {
  if (!p)
    return;
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gLive.find(p);
  if (it == gLive.end())
    return; // not ours (never happens for compiler-generated frees)
  gFree.emplace(it->second, p);
  gLive.erase(it);
}

CUstream threadStream() {
  thread_local CUstream stream = nullptr;
  if (!stream)
    CHECK(gDriver.cuStreamCreate(&stream, 0));
  return stream;
}

} // namespace

//===----------------------------------------------------------------------===//
// Queried by unroll-run (and any other caller) before the first entry point.
//===----------------------------------------------------------------------===//

extern "C" {

/// nullptr when a GPU is usable, else why not.
__attribute__((visibility("default"))) const char *unroll_gpu_init(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  const std::string &e = initLocked();
  return e.empty() ? nullptr : e.c_str();
}

/// "NVIDIA H200 (sm_90)" after a successful unroll_gpu_init.
__attribute__((visibility("default"))) const char *unroll_gpu_device(void) {
  static std::string s;
  std::lock_guard<std::mutex> lock(gMutex);
  s = gDeviceName + " (sm_" + std::to_string(gCapability) + ")";
  return s.c_str();
}

/// Managed memory held by the pool, in bytes.
__attribute__((visibility("default"))) uint64_t unroll_gpu_pool_bytes(void) {
  std::lock_guard<std::mutex> lock(gMutex);
  return gPooledBytes;
}

//===----------------------------------------------------------------------===//
// MLIR's GPU runtime interface (the calls gpu-to-llvm emits, MLIR 19).
//===----------------------------------------------------------------------===//

CUmodule mgpuModuleLoad(void *data, size_t /*size*/) {
  ensureReady();
  std::lock_guard<std::mutex> lock(gMutex);
  CUmodule &m = gModules[data];
  if (!m)
    CHECK(gDriver.cuModuleLoadData(&m, data));
  return m;
}

/// PTX (--gpu-format=isa): the driver JIT-compiles it; cached the same way.
CUmodule mgpuModuleLoadJIT(void *data, int /*optLevel*/) { return mgpuModuleLoad(data, 0); }

void mgpuModuleUnload(CUmodule) {} // cached for the life of the process

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  std::lock_guard<std::mutex> lock(gMutex);
  CUfunction &f = gFunctions[{module, name}];
  if (!f)
    CHECK(gDriver.cuModuleGetFunction(&f, module, name));
  return f;
}

void mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                      intptr_t blockX, intptr_t blockY, intptr_t blockZ, int32_t smem,
                      CUstream stream, void **params, void **extra, size_t /*paramsCount*/) {
  ensureReady();
  CHECK(gDriver.cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY, blockZ, smem, stream,
                               params, extra));
}

CUstream mgpuStreamCreate() {
  ensureReady();
  return threadStream();
}

void mgpuStreamDestroy(CUstream) {} // the thread's stream is reused

void mgpuStreamSynchronize(CUstream stream) { CHECK(gDriver.cuStreamSynchronize(stream)); }

void *mgpuMemAlloc(uint64_t bytes, CUstream stream, bool /*isHostShared*/) {
  if (stream)
    CHECK(gDriver.cuStreamSynchronize(stream));
  return poolAlloc(bytes);
}

void mgpuMemFree(void *ptr, CUstream stream) {
  if (stream)
    CHECK(gDriver.cuStreamSynchronize(stream));
  poolFree(ptr);
}

void mgpuMemcpy(void *dst, void *src, size_t bytes, CUstream stream) {
  ensureReady();
  if (stream)
    CHECK(gDriver.cuStreamSynchronize(stream));
  CHECK(gDriver.cuMemcpy(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                         bytes));
}

void mgpuMemset32(void *dst, unsigned value, size_t count, CUstream stream) {
  ensureReady();
  if (stream)
    CHECK(gDriver.cuStreamSynchronize(stream));
  CHECK(gDriver.cuMemsetD32(reinterpret_cast<CUdeviceptr>(dst), value, count));
}

void mgpuMemset16(void *dst, unsigned short value, size_t count, CUstream stream) {
  ensureReady();
  if (stream)
    CHECK(gDriver.cuStreamSynchronize(stream));
  CHECK(gDriver.cuMemsetD16(reinterpret_cast<CUdeviceptr>(dst), value, count));
}

void mgpuSetDefaultDevice(int32_t) {}

//===----------------------------------------------------------------------===//
// memref.alloc / memref.dealloc of the host code (use-generic-functions).
// Kernels may run on the buffer, so every allocation is managed memory, and
// a free waits for the kernels still using it (launches are synchronous, so
// the wait is a formality kept for safety).
//===----------------------------------------------------------------------===//

void *_mlir_memref_to_llvm_alloc(size_t bytes) { return poolAlloc(bytes); }

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  // cuMemAllocManaged returns 256-byte (or better) aligned memory.
  (void)alignment;
  return poolAlloc(bytes);
}

void _mlir_memref_to_llvm_free(void *ptr) { poolFree(ptr); }

//===----------------------------------------------------------------------===//
// Resident training state (docs/abi.md): weights, gradient and Adam moments
// that a caller keeps for a whole run. They are managed memory whose
// preferred location is the GPU; the staging code of every entry point uses
// them in place (unroll_state_resident), and the caller moves data in and
// out only with unroll_state_write/read (cuMemcpy: no page migration back to
// the host), i.e. at start-up and at checkpoints.
//===----------------------------------------------------------------------===//

namespace {
unroll::StateRegistry &states() {
  static auto *r = new unroll::StateRegistry;
  return *r;
}
} // namespace

#define UNROLL_EXPORT __attribute__((visibility("default")))

UNROLL_EXPORT void *unroll_state_alloc(size_t bytes) {
  ensureReady();
  if (bytes == 0)
    bytes = 1;
  CUdeviceptr dp = 0;
  CHECK(gDriver.cuMemAllocManaged(&dp, bytes, CU_MEM_ATTACH_GLOBAL));
  if (gDriver.cuMemAdvise) // keep the pages on the GPU; failure only costs speed
    (void)gDriver.cuMemAdvise(dp, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, gDevice);
  CHECK(gDriver.cuMemsetD32(dp, 0, bytes / 4));
  states().add(reinterpret_cast<void *>(dp), bytes);
  return reinterpret_cast<void *>(dp);
}

UNROLL_EXPORT void unroll_state_free(void *p) {
  if (p && states().remove(p))
    CHECK(gDriver.cuMemFree(reinterpret_cast<CUdeviceptr>(p)));
}

UNROLL_EXPORT int32_t unroll_state_resident(uintptr_t addr) { return states().contains(addr); }

UNROLL_EXPORT uint64_t unroll_state_hits(void) { return states().hits(); }

UNROLL_EXPORT void unroll_state_write(void *state, const void *host, size_t bytes) {
  ensureReady();
  CHECK(gDriver.cuMemcpy(reinterpret_cast<CUdeviceptr>(state), reinterpret_cast<CUdeviceptr>(host),
                         bytes));
}

UNROLL_EXPORT void unroll_state_read(void *host, const void *state, size_t bytes) {
  ensureReady();
  CHECK(gDriver.cuMemcpy(reinterpret_cast<CUdeviceptr>(host), reinterpret_cast<CUdeviceptr>(state),
                         bytes));
}

} // extern "C"
