//===- CPUMath.cpp - f32 transcendentals as vectorizable polynomials ------===//
//
// unroll-cpu-math: rewrites f32 math.exp, math.tanh, math.log, math.erf, ...
// into MLIR's polynomial approximations (arith only), so that LLVM's loop
// vectorizer turns the loops that use them into SIMD code instead of
// scalar libm calls. f64 is left to libm. --lower-to-cpu runs it once the
// loops exist.
//
//===----------------------------------------------------------------------===//
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLCPUMATH
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct CPUMath : public unroll::impl::UnrollCPUMathBase<CPUMath> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
