// GPU kernels that were never serialized (the pipeline stopped before
// gpu-module-to-binary) are refused with the step that is missing; nothing
// is written.
// RUN: not unroll-translate %s -o %t.so 2>&1 | FileCheck %s
// RUN: not test -e %t.so
// A library that launches kernels needs the GPU runtime archive.
// RUN: not unroll-translate %S/Inputs/launch.mlir --gpu-runtime=%t.missing.a -o %t2.so 2>&1 | FileCheck %s --check-prefix=RT
// RUN: not test -e %t2.so
// RT: unroll-translate: error: the module launches GPU kernels but the GPU runtime '{{.*}}missing.a' is missing
module attributes {gpu.container_module} {
  // CHECK: gpu-errors.mlir:[[@LINE+1]]:3: error: GPU kernels are not serialized yet (gpu.module without gpu-module-to-binary); run 'unroll-opt --lower-to-gpu' to the end
  gpu.module @kernels {
  }
}
