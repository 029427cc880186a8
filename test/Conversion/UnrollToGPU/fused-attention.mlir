// RUN: unroll-opt %s --convert-unroll-attention-to-gpu --split-input-file | FileCheck %s
// RUN: unroll-opt %s --convert-unroll-attention-to-gpu --convert-unroll-to-linalg --split-input-file | FileCheck %s --check-prefix=THEN
// RUN: unroll-opt %s --convert-unroll-attention-to-gpu=attention-tile=8 --split-input-file | FileCheck %s --check-prefix=TILE8
// RUN: not unroll-opt %s --convert-unroll-attention-to-gpu=attention-tile=-1 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not unroll-opt %s --lower-to-gpu-emulated=attention=flash 2>&1 | FileCheck %s --check-prefix=BAD
//
// The GPU pipeline's attention (its default, attention=fused) is one kernel
// in phase form (include/unroll/Utils/CtaKernel.h): a grid of one CTA
// per (batch, head, query tile) with 128 threads; tiles of 32 rows padded to
// hd + 1 = 5 (queries, keys, values, accumulator), the scores 32 x 33, and
// the running maximum and sum per row in two slots each, all in shared
// memory. Per key tile: the keys; the scores, a block of 2 x 4 per thread;
// the new row maxima, the online softmax's rescaling by exp(m_old - m_new)
// and the accumulator update in one phase.
// CHECK-LABEL: func.func @attention(
// CHECK-COUNT-4: memref.alloc() {unroll.cta.shared} : memref<32x5xf32>
// CHECK:         memref.alloc() {unroll.cta.shared} : memref<32x33xf32>
// CHECK-COUNT-2: memref.alloc() {unroll.cta.shared} : memref<2x32xf32>
// CHECK:         scf.for %[[CTA:.*]] = %{{.*}} to %{{.*}} step
// CHECK:           {unroll.cta.phase}
// CHECK:           {unroll.cta.phase}
// CHECK-COUNT-6:   memref.load %{{.*}} : memref<32x5xf32>
// CHECK-COUNT-8:   memref.store %{{.*}} : memref<32x33xf32>
// CHECK:           {unroll.cta.phase}
// CHECK:           arith.maximumf
// CHECK:           math.exp
// CHECK:           {unroll.cta.phase}
// CHECK:           {unroll.cta.phase}
// CHECK:         } {unroll.cta.grid = 128 : i64, unroll.cta.name = "attention_fwd"}
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<?x?x8xf32>
// CHECK-NOT:     linalg.generic
// TILE8-LABEL: func.func @attention(
// TILE8-COUNT-4: memref.alloc() {unroll.cta.shared} : memref<8x5xf32>
// TILE8:         memref.alloc() {unroll.cta.shared} : memref<8x9xf32>
// NEG: convert-unroll-attention-to-gpu: attention-tile must be >= 0 (0: automatic), got -1
// BAD: for the --attention option: Cannot find option named 'flash'!
func.func @attention(%qkv: tensor<?x?x24xf32>) -> tensor<?x?x8xf32> {
  %a = unroll.attention %qkv heads(2) : tensor<?x?x24xf32> -> tensor<?x?x8xf32>
  return %a : tensor<?x?x8xf32>
}

// -----

// The gradient: three grids of one CTA per (batch, head, tile). The row
// statistics (log-sum-exp, D = dO·O) go to two global vectors of B·H·n;
// then dK and dV per key tile (six row tiles, P and dS) and dQ per query
// tile (five row tiles, dS), each grid with its own shared buffers.
// CHECK-LABEL: func.func @attention_vjp(
// CHECK:         %[[LSE:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:         %[[D:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK-COUNT-5: memref.alloc() {unroll.cta.shared} : memref<32x5xf32>
// CHECK:         memref.alloc() {unroll.cta.shared} : memref<32x33xf32>
// CHECK-COUNT-2: memref.alloc() {unroll.cta.shared} : memref<2x32xf32>
// CHECK:         math.log
// CHECK:         memref.store %{{.*}}, %[[LSE]]
// CHECK:         memref.store %{{.*}}, %[[D]]
// CHECK:         } {unroll.cta.grid = 128 : i64, unroll.cta.name = "attention_bwd_stats"}
// CHECK-COUNT-4: memref.alloc() {unroll.cta.shared} : memref<32x5xf32>
// CHECK-COUNT-2: memref.alloc() {unroll.cta.shared} : memref<32xf32>
// CHECK-COUNT-2: memref.alloc() {unroll.cta.shared} : memref<32x33xf32>
// CHECK-COUNT-2: memref.alloc() {unroll.cta.shared} : memref<32x5xf32>
// CHECK:         memref.load %[[LSE]]
// CHECK:         memref.load %[[D]]
// CHECK:         } {unroll.cta.grid = 128 : i64, unroll.cta.name = "attention_bwd_keys"}
// CHECK-COUNT-4: memref.alloc() {unroll.cta.shared} : memref<32x5xf32>
// CHECK-COUNT-2: memref.alloc() {unroll.cta.shared} : memref<32xf32>
// CHECK:         memref.alloc() {unroll.cta.shared} : memref<32x33xf32>
// CHECK:         memref.alloc() {unroll.cta.shared} : memref<32x5xf32>
// CHECK:         } {unroll.cta.grid = 128 : i64, unroll.cta.name = "attention_bwd_queries"}
// CHECK:         bufferization.to_tensor %{{.*}} restrict writable : memref<?x?x24xf32>
// CHECK-NOT:     linalg.generic
func.func @attention_vjp(%qkv: tensor<?x?x24xf32>, %dy: tensor<?x?x8xf32>) -> tensor<?x?x24xf32> {
  %d = unroll.attention_vjp %qkv, %dy heads(2) : (tensor<?x?x24xf32>, tensor<?x?x8xf32>) -> tensor<?x?x24xf32>
  return %d : tensor<?x?x24xf32>
}

// -----

// A head too wide for any tile in 48 KB of shared memory (f64, hd = 1536)
// is left as it is, and convert-unroll-to-linalg gives it the generic
// lowering.
// CHECK-LABEL: func.func @wide(
// CHECK-NOT:     unroll.cta
// CHECK:         unroll.attention %{{.*}} heads(1)
// THEN-LABEL: func.func @wide(
// THEN-NOT:     unroll.cta
// THEN:         linalg.generic
func.func @wide(%qkv: tensor<?x?x4608xf64>) -> tensor<?x?x1536xf64> {
  %a = unroll.attention %qkv heads(1) : tensor<?x?x4608xf64> -> tensor<?x?x1536xf64>
  return %a : tensor<?x?x1536xf64>
}
