// REQUIRES: cuda-toolkit
// The whole GPU pipeline on an energy with a user-written rho (its rho' built
// by symbolic differentiation runs inside a kernel), with PTX embedded
// (format=isa needs libdevice but not ptxas).
//
// RUN: unroll-opt %s --lower-to-gpu="format=isa cuda-path=%cuda_home" | FileCheck %s
// RUN: unroll-opt %s --lower-to-gpu="chip=sm_80 format=isa cuda-path=%cuda_home" | FileCheck %s --check-prefix=SM80
// RUN: unroll-opt %s --lower-to-gpu="format=isa cuda-path=%cuda_home" | FileCheck %s --check-prefix=ALLOC
// ALLOC: llvm.func @mgpuMemAlloc(i64, !llvm.ptr, i8) -> !llvm.ptr
// RUN: unroll-opt %s --lower-to-gpu="chip=sm_80 format=isa block-size=128 cuda-path=%cuda_home" --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE
//
// The pipeline, pinned, with its options reaching the passes: toolkit check,
// the front end (derive, differentiate, entry points, patterns without the
// CPU kernels), bufferization, the kernel mapping, NVVM and serialization.
// PIPE: unroll-gpu-check-toolkit{cuda-path={{.*}} format=isa}
// PIPE-SAME: unroll-derive-steps
// PIPE-SAME: unroll-inline-descent
// PIPE-SAME: unroll-differentiate
// PIPE-SAME: convert-unroll-to-entry-points{chip=sm_80 model-vjp=false recompute-window=false target=gpu}
// PIPE-SAME: convert-unroll-attention-to-gpu{attention-tile=0}
// PIPE-SAME: convert-unroll-to-linalg{cpu-kernels=false}
// PIPE-SAME: unroll-gpu-fuse-elementwise
// PIPE-SAME: one-shot-bufferize
// PIPE-SAME: unroll-gpu-stage-arguments
// PIPE-SAME: unroll-gpu-gemm{gelu-epilogue=false precision=f32}
// PIPE-SAME: unroll-gpu-column-reductions
// PIPE-SAME: unroll-gpu-prepare-linalg
// PIPE-SAME: convert-linalg-to-parallel-loops
// PIPE-SAME: unroll-gpu-group-allocs
// PIPE-SAME: scf-parallel-loop-fusion
// PIPE-SAME: unroll-gpu-fuse-rows
// PIPE-SAME: unroll-gpu-map-ctas{emulate-on-host=false reverse-threads=false}
// PIPE-SAME: unroll-gpu-map-loops{block-size=128 emulate-on-host=false}
// PIPE-SAME: unroll-gpu-serial-kernels
// PIPE-SAME: unroll-gpu-promote-accumulators
// PIPE-SAME: unroll-gpu-parallel-reductions
// PIPE-SAME: unroll-gpu-async
// PIPE-SAME: gpu-kernel-outlining
// PIPE-SAME: unroll-gpu-name-kernels
// PIPE-SAME: nvvm-attach-target{{.*}}chip=sm_80
// PIPE-SAME: convert-gpu-to-nvvm
// PIPE-SAME: gpu-to-llvm
// PIPE-SAME: gpu-module-to-binary{format=isa
//
// Host code: every kernel is a launch of an embedded module on the call's
// stream, buffers are device memory (mgpuMemAlloc), and the host waits once,
// at the end; no gpu.module is left unserialized.
// CHECK-NOT:   gpu.module
// CHECK:       llvm.func @cr_trace(
// CHECK:       %[[S:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NOT:   mgpuStreamSynchronize
// CHECK:       gpu.launch_func <%[[S]] : !llvm.ptr> @cr_trace_kernel::@cr_trace_kernel blocks in
// CHECK-NOT:   mgpuStreamSynchronize
// CHECK:       gpu.launch_func <%[[S]] : !llvm.ptr> @cr_trace_kernel_{{[0-9]+}}::@cr_trace_kernel_{{[0-9]+}} blocks in
// CHECK-NOT:   mgpuStreamSynchronize
// CHECK:       llvm.call @mgpuStreamSynchronize(%[[S]])
// CHECK-NEXT:  llvm.call @mgpuStreamDestroy(%[[S]])
// CHECK-NEXT:  llvm.return
// CHECK:       gpu.binary @cr_trace_kernel
// CHECK-SAME:  #gpu.object<#nvvm.target<O = 3, chip = "sm_90">
// CHECK-SAME:  assembly = "
// The PTX: sm_90, an entry point per kernel, libdevice's exp inlined.
// CHECK-SAME:  .target sm_90
// CHECK-SAME:  .visible .entry cr_trace_kernel(
// CHECK-NOT:   .extern .func __nv_
// CHECK:       __unroll_model_info({{.*}}\22chip\22:\22sm_90\22
// CHECK-SAME:  \22target\22:\22gpu\22
// SM80: .target sm_80
// SM80: \22chip\22:\22sm_80\22

unroll.energy @cr {
^bb0(%Y: tensor<?x4xf32>, %X: tensor<?x4xf32>):
  %Wa = unroll.param "W_a" {std = 0.5 : f64} : tensor<4x4xf32>
  %attn = unroll.pairwise %Y proj %Wa : tensor<4x4xf32> rho(custom) {
  ^bb0(%z: f32):
    %n = arith.negf %z : f32
    %e = math.exp %n : f32
    %r = arith.negf %e : f32
    unroll.yield %r : f32
  } : tensor<?x4xf32>
  %prox = unroll.sqnorm %Y : tensor<?x4xf32>
  unroll.minimize %attn, %prox schedule(single) iterations(3)
}
