// RUN: unroll-opt %s --pass-pipeline='builtin.module(func.func(unroll-gpu-map-rows))' --split-input-file | FileCheck %s
// RUN: unroll-opt %s --pass-pipeline='builtin.module(func.func(unroll-gpu-map-rows{emulate-on-host=1}))' --split-input-file | FileCheck %s --check-prefix=EMU
//
// A layer norm's row kernel as unroll-gpu-fuse-rows leaves it (one thread
// per row, serial loops over the 256 columns) gets a warp per row: 8 rows
// per block of 256 threads, lane = thread mod 32 starting every column loop
// at its lane and stepping 32 columns, the mean's and variance's sums kept
// per lane and combined by five xor shuffles (16, 8, 4, 2, 1) and stored by
// lane 0, the row scalars between the loops stored by every lane, a
// __syncwarp after each column loop and before one that follows stores. (The
// output is an allocation made after x was defined, so it cannot alias x;
// two function arguments might, and would keep the kernel as it is.)
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME:    %[[X:.*]]: memref<?x256xf32>)
// CHECK:         %[[MEAN:.*]] = memref.alloc
// CHECK:         %[[VAR:.*]] = memref.alloc
// CHECK:         %[[MU:.*]] = memref.alloc
// CHECK:         %[[Y:.*]] = memref.alloc
// CHECK:         gpu.launch blocks
// CHECK-SAME:      threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256
// CHECK:           %[[LANE:.*]] = arith.remui %[[TX]], %c32
// CHECK:           %[[WARP:.*]] = arith.divui %[[TX]], %c32
// CHECK:           scf.if
// CHECK:             memref.store %{{.*}}, %[[MEAN]]
// CHECK-NEXT:        arith.constant -1
// CHECK-NEXT:        nvvm.bar.warp.sync
// CHECK:             %[[STEP:.*]] = arith.muli %c1{{.*}}, %c32
// CHECK:             %[[INIT:.*]] = memref.load %[[MEAN]]
// CHECK:             %[[OFF:.*]] = arith.muli %[[LANE]], %c1
// CHECK:             %[[FIRST:.*]] = arith.addi %c0{{.*}}, %[[OFF]]
// CHECK:             %[[PART:.*]] = scf.for %{{.*}} = %[[FIRST]] to %c256{{.*}} step %[[STEP]] iter_args(%[[P:.*]] = %{{.*}}) -> (f32) {
// CHECK:               memref.load %[[X]]
// CHECK:               arith.addf %[[P]]
// CHECK:             gpu.shuffle  xor %[[PART]], %c16
// CHECK-COUNT-4:     gpu.shuffle  xor
// CHECK:             %[[ZERO:.*]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK:             scf.if %[[ZERO]] {
// CHECK:               arith.addf %[[INIT]]
// CHECK:               memref.store %{{.*}}, %[[MEAN]]
// CHECK:             }
// CHECK:             nvvm.bar.warp.sync
// CHECK:             memref.store %{{.*}}, %[[MU]]
// CHECK-COUNT-5:     gpu.shuffle  xor
// CHECK:             memref.store %{{.*}}, %[[VAR]]
// CHECK:             nvvm.bar.warp.sync
// CHECK:             scf.for %{{.*}} = %{{.*}} to %c256{{.*}} step
// CHECK:               math.rsqrt
// CHECK:               memref.store %{{.*}}, %[[Y]]
// CHECK:             nvvm.bar.warp.sync
// CHECK-NOT:     scf.parallel
//
// Emulated: the same rows, and per column loop a loop over the 32 lanes
// whose partial sums add up in lane order.
// EMU-LABEL: func.func @layer_norm(
// EMU-NOT:     gpu.launch
// EMU:         scf.for %{{.*}} = %c0{{.*}} to %c8{{.*}} step
// EMU:           %[[S:.*]] = scf.for %[[L:.*]] = %c0{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args(%[[T:.*]] = %{{.*}}) -> (f32) {
// EMU:             arith.muli %[[L]]
// EMU:             %[[PART:.*]] = scf.for {{.*}} iter_args
// EMU:             %[[NEXT:.*]] = arith.addf %[[T]], %[[PART]]
// EMU:             scf.yield %[[NEXT]]
// EMU-NOT:     gpu.shuffle
// EMU-NOT:     nvvm.bar.warp.sync
func.func @layer_norm(%x: memref<?x256xf32>) -> memref<?x256xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  %zero = arith.constant 0.0 : f32
  %inv = arith.constant 3.906250e-03 : f32
  %eps = arith.constant 1.0e-05 : f32
  %n = memref.dim %x, %c0 : memref<?x256xf32>
  %mean = memref.alloc(%n) : memref<?xf32>
  %var = memref.alloc(%n) : memref<?xf32>
  %mu = memref.alloc(%n) : memref<?xf32>
  %y = memref.alloc(%n) : memref<?x256xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %zero, %mean[%i] : memref<?xf32>
    scf.for %j = %c0 to %c256 step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x256xf32>
      %a = memref.load %mean[%i] : memref<?xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %mean[%i] : memref<?xf32>
    }
    %sum = memref.load %mean[%i] : memref<?xf32>
    %m = arith.mulf %sum, %inv : f32
    memref.store %m, %mu[%i] : memref<?xf32>
    memref.store %zero, %var[%i] : memref<?xf32>
    scf.for %j = %c0 to %c256 step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x256xf32>
      %d = arith.subf %v, %m : f32
      %q = arith.mulf %d, %d : f32
      %a = memref.load %var[%i] : memref<?xf32>
      %s = arith.addf %a, %q : f32
      memref.store %s, %var[%i] : memref<?xf32>
    }
    scf.for %j = %c0 to %c256 step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x256xf32>
      %w = memref.load %var[%i] : memref<?xf32>
      %w1 = arith.mulf %w, %inv : f32
      %w2 = arith.addf %w1, %eps : f32
      %r = math.rsqrt %w2 : f32
      %d = arith.subf %v, %m : f32
      %o = arith.mulf %d, %r : f32
      memref.store %o, %y[%i, %j] : memref<?x256xf32>
    }
    scf.reduce
  }
  memref.dealloc %mean : memref<?xf32>
  memref.dealloc %var : memref<?xf32>
  memref.dealloc %mu : memref<?xf32>
  return %y : memref<?x256xf32>
}

// -----

// Left to unroll-gpu-map-loops (one thread per row):
// a store between the loops into a buffer read before it (run by 32 lanes,
// g[i] += s would add s 32 times);
// CHECK-LABEL: func.func @read_modify_write(
// CHECK-NOT:     gpu.launch
// CHECK:         scf.parallel
func.func @read_modify_write(%x: memref<?x64xf32>, %g: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %x, %c0 : memref<?x64xf32>
  %acc = memref.alloc(%n) : memref<?xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c0 to %c64 step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x64xf32>
      %a = memref.load %acc[%i] : memref<?xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%i] : memref<?xf32>
    }
    %s = memref.load %acc[%i] : memref<?xf32>
    %old = memref.load %g[%i] : memref<?xf32>
    %new = arith.addf %old, %s : f32
    memref.store %new, %g[%i] : memref<?xf32>
    scf.reduce
  }
  memref.dealloc %acc : memref<?xf32>
  return
}

// -----

// a column loop that reads a neighbour's element of a buffer it writes
// (a loop-carried dependence: y[j] = y[j - 1] + x[j]);
// CHECK-LABEL: func.func @carried(
// CHECK-NOT:     gpu.launch
// CHECK:         scf.parallel
func.func @carried(%x: memref<?x64xf32>, %y: memref<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %x, %c0 : memref<?x64xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c1 to %c64 step %c1 {
      %jm = arith.subi %j, %c1 : index
      %p = memref.load %y[%i, %jm] : memref<?x64xf32>
      %v = memref.load %x[%i, %j] : memref<?x64xf32>
      %s = arith.addf %p, %v : f32
      memref.store %s, %y[%i, %j] : memref<?x64xf32>
    }
    scf.reduce
  }
  return
}

// -----

// and rows shorter than 16 columns (most lanes would idle).
// CHECK-LABEL: func.func @short_rows(
// CHECK-NOT:     gpu.launch
// CHECK:         scf.parallel
func.func @short_rows(%x: memref<?x8xf32>, %y: memref<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %x[%i, %j] : memref<?x8xf32>
      memref.store %v, %y[%i, %j] : memref<?x8xf32>
    }
    scf.reduce
  }
  return
}
