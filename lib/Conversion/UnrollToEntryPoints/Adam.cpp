//===- Adam.cpp - the @M_adam entry point ---------------------------------===//
#include "EntryPoints.h"
#include "unroll/Utils/Builders.h"

using namespace mlir;
using namespace mlir::unroll;
using namespace mlir::unroll::lowering;

/// @M_adam(theta, grad, m, v, hyper[5], partial[R]): one Adam step in place,
/// PyTorch's formulation as in tooling/include/unroll/tooling/Adam.h, with
/// hyper = (lr_bc1, sqrt_bc2, beta1, beta2, eps), lr_bc1 = lr / (1 - beta1^t),
/// sqrt_bc2 = sqrt(1 - beta2^t). The step's values come in a buffer, not as
/// scalars, so that a CUDA graph holding the step reads this step's values
/// (the runtime writes them into a resident buffer before the launch):
///   m <- beta1 m + (1 - beta1) g,  v <- beta2 v + (1 - beta2) g^2,
///   theta <- theta - lr_bc1 m / (sqrt(v) / sqrt_bc2 + eps),
/// and the squared gradient norm as R partial sums, partial[r] = sum of g_i^2
/// over i = r mod R (neighbouring threads read neighbouring elements), for
/// the caller's finiteness check. With this entry a training run keeps its
/// weights and optimizer state where the kernels run (docs/gpu.md).
void mlir::unroll::lowering::emitAdam(OpBuilder &b, Location loc, StringRef name, Type t) {
  OpBuilder::InsertionGuard g(b);
  MemRefType vec = dynMemref(1, t);
  func::FuncOp f = makeEntry(b, loc, (name + "_adam").str(), {vec, vec, vec, vec, vec, vec});
  Value theta = f.getArgument(0), grad = f.getArgument(1), m = f.getArgument(2),
        v = f.getArgument(3), hyper = f.getArgument(4), partial = f.getArgument(5);
  Emitter e(b, loc, t);
  Value c0 = e.idx(0), c1 = e.idx(1), one = e.cst(1.0), zero = e.cst(0.0);
  Value n = b.create<memref::DimOp>(loc, theta, 0);
  b.create<scf::ParallelOp>(
      loc, ValueRange{c0}, ValueRange{n}, ValueRange{c1},
      [&](OpBuilder &pb, Location pl, ValueRange iv) {
        auto ld = [&](Value buf) { return pb.create<memref::LoadOp>(pl, buf, iv).getResult(); };
        auto hp = [&](int64_t k) {
          Value at = pb.create<arith::ConstantIndexOp>(pl, k);
          return pb.create<memref::LoadOp>(pl, hyper, ValueRange{at}).getResult();
        };
        Value lrBc1 = hp(0), sqrtBc2 = hp(1), beta1 = hp(2), beta2 = hp(3), eps = hp(4);
        auto mul = [&](Value x, Value y) { return pb.create<arith::MulFOp>(pl, x, y).getResult(); };
        auto add = [&](Value x, Value y) { return pb.create<arith::AddFOp>(pl, x, y).getResult(); };
        Value gi = ld(grad);
        Value mi = add(mul(beta1, ld(m)), mul(pb.create<arith::SubFOp>(pl, one, beta1), gi));
        Value vi =
            add(mul(beta2, ld(v)), mul(pb.create<arith::SubFOp>(pl, one, beta2), mul(gi, gi)));
        Value den =
            add(pb.create<arith::DivFOp>(pl, pb.create<math::SqrtOp>(pl, vi), sqrtBc2), eps);
        Value step = pb.create<arith::DivFOp>(pl, mul(lrBc1, mi), den);
        Value th = pb.create<arith::SubFOp>(pl, ld(theta), step);
        pb.create<memref::StoreOp>(pl, mi, m, iv);
        pb.create<memref::StoreOp>(pl, vi, v, iv);
        pb.create<memref::StoreOp>(pl, th, theta, iv);
      });
  Value r = b.create<memref::DimOp>(loc, partial, 0);
  Value chunks = b.create<arith::CeilDivUIOp>(loc, n, r);
  b.create<scf::ParallelOp>(
      loc, ValueRange{c0}, ValueRange{r}, ValueRange{c1},
      [&](OpBuilder &pb, Location pl, ValueRange iv) {
        auto sum = pb.create<scf::ForOp>(
            pl, c0, chunks, c1, ValueRange{zero},
            [&](OpBuilder &fb, Location fl, Value j, ValueRange acc) {
              Value i = fb.create<arith::AddIOp>(fl, fb.create<arith::MulIOp>(fl, j, r), iv[0]);
              Value in = fb.create<arith::CmpIOp>(fl, arith::CmpIPredicate::ult, i, n);
              auto sq = fb.create<scf::IfOp>(
                  fl, in,
                  [&](OpBuilder &tb, Location tl) {
                    Value gi = tb.create<memref::LoadOp>(tl, grad, ValueRange{i});
                    tb.create<scf::YieldOp>(tl, ValueRange{tb.create<arith::MulFOp>(tl, gi, gi)});
                  },
                  [&](OpBuilder &eb, Location el) {
                    eb.create<scf::YieldOp>(el, ValueRange{zero});
                  });
              fb.create<scf::YieldOp>(
                  fl, ValueRange{fb.create<arith::AddFOp>(fl, acc[0], sq.getResult(0))});
            });
        pb.create<memref::StoreOp>(pl, sum.getResult(0), partial, iv);
      });
  b.create<func::ReturnOp>(loc);
}
