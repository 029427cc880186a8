//===- Driver.h - the CUDA driver as the GPU runtime sees it ----*- C++ -*-===//
//
// Internal to libunroll_cuda_runtime.a (CudaRuntime.cpp, Blas.cpp): the few
// driver API types and entry points used (cuda.h, CUDA >= 12), opened with
// dlopen, and the runtime services both files share.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_GPU_DRIVER_H
#define UNROLL_RUNTIME_GPU_DRIVER_H

#include <cstddef>
#include <cstdint>

namespace unroll::gpu {

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;
using CUgraph = void *;
using CUgraphExec = void *;
using CUdeviceptr = unsigned long long;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemGetInfo)(size_t *, size_t *);
  CUresult (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  // CUDA graphs (optional: a driver without them runs every call directly).
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuGraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
};

/// The opened driver (valid after ensureReady()).
const Driver &driver();

/// Initialized driver and context current on this thread; exits with status
/// 70 and the reason if there is no usable GPU.
void ensureReady();

/// The calling thread's stream: every launch, copy and library call of an
/// entry point goes to it, so stream order is program order.
CUstream threadStream();

/// Exits with status 70, naming the call and the CUDA error.
[[noreturn]] void fatal(const char *call, CUresult r);

/// Device memory from the runtime's pool (stream-ordered reuse).
void *deviceAlloc(size_t bytes);
void deviceFree(void *p);

/// True while the calling thread's stream is being captured into a graph.
bool capturing();

/// Profiling (unroll_gpu_profile_start): true while on. `profileBegin`
/// returns a token that `profileEnd` closes with the work's name.
bool profiling();
int profileBegin(CUstream stream);
void profileEnd(int token, CUstream stream, const char *name);

#define UNROLL_CU_CHECK(call)                                                                      \
  do {                                                                                             \
    ::unroll::gpu::CUresult r_ = (call);                                                           \
    if (r_ != ::unroll::gpu::CUDA_SUCCESS)                                                         \
      ::unroll::gpu::fatal(#call, r_);                                                             \
  } while (0)

} // namespace unroll::gpu

#endif
