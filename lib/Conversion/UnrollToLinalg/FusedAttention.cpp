//===- FusedAttention.cpp - attention as CTA kernels with shared tiles -----===//
//
// For the GPU pipeline (and its emulation): unroll.attention and
// unroll.attention_vjp each become one kernel in the phase form of
// include/unroll/Transforms/CtaKernel.h, instead of the [B, H, n, n] score,
// softmax and product generics of Attention.cpp (which need five kernels and
// write the probabilities to global memory and back).
//
// Forward, one CTA per (batch, head, query tile of T rows): the query tile
// sits in shared memory; for each key tile up to the diagonal the keys and
// values are loaded, the scores S = q·k/√hd (causal mask as −∞), and the
// softmax is online (running row maximum m and sum l; the accumulator is
// rescaled by exp(m_old − m_new)), so any prompt length fits the same shared
// memory. The rows are divided by l at the end.
//
// Backward, one CTA per (batch, head), no atomics: first the forward again
// per query tile, which gives each row's log-sum-exp and D = dO·O (the
// attention_vjp op receives qkv and dO only: these are recomputed, not read
// from a tape), then per key tile (dK, dV accumulated in shared memory) the
// query tiles from the diagonal on: P = exp(S − lse) recomputed,
// dP = dO·vᵀ, dS = P (dP − D)/√hd, dV += Pᵀ dO, dK += dSᵀ q, and dQ += dS k
// in place in the result (only this CTA touches its head's rows, one key
// tile after another).
//
// The tile T is the largest of 32, 16, 8, 4, 2, 1 whose buffers fit in 48 KB
// of static shared memory (an explicit tile can be asked for); rows are
// padded to hd + 1 elements so a warp reading a column hits 32 banks.
//
//===----------------------------------------------------------------------===//
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/CtaKernel.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>
#include <limits>
#include <type_traits>

using namespace mlir;
using namespace mlir::unroll;

namespace {

constexpr int64_t kThreads = 128;

/// Shared-memory bytes of each kernel at tile T.
int64_t forwardBytes(int64_t t, int64_t hd, int64_t el) {
  return el * (4 * t * (hd + 1) + t * (t + 1) + 3 * t);
}
int64_t backwardBytes(int64_t t, int64_t hd, int64_t el) {
  return el * (6 * t * (hd + 1) + 2 * t * (t + 1) + 3 * t);
}

/// The tile for both kernels (0: none fits, or `requested` does not).
int64_t chooseTile(int64_t hd, int64_t el, int64_t requested) {
  for (int64_t t : {32, 16, 8, 4, 2, 1}) {
    if (requested > 0 && t != requested)
      continue;
    if (forwardBytes(t, hd, el) <= cta::kSharedBytes &&
        backwardBytes(t, hd, el) <= cta::kSharedBytes)
      return t;
  }
  return 0;
}

struct FusedAttention {
  FusedAttention(OpBuilder &b, Location loc, Type el, int64_t heads, int64_t width, int64_t tile)
      : b(b), loc(loc), el(el), k(b, loc, kThreads), heads(heads), width(width), hd(width / heads),
        tile(tile) {}

  OpBuilder &b;
  Location loc;
  Type el;
  cta::KernelBuilder k;
  int64_t heads, width, hd, tile;

  // Scalars and index arithmetic.
  Value idx(int64_t v) { return k.idx(v); }
  Value cst(double v) { return b.create<arith::ConstantOp>(loc, el, b.getFloatAttr(el, v)); }
  Value add(Value x, Value y) {
    if (isa<IndexType>(x.getType()))
      return b.create<arith::AddIOp>(loc, x, y);
    return b.create<arith::AddFOp>(loc, x, y);
  }
  Value sub(Value x, Value y) { return b.create<arith::SubFOp>(loc, x, y); }
  Value mul(Value x, Value y) {
    if (isa<IndexType>(x.getType()))
      return b.create<arith::MulIOp>(loc, x, y);
    return b.create<arith::MulFOp>(loc, x, y);
  }
  Value div(Value x, Value y) {
    if (isa<IndexType>(x.getType()))
      return b.create<arith::DivUIOp>(loc, x, y);
    return b.create<arith::DivFOp>(loc, x, y);
  }
  Value rem(Value x, Value y) { return b.create<arith::RemUIOp>(loc, x, y); }
  Value lt(Value x, Value y) {
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, x, y);
  }
  Value le(Value x, Value y) {
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ule, x, y);
  }
  Value both(Value x, Value y) { return b.create<arith::AndIOp>(loc, x, y); }
  Value select(Value c, Value x, Value y) { return b.create<arith::SelectOp>(loc, c, x, y); }
  Value exp(Value x) { return b.create<math::ExpOp>(loc, x); }
  Value load(Value m, ValueRange i) { return b.create<memref::LoadOp>(loc, m, i); }
  void store(Value v, Value m, ValueRange i) { b.create<memref::StoreOp>(loc, v, m, i); }

  /// A token batch as a read-only buffer (rows contiguous, any outer strides).
  Value input(Value t) {
    auto tt = cast<RankedTensorType>(t.getType());
    int64_t dyn = ShapedType::kDynamic;
    auto mt = MemRefType::get(tt.getShape(), el,
                              StridedLayoutAttr::get(b.getContext(), dyn, {dyn, dyn, 1}));
    return b.create<bufferization::ToMemrefOp>(loc, mt, t, /*read_only=*/true);
  }
  Value output(Value bsz, Value n, int64_t w) {
    auto ty = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic, w}, el);
    return b.create<memref::AllocOp>(loc, ty, ValueRange{bsz, n}, b.getI64IntegerAttr(64));
  }
  Value asTensor(Value m) {
    auto mt = cast<MemRefType>(m.getType());
    return b.create<bufferization::ToTensorOp>(loc, RankedTensorType::get(mt.getShape(), el), m,
                                               /*restrict=*/true, /*writable=*/true);
  }

  /// The shared tiles: rows of hd + 1 (padded) and of T + 1, and per-row values.
  Value rows() { return k.shared({tile, hd + 1}, el); }
  Value square() { return k.shared({tile, tile + 1}, el); }
  Value perRow() { return k.shared({tile}, el); }

  /// For each (r, e) of a tile's T x hd elements handled by thread t.
  void eachElement(Value t, function_ref<void(Value r, Value e)> body) {
    k.strided(t, idx(tile * hd), [&](Value i) { body(div(i, idx(hd)), rem(i, idx(hd))); });
  }
  /// For each (r, c) of a tile's T x T pairs handled by thread t.
  void eachPair(Value t, function_ref<void(Value r, Value c)> body) {
    k.strided(t, idx(tile * tile), [&](Value i) { body(div(i, idx(tile)), rem(i, idx(tile))); });
  }
  /// Σ_e a[r, e] · b[c, e] over the head dimension.
  Value dot(Value a, Value r, Value bm, Value c) {
    return k.fold(idx(0), idx(hd), cst(0.0), [&](Value e, Value acc) {
      return add(acc, mul(load(a, {r, e}), load(bm, {c, e})));
    });
  }

  /// The forward's shared buffers; the backward reuses them.
  struct Tiles {
    Value q, kk, v, acc, s, m, l, corr;
  };
  Tiles forwardTiles() {
    return {rows(), rows(), rows(), rows(), square(), perRow(), perRow(), perRow()};
  }

  /// Where one (batch, head)'s columns of q, k and v start in qkv.
  struct Head {
    Value batch, col; // col = h * hd
  };

  /// Element (r, e) of the key and value tiles from row k0 + r (0 past n).
  void stageKeys(const Tiles &w, Value qkv, Head head, Value n, Value k0, Value r, Value e) {
    Value j = add(k0, r), inRange = lt(j, n), zero = cst(0.0);
    Value kc = add(add(head.col, idx(width)), e), vc = add(kc, idx(width));
    store(k.readOr(inRange, zero, [&] { return load(qkv, {head.batch, j, kc}); }), w.kk, {r, e});
    store(k.readOr(inRange, zero, [&] { return load(qkv, {head.batch, j, vc}); }), w.v, {r, e});
  }

  /// The online softmax over the key tiles of query tile [q0, q0 + T): on
  /// return (after a barrier) acc holds Σ_j exp(s_ij − m_i) v_j, m the row
  /// maxima and l the row sums. `withRow(r, e, i)` runs in the phase that
  /// loads the queries, for each element of a row i < n.
  void onlineSoftmax(const Tiles &w, Value qkv, Head hd0, Value n, Value qt,
                     function_ref<void(Value r, Value e, Value i)> withRow = nullptr) {
    Value q0 = mul(qt, idx(tile));
    Value zero = cst(0.0), ninf = cst(-std::numeric_limits<double>::infinity());
    Value scale = cst(1.0 / std::sqrt(double(hd)));
    k.phase([&](Value t) {
      eachElement(t, [&](Value r, Value e) {
        Value i = add(q0, r), inRange = lt(i, n);
        Value col = add(hd0.col, e);
        store(k.readOr(inRange, zero, [&] { return load(qkv, {hd0.batch, i, col}); }), w.q, {r, e});
        store(zero, w.acc, {r, e});
        if (withRow)
          k.when(inRange, [&] { withRow(r, e, i); });
      });
      k.strided(t, idx(tile), [&](Value r) {
        store(ninf, w.m, {r});
        store(zero, w.l, {r});
      });
    });
    k.loop(idx(0), add(qt, idx(1)), [&](Value kt) {
      Value k0 = mul(kt, idx(tile));
      k.phase([&](Value t) {
        eachElement(t, [&](Value r, Value e) { stageKeys(w, qkv, hd0, n, k0, r, e); });
      });
      // Scores, −∞ where masked (j > i) or past the prompt.
      k.phase([&](Value t) {
        eachPair(t, [&](Value r, Value c) {
          Value i = add(q0, r), j = add(k0, c);
          Value valid = both(lt(i, n), le(j, i));
          store(select(valid, mul(dot(w.q, r, w.kk, c), scale), ninf), w.s, {r, c});
        });
      });
      // Per row: the new maximum, p = exp(s − m) in place of s, the sum.
      k.phase([&](Value t) {
        k.strided(t, idx(tile), [&](Value r) {
          Value mx = k.fold(idx(0), idx(tile), ninf, [&](Value c, Value acc) {
            return b.create<arith::MaximumFOp>(loc, acc, load(w.s, {r, c}));
          });
          Value mOld = load(w.m, {r});
          Value mNew = b.create<arith::MaximumFOp>(loc, mOld, mx);
          // A row with nothing unmasked yet (past the prompt) keeps 0s.
          Value none = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, mNew, ninf);
          Value base = select(none, zero, mNew);
          Value corr = exp(sub(mOld, base));
          Value sum = k.fold(idx(0), idx(tile), zero, [&](Value c, Value acc) {
            Value p = exp(sub(load(w.s, {r, c}), base));
            store(p, w.s, {r, c});
            return add(acc, p);
          });
          store(add(mul(load(w.l, {r}), corr), sum), w.l, {r});
          store(mNew, w.m, {r});
          store(corr, w.corr, {r});
        });
      });
      k.phase([&](Value t) {
        eachElement(t, [&](Value r, Value e) {
          Value init = mul(load(w.acc, {r, e}), load(w.corr, {r}));
          store(k.fold(idx(0), idx(tile), init,
                       [&](Value c, Value acc) {
                         return add(acc, mul(load(w.s, {r, c}), load(w.v, {c, e})));
                       }),
                w.acc, {r, e});
        });
      });
    });
  }

  Value numTiles(Value n) { return b.create<arith::CeilDivUIOp>(loc, n, idx(tile)); }

  /// out [B, n, D] of qkv [B, n, 3D].
  Value forward(Value qkvT) {
    Value qkv = input(qkvT);
    Value bsz = b.create<memref::DimOp>(loc, qkv, 0), n = b.create<memref::DimOp>(loc, qkv, 1);
    Value out = output(bsz, n, width);
    Value tiles = numTiles(n);
    Tiles w = forwardTiles();
    Value count = mul(mul(bsz, idx(heads)), tiles);
    k.grid(count, "attention_fwd", [&](Value cta) {
      Value qt = rem(cta, tiles), bh = div(cta, tiles);
      Head head{div(bh, idx(heads)), mul(rem(bh, idx(heads)), idx(hd))};
      onlineSoftmax(w, qkv, head, n, qt);
      Value q0 = mul(qt, idx(tile));
      k.phase([&](Value t) {
        eachElement(t, [&](Value r, Value e) {
          Value i = add(q0, r);
          k.when(lt(i, n), [&] {
            store(div(load(w.acc, {r, e}), load(w.l, {r})), out, {head.batch, i, add(head.col, e)});
          });
        });
      });
    });
    return asTensor(out);
  }

  /// dqkv [B, n, 3D] of qkv and dO [B, n, D].
  Value backward(Value qkvT, Value dyT) {
    Value qkv = input(qkvT), dy = input(dyT);
    Value bsz = b.create<memref::DimOp>(loc, qkv, 0), n = b.create<memref::DimOp>(loc, qkv, 1);
    Value dqkv = output(bsz, n, 3 * width);
    Value tiles = numTiles(n);
    // Per row of every (batch, head): the log-sum-exp and D = dO·O.
    Value rowsTotal = mul(mul(bsz, idx(heads)), n);
    auto vecTy = MemRefType::get({ShapedType::kDynamic}, el);
    Value lse = b.create<memref::AllocOp>(loc, vecTy, ValueRange{rowsTotal});
    Value dd = b.create<memref::AllocOp>(loc, vecTy, ValueRange{rowsTotal});
    Tiles w = forwardTiles();
    Value dv = rows(), dO = rows(), ds = square();
    Value zero = cst(0.0), scale = cst(1.0 / std::sqrt(double(hd)));
    k.grid(mul(bsz, idx(heads)), "attention_bwd", [&](Value bh) {
      Head head{div(bh, idx(heads)), mul(rem(bh, idx(heads)), idx(hd))};
      Value rowBase = mul(bh, n);
      // 1. Row statistics; dQ starts at 0.
      k.loop(idx(0), tiles, [&](Value qt) {
        onlineSoftmax(w, qkv, head, n, qt, [&](Value, Value e, Value i) {
          store(zero, dqkv, {head.batch, i, add(head.col, e)});
        });
        Value q0 = mul(qt, idx(tile));
        k.phase([&](Value t) {
          k.strided(t, idx(tile), [&](Value r) {
            Value i = add(q0, r);
            k.when(lt(i, n), [&] {
              Value l = load(w.l, {r});
              Value o = k.fold(idx(0), idx(hd), zero, [&](Value e, Value acc) {
                Value g = load(dy, {head.batch, i, add(head.col, e)});
                return add(acc, mul(g, load(w.acc, {r, e})));
              });
              store(add(load(w.m, {r}), b.create<math::LogOp>(loc, l)), lse, {add(rowBase, i)});
              store(div(o, l), dd, {add(rowBase, i)});
            });
          });
        });
      });
      // 2. Per key tile: dK (in w.acc) and dV; dQ accumulates in place.
      Value dk = w.acc, p = w.s, rowLse = w.m, rowD = w.l;
      k.loop(idx(0), tiles, [&](Value kt) {
        Value k0 = mul(kt, idx(tile));
        k.phase([&](Value t) {
          eachElement(t, [&](Value r, Value e) {
            stageKeys(w, qkv, head, n, k0, r, e);
            store(zero, dk, {r, e});
            store(zero, dv, {r, e});
          });
        });
        k.loop(kt, tiles, [&](Value qt) {
          Value q0 = mul(qt, idx(tile));
          k.phase([&](Value t) {
            eachElement(t, [&](Value r, Value e) {
              Value i = add(q0, r), inRange = lt(i, n), col = add(head.col, e);
              store(k.readOr(inRange, zero, [&] { return load(qkv, {head.batch, i, col}); }), w.q,
                    {r, e});
              store(k.readOr(inRange, zero, [&] { return load(dy, {head.batch, i, col}); }), dO,
                    {r, e});
            });
            k.strided(t, idx(tile), [&](Value r) {
              Value i = add(q0, r), inRange = lt(i, n);
              store(k.readOr(inRange, zero, [&] { return load(lse, {add(rowBase, i)}); }), rowLse,
                    {r});
              store(k.readOr(inRange, zero, [&] { return load(dd, {add(rowBase, i)}); }), rowD,
                    {r});
            });
          });
          k.phase([&](Value t) {
            eachPair(t, [&](Value r, Value c) {
              Value i = add(q0, r), j = add(k0, c);
              Value valid = both(lt(i, n), le(j, i));
              Value s = mul(dot(w.q, r, w.kk, c), scale);
              Value pv = select(valid, exp(sub(s, load(rowLse, {r}))), zero);
              Value dp = dot(dO, r, w.v, c);
              store(pv, p, {r, c});
              store(mul(mul(pv, sub(dp, load(rowD, {r}))), scale), ds, {r, c});
            });
          });
          k.phase([&](Value t) {
            eachElement(t, [&](Value c, Value e) {
              Value gv = k.fold(idx(0), idx(tile), load(dv, {c, e}), [&](Value r, Value acc) {
                return add(acc, mul(load(p, {r, c}), load(dO, {r, e})));
              });
              store(gv, dv, {c, e});
              Value gk = k.fold(idx(0), idx(tile), load(dk, {c, e}), [&](Value r, Value acc) {
                return add(acc, mul(load(ds, {r, c}), load(w.q, {r, e})));
              });
              store(gk, dk, {c, e});
            });
            eachElement(t, [&](Value r, Value e) {
              Value i = add(q0, r);
              k.when(lt(i, n), [&] {
                SmallVector<Value> where{head.batch, i, add(head.col, e)};
                Value gq = k.fold(idx(0), idx(tile), load(dqkv, where), [&](Value c, Value acc) {
                  return add(acc, mul(load(ds, {r, c}), load(w.kk, {c, e})));
                });
                store(gq, dqkv, where);
              });
            });
          });
        });
        k.phase([&](Value t) {
          eachElement(t, [&](Value r, Value e) {
            Value j = add(k0, r);
            k.when(lt(j, n), [&] {
              Value kc = add(add(head.col, idx(width)), e);
              store(load(dk, {r, e}), dqkv, {head.batch, j, kc});
              store(load(dv, {r, e}), dqkv, {head.batch, j, add(kc, idx(width))});
            });
          });
        });
      });
    });
    return asTensor(dqkv);
  }
};

Type elementOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

void replaceWithCast(ConversionPatternRewriter &rewriter, Operation *op, Value v) {
  Type to = op->getResult(0).getType();
  if (v.getType() != to)
    v = rewriter.create<tensor::CastOp>(op->getLoc(), to, v);
  rewriter.replaceOp(op, v);
}

/// The tile for attention over `qkv` (0: the kernels do not fit, or the
/// feature width is not static).
int64_t tileFor(Value qkv, int64_t heads, int64_t requested) {
  auto ty = cast<RankedTensorType>(qkv.getType());
  if (ty.isDynamicDim(2))
    return 0;
  int64_t hd = ty.getDimSize(2) / 3 / heads;
  return chooseTile(hd, ty.getElementTypeBitWidth() / 8, requested);
}

/// unroll.attention (forward) or unroll.attention_vjp (backward) as its
/// kernel, where the tiles fit.
template <typename OpT> struct FusedAttentionLowering : OpConversionPattern<OpT> {
  FusedAttentionLowering(MLIRContext *ctx, int64_t tile)
      : OpConversionPattern<OpT>(ctx, /*benefit=*/2), tile(tile) {}
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Value qkv = a.getQkv();
    int64_t t = tileFor(qkv, op.getHeads(), tile);
    if (!t)
      return rewriter.notifyMatchFailure(op, "the tiles do not fit in shared memory");
    int64_t width = cast<RankedTensorType>(qkv.getType()).getDimSize(2) / 3;
    FusedAttention f(rewriter, op.getLoc(), elementOf(qkv), op.getHeads(), width, t);
    if constexpr (std::is_same_v<OpT, AttentionOp>)
      replaceWithCast(rewriter, op, f.forward(qkv));
    else
      replaceWithCast(rewriter, op, f.backward(qkv, a.getDy()));
    return success();
  }
  int64_t tile;
};

} // namespace

void mlir::unroll::populateFusedAttentionPatterns(RewritePatternSet &patterns, int64_t tile) {
  patterns.add<FusedAttentionLowering<AttentionOp>, FusedAttentionLowering<AttentionVJPOp>>(
      patterns.getContext(), tile);
}
