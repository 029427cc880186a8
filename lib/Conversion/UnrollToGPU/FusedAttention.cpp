//===- FusedAttention.cpp - attention as CTA kernels with shared tiles -----===//
//
// For the GPU pipeline (and its emulation): unroll.attention becomes one
// kernel and unroll.attention_vjp three, in the phase form of
// include/unroll/Utils/CtaKernel.h, instead of the [B, H, n, n] score,
// softmax and product generics of Attention.cpp (which need five kernels and
// write the probabilities to global memory and back).
//
// Forward, one CTA per (batch, head, query tile of T rows): the query tile
// sits in shared memory; for each key tile up to the diagonal the keys and
// values are loaded, the scores S = q·k/√hd (causal mask as −∞), and the
// softmax is online (running row maximum m and sum l; the accumulator is
// rescaled by exp(m_old − m_new)), so any prompt length fits the same shared
// memory. The rows are divided by l at the end. Per key tile that is three
// phases: load the keys; the scores; each row's new maximum and sum together
// with its accumulator update (the threads of a row each redo the row's
// maximum, so no phase waits on a per-row one; m and l alternate between two
// slots so that a phase never reads what it writes).
//
// Backward, without atomics, in three grids (each CTA's work is short, so
// the grids are as wide as the forward's):
//   stats   (batch, head, query tile): the forward again, which gives each
//           row's log-sum-exp and D = dO·O (the op receives qkv and dO only:
//           these are recomputed, not read from a tape);
//   keys    (batch, head, key tile): for the query tiles from the diagonal
//           on, P = exp(S − lse), dP = dO·vᵀ, dS = P (dP − D)/√hd, and
//           dV += Pᵀ dO, dK += dSᵀ q in shared memory, written at the end;
//   queries (batch, head, query tile): for the key tiles up to the
//           diagonal, dS again and dQ += dS k.
//
// Every product is register-blocked: a thread computes a block of up to 8
// outputs (rows rb + nR·i, columns cb + nC·j, so a warp's loads of one
// shared row are broadcasts and its loads of different rows fall in
// different banks), loading R + C operands per reduction step instead of 2
// per output.
//
// The tile T is the largest of 32, 16, 8, 4, 2, 1 whose buffers fit in 48 KB
// of static shared memory (an explicit tile can be asked for); rows are
// padded to hd + 1 elements so a warp reading a column hits 32 banks.
//
//===----------------------------------------------------------------------===//
#include "unroll/Conversion/UnrollToGPU/UnrollToGPU.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Utils/CtaKernel.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>
#include <type_traits>

using namespace mlir;
using namespace mlir::unroll;

namespace {

constexpr int64_t kThreads = 128;
/// The most outputs one thread computes in a register-blocked product.
constexpr int64_t kMaxBlock = 8;

/// Shared-memory bytes of each kernel at tile T: rows of hd + 1, squares of
/// T x (T + 1), and per-row values.
int64_t sharedBytes(int64_t rows, int64_t squares, int64_t perRow, int64_t t, int64_t hd,
                    int64_t el) {
  return el * (rows * t * (hd + 1) + squares * t * (t + 1) + perRow * t);
}
int64_t forwardBytes(int64_t t, int64_t hd, int64_t el) { // also the backward's stats
  return sharedBytes(5, 1, 4, t, hd, el);
}
int64_t keyGradBytes(int64_t t, int64_t hd, int64_t el) { return sharedBytes(6, 2, 2, t, hd, el); }
int64_t queryGradBytes(int64_t t, int64_t hd, int64_t el) {
  return sharedBytes(5, 1, 2, t, hd, el);
}

/// The tile for all kernels (0: none fits, or `requested` does not).
int64_t chooseTile(int64_t hd, int64_t el, int64_t requested) {
  for (int64_t t : {32, 16, 8, 4, 2, 1}) {
    if (requested > 0 && t != requested)
      continue;
    if (std::max({forwardBytes(t, hd, el), keyGradBytes(t, hd, el), queryGradBytes(t, hd, el)}) <=
        cta::kSharedBytes)
      return t;
  }
  return 0;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Outputs per thread for an rn x cn phase: enough that the blocks about
/// fill the CTA, a power of two, at most kMaxBlock.
int64_t outputsPerThread(int64_t rn, int64_t cn) {
  int64_t p = 1;
  while (2 * p <= kMaxBlock && rn * cn >= 2 * p * kThreads)
    p *= 2;
  return p;
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
  Value sub(Value x, Value y) {
    if (isa<IndexType>(x.getType()))
      return b.create<arith::SubIOp>(loc, x, y);
    return b.create<arith::SubFOp>(loc, x, y);
  }
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
  Value both(Value x, Value y) {
    if (!x || !y)
      return x ? x : y;
    return b.create<arith::AndIOp>(loc, x, y);
  }
  Value select(Value c, Value x, Value y) { return b.create<arith::SelectOp>(loc, c, x, y); }
  Value max(Value x, Value y) { return b.create<arith::MaximumFOp>(loc, x, y); }
  Value exp(Value x) { return b.create<math::ExpOp>(loc, x); }
  Value load(Value m, ValueRange i) { return b.create<memref::LoadOp>(loc, m, i); }
  void store(Value v, Value m, ValueRange i) { b.create<memref::StoreOp>(loc, v, m, i); }
  /// if (ok) m[i] = v; ok null means always.
  void storeIf(Value ok, Value v, Value m, ValueRange i) {
    if (!ok)
      return store(v, m, i);
    SmallVector<Value> at(i);
    k.when(ok, [&] { store(v, m, at); });
  }

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

  /// The shared tiles: rows of hd + 1 (padded) and of T + 1, per-row values,
  /// and per-row values in two slots (read one, write the other).
  Value rows() { return k.shared({tile, hd + 1}, el); }
  Value square() { return k.shared({tile, tile + 1}, el); }
  Value perRow() { return k.shared({tile}, el); }
  Value perRowTwice() { return k.shared({2, tile}, el); }

  /// For each (r, e) of a tile's T x hd elements handled by thread t.
  void eachElement(Value t, function_ref<void(Value r, Value e)> body) {
    k.strided(t, idx(tile * hd), [&](Value i) { body(div(i, idx(hd)), rem(i, idx(hd))); });
  }

  /// A thread's block of an rn x cn phase: rows rb + nR·i (i < R) and
  /// columns cb + nC·j (j < C), clamped into range, with their in-range
  /// conditions (null where always in range).
  struct Block {
    SmallVector<Value> row, col, rowOk, colOk;
    Value leader; // cb == 0: the first thread of its rows
  };
  void eachBlock(Value t, int64_t rn, int64_t cn, int64_t r, int64_t c,
                 function_ref<void(const Block &)> body) {
    int64_t nR = ceilDiv(rn, r), nC = ceilDiv(cn, c);
    k.strided(t, idx(nR * nC), [&](Value blk) {
      Value rb = div(blk, idx(nC)), cb = rem(blk, idx(nC));
      Block bl;
      auto place = [&](Value base, int64_t n, int64_t stride, int64_t count, SmallVector<Value> &at,
                       SmallVector<Value> &ok) {
        for (int64_t i = 0; i < count; ++i) {
          Value v = add(base, idx(stride * i));
          bool exact = stride * count == n;
          ok.push_back(exact ? Value() : lt(v, idx(n)));
          at.push_back(exact ? v : b.create<arith::MinUIOp>(loc, v, idx(n - 1)));
        }
      };
      place(rb, rn, nR, r, bl.row, bl.rowOk);
      place(cb, cn, nC, c, bl.col, bl.colOk);
      bl.leader = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, cb, idx(0));
      body(bl);
    });
  }
  /// Blocks of about R x C = outputsPerThread, C up to 4 (`rowPerThread`: R = 1).
  void eachBlock(Value t, int64_t rn, int64_t cn, bool rowPerThread,
                 function_ref<void(const Block &)> body) {
    int64_t p = outputsPerThread(rn, cn);
    int64_t r = rowPerThread ? 1 : std::min(p / std::min<int64_t>(p, 4), rn);
    eachBlock(t, rn, cn, r, p / r, body);
  }

  /// A product operand: buf[at, red] (`atFirst`) or buf[red, at].
  struct Operand {
    Value buf;
    bool atFirst;
  };
  /// Register-blocked sums: for each operand pair (A, B), i < R and j < C,
  ///   inits[.] + Σ_{red < len} A(row_i, red) · B(col_j, red),
  /// pair-major, then by i, then by j.
  SmallVector<Value> products(ArrayRef<std::pair<Operand, Operand>> pairs, const Block &bl,
                              int64_t len, ArrayRef<Value> inits) {
    auto at = [&](const Operand &o, Value i, Value red) {
      return o.atFirst ? load(o.buf, {i, red}) : load(o.buf, {red, i});
    };
    return k.folds(idx(0), idx(len), inits, [&](Value red, ValueRange acc) {
      SmallVector<Value> next;
      for (auto &[a, bo] : pairs) {
        SmallVector<Value> av, bv;
        for (Value r : bl.row)
          av.push_back(at(a, r, red));
        for (Value c : bl.col)
          bv.push_back(at(bo, c, red));
        for (Value x : av)
          for (Value y : bv)
            next.push_back(add(acc[next.size()], mul(x, y)));
      }
      return next;
    });
  }
  SmallVector<Value> zeros(size_t count) { return SmallVector<Value>(count, cst(0.0)); }
  /// Stores a block's outputs (i-major) with f(value, row, col), where in range.
  void eachOutput(const Block &bl, ArrayRef<Value> vals,
                  function_ref<void(Value ok, Value v, Value r, Value c)> f) {
    size_t n = 0;
    for (auto [r, rOk] : llvm::zip(bl.row, bl.rowOk))
      for (auto [c, cOk] : llvm::zip(bl.col, bl.colOk))
        f(both(rOk, cOk), vals[n++], r, c);
  }

  /// Where one (batch, head)'s columns of q, k and v start in qkv.
  struct Head {
    Value batch, col; // col = h * hd
  };
  /// What CTA `cta` of a (batch, head, tile) grid works on.
  struct TileCta {
    Head head;
    Value tile, start; // the tile's index and its first row
    Value rowBase;     // the head's first row in the per-row vectors (B·H·n)
  };
  TileCta tileCta(Value cta, Value tiles, Value n) {
    Value bh = div(cta, tiles), t = rem(cta, tiles);
    return {
        {div(bh, idx(heads)), mul(rem(bh, idx(heads)), idx(hd))}, t, mul(t, idx(tile)), mul(bh, n)};
  }

  /// Row i0 + r of tile buffer `tileBuf` from qkv (or dO) column col + e; 0 past n.
  void stageRow(Value src, Value batch, Value n, Value i0, Value col, Value r, Value e,
                Value tileBuf) {
    Value i = add(i0, r);
    store(k.readOr(lt(i, n), cst(0.0), [&] { return load(src, {batch, i, add(col, e)}); }), tileBuf,
          {r, e});
  }
  /// Element (r, e) of the key and value tiles from row k0 + r (0 past n).
  void stageKeys(Value kk, Value v, Value qkv, Head head, Value n, Value k0, Value r, Value e) {
    Value kc = add(head.col, idx(width));
    stageRow(qkv, head.batch, n, k0, kc, r, e, kk);
    stageRow(qkv, head.batch, n, k0, add(kc, idx(width)), r, e, v);
  }
  /// Whether query i = q0 + r attends to key j = k0 + c (causal, i < n).
  Value attends(Value q0, Value r, Value k0, Value c, Value n) {
    Value i = add(q0, r);
    return both(lt(i, n), le(add(k0, c), i));
  }

  /// The forward's shared buffers: m and l have two slots each.
  struct Tiles {
    Value q, kk, v, acc, dO, s, m, l;
  };
  Tiles forwardTiles(bool withGradient) {
    return {rows(),   rows(),        rows(),       rows(), withGradient ? rows() : Value(),
            square(), perRowTwice(), perRowTwice()};
  }

  /// The online softmax over the key tiles of query tile [q0, q0 + T): on
  /// return (after a barrier) acc holds Σ_j exp(s_ij − m_i) v_j, and slot
  /// `final` (returned) of m and l the row maxima and sums. With w.dO, the
  /// tile's rows of `dy` are staged there too.
  Value onlineSoftmax(const Tiles &w, Value qkv, Value dy, Head head, Value n, Value qt) {
    Value q0 = mul(qt, idx(tile));
    Value zero = cst(0.0), ninf = cst(-std::numeric_limits<double>::infinity());
    Value scale = cst(1.0 / std::sqrt(double(hd)));
    k.phase([&](Value t) {
      eachElement(t, [&](Value r, Value e) {
        stageRow(qkv, head.batch, n, q0, head.col, r, e, w.q);
        if (w.dO)
          stageRow(dy, head.batch, n, q0, head.col, r, e, w.dO);
        store(zero, w.acc, {r, e});
      });
      k.strided(t, idx(tile), [&](Value r) {
        store(ninf, w.m, {idx(0), r});
        store(zero, w.l, {idx(0), r});
      });
    });
    k.loop(idx(0), add(qt, idx(1)), [&](Value kt) {
      Value k0 = mul(kt, idx(tile));
      Value slot = rem(kt, idx(2)), next = sub(idx(1), slot);
      k.phase([&](Value t) {
        eachElement(t, [&](Value r, Value e) { stageKeys(w.kk, w.v, qkv, head, n, k0, r, e); });
      });
      // Scores, −∞ where masked (j > i) or past the prompt.
      k.phase([&](Value t) {
        eachBlock(t, tile, tile, /*rowPerThread=*/false, [&](const Block &bl) {
          size_t outputs = bl.row.size() * bl.col.size();
          SmallVector<Value> s = products({{{w.q, true}, {w.kk, true}}}, bl, hd, zeros(outputs));
          eachOutput(bl, s, [&](Value ok, Value v, Value r, Value c) {
            storeIf(ok, select(attends(q0, r, k0, c, n), mul(v, scale), ninf), w.s, {r, c});
          });
        });
      });
      // Per row: the new maximum (every thread of the row finds it), p =
      // exp(s − m), the new sum (the row's first thread stores it) and the
      // accumulator, rescaled, plus p·v.
      k.phase([&](Value t) {
        eachBlock(t, tile, hd, /*rowPerThread=*/true, [&](const Block &bl) {
          Value r = bl.row.front();
          Value mOld = load(w.m, {slot, r});
          Value mx = k.fold(idx(0), idx(tile), ninf,
                            [&](Value c, Value acc) { return max(acc, load(w.s, {r, c})); });
          Value mNew = max(mOld, mx);
          // A row with nothing unmasked yet (past the prompt) keeps 0s.
          Value none = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, mNew, ninf);
          Value base = select(none, zero, mNew);
          Value corr = exp(sub(mOld, base));
          SmallVector<Value> init{zero};
          for (Value e : bl.col)
            init.push_back(mul(load(w.acc, {r, e}), corr));
          SmallVector<Value> sums = k.folds(idx(0), idx(tile), init, [&](Value c, ValueRange acc) {
            Value p = exp(sub(load(w.s, {r, c}), base));
            SmallVector<Value> vs;
            for (Value e : bl.col)
              vs.push_back(load(w.v, {c, e}));
            SmallVector<Value> out{add(acc[0], p)};
            for (auto [i, v] : llvm::enumerate(vs))
              out.push_back(add(acc[i + 1], mul(p, v)));
            return out;
          });
          for (auto [j, e] : llvm::enumerate(bl.col))
            storeIf(bl.colOk[j], sums[j + 1], w.acc, {r, e});
          k.when(bl.leader, [&] {
            store(add(mul(load(w.l, {slot, r}), corr), sums[0]), w.l, {next, r});
            store(mNew, w.m, {next, r});
          });
        });
      });
    });
    return rem(add(qt, idx(1)), idx(2));
  }

  Value numTiles(Value n) { return b.create<arith::CeilDivUIOp>(loc, n, idx(tile)); }

  /// out [B, n, D] of qkv [B, n, 3D].
  Value forward(Value qkvT) {
    Value qkv = input(qkvT);
    Value bsz = b.create<memref::DimOp>(loc, qkv, 0), n = b.create<memref::DimOp>(loc, qkv, 1);
    Value out = output(bsz, n, width);
    Value tiles = numTiles(n);
    Tiles w = forwardTiles(/*withGradient=*/false);
    k.grid(mul(mul(bsz, idx(heads)), tiles), "attention_fwd", [&](Value cta) {
      TileCta c = tileCta(cta, tiles, n);
      Head head = c.head;
      Value last = onlineSoftmax(w, qkv, Value(), head, n, c.tile), q0 = c.start;
      k.phase([&](Value t) {
        eachElement(t, [&](Value r, Value e) {
          Value i = add(q0, r);
          k.when(lt(i, n), [&] {
            store(div(load(w.acc, {r, e}), load(w.l, {last, r})), out,
                  {head.batch, i, add(head.col, e)});
          });
        });
      });
    });
    return asTensor(out);
  }

  /// The gradient's tiles of one (query tile, key tile) pair: P and dS.
  struct GradTiles {
    Value q, dO, kk, v, lse, d, p, ds;
  };
  /// One phase: P = exp(S − lse) (0 where masked) and dS = P (dP − D)/√hd
  /// for query tile q0 against key tile k0 (P stored only where w.p is set).
  void probabilityGradients(const GradTiles &w, Value q0, Value k0, Value n) {
    Value zero = cst(0.0), scale = cst(1.0 / std::sqrt(double(hd)));
    k.phase([&](Value t) {
      eachBlock(t, tile, tile, /*rowPerThread=*/false, [&](const Block &bl) {
        size_t outputs = bl.row.size() * bl.col.size();
        SmallVector<Value> sums = products(
            {{{w.q, true}, {w.kk, true}}, {{w.dO, true}, {w.v, true}}}, bl, hd, zeros(2 * outputs));
        ArrayRef<Value> s(sums.data(), outputs), dp(sums.data() + outputs, outputs);
        size_t o = 0;
        eachOutput(bl, s, [&](Value ok, Value sv, Value r, Value c) {
          Value pv =
              select(attends(q0, r, k0, c, n), exp(sub(mul(sv, scale), load(w.lse, {r}))), zero);
          Value dsv = mul(mul(pv, sub(dp[o++], load(w.d, {r}))), scale);
          if (w.p)
            storeIf(ok, pv, w.p, {r, c});
          storeIf(ok, dsv, w.ds, {r, c});
        });
      });
    });
  }
  /// In a phase: query rows q0.. of q, dO, lse and D into the tiles.
  void stageQueries(const GradTiles &w, Value t, Value qkv, Value dy, Head head, Value n, Value q0,
                    Value rowBase, Value lse, Value dd) {
    eachElement(t, [&](Value r, Value e) {
      stageRow(qkv, head.batch, n, q0, head.col, r, e, w.q);
      stageRow(dy, head.batch, n, q0, head.col, r, e, w.dO);
    });
    k.strided(t, idx(tile), [&](Value r) {
      Value i = add(q0, r), inRange = lt(i, n), zero = cst(0.0);
      store(k.readOr(inRange, zero, [&] { return load(lse, {add(rowBase, i)}); }), w.lse, {r});
      store(k.readOr(inRange, zero, [&] { return load(dd, {add(rowBase, i)}); }), w.d, {r});
    });
  }

  /// dqkv [B, n, 3D] of qkv and dO [B, n, D].
  Value backward(Value qkvT, Value dyT) {
    Value qkv = input(qkvT), dy = input(dyT);
    Value bsz = b.create<memref::DimOp>(loc, qkv, 0), n = b.create<memref::DimOp>(loc, qkv, 1);
    Value dqkv = output(bsz, n, 3 * width);
    Value tiles = numTiles(n);
    Value count = mul(mul(bsz, idx(heads)), tiles);
    // Per row of every (batch, head): the log-sum-exp and D = dO·O.
    auto vecTy = MemRefType::get({ShapedType::kDynamic}, el);
    Value rowsTotal = mul(mul(bsz, idx(heads)), n);
    Value lse = b.create<memref::AllocOp>(loc, vecTy, ValueRange{rowsTotal});
    Value dd = b.create<memref::AllocOp>(loc, vecTy, ValueRange{rowsTotal});
    Value zero = cst(0.0);

    // 1. Row statistics.
    Tiles fw = forwardTiles(/*withGradient=*/true);
    k.grid(count, "attention_bwd_stats", [&](Value cta) {
      TileCta c = tileCta(cta, tiles, n);
      Head head = c.head;
      Value rowBase = c.rowBase, q0 = c.start;
      Value last = onlineSoftmax(fw, qkv, dy, head, n, c.tile);
      k.phase([&](Value t) {
        k.strided(t, idx(tile), [&](Value r) {
          Value i = add(q0, r);
          k.when(lt(i, n), [&] {
            Value l = load(fw.l, {last, r});
            Value o = k.fold(idx(0), idx(hd), zero, [&](Value e, Value acc) {
              return add(acc, mul(load(fw.dO, {r, e}), load(fw.acc, {r, e})));
            });
            store(add(load(fw.m, {last, r}), b.create<math::LogOp>(loc, l)), lse,
                  {add(rowBase, i)});
            store(div(o, l), dd, {add(rowBase, i)});
          });
        });
      });
    });

    // 2. dK and dV per key tile, over the query tiles from the diagonal.
    GradTiles kw{rows(), rows(), rows(), rows(), perRow(), perRow(), square(), square()};
    Value dk = rows(), dv = rows();
    k.grid(count, "attention_bwd_keys", [&](Value cta) {
      TileCta c = tileCta(cta, tiles, n);
      Head head = c.head;
      Value kt = c.tile, rowBase = c.rowBase, k0 = c.start;
      k.phase([&](Value t) {
        eachElement(t, [&](Value r, Value e) {
          stageKeys(kw.kk, kw.v, qkv, head, n, k0, r, e);
          store(zero, dk, {r, e});
          store(zero, dv, {r, e});
        });
      });
      k.loop(kt, tiles, [&](Value qt) {
        Value q0 = mul(qt, idx(tile));
        k.phase([&](Value t) { stageQueries(kw, t, qkv, dy, head, n, q0, rowBase, lse, dd); });
        probabilityGradients(kw, q0, k0, n);
        // dV[c, e] += Σ_r P[r, c] dO[r, e];  dK[c, e] += Σ_r dS[r, c] q[r, e].
        k.phase([&](Value t) {
          eachBlock(t, tile, hd, /*rowPerThread=*/false, [&](const Block &bl) {
            SmallVector<Value> init;
            for (Value acc : {dv, dk})
              for (Value c : bl.row)
                for (Value e : bl.col)
                  init.push_back(load(acc, {c, e}));
            SmallVector<Value> sums = products(
                {{{kw.p, false}, {kw.dO, false}}, {{kw.ds, false}, {kw.q, false}}}, bl, tile, init);
            size_t outputs = bl.row.size() * bl.col.size();
            ArrayRef<Value> all(sums);
            auto put = [&](Value acc) {
              return [&, acc](Value ok, Value v, Value c, Value e) { storeIf(ok, v, acc, {c, e}); };
            };
            eachOutput(bl, all.take_front(outputs), put(dv));
            eachOutput(bl, all.drop_front(outputs), put(dk));
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

    // 3. dQ per query tile, over the key tiles up to the diagonal.
    GradTiles qw{rows(), rows(), rows(), rows(), perRow(), perRow(), Value(), square()};
    Value dq = rows();
    k.grid(count, "attention_bwd_queries", [&](Value cta) {
      TileCta c = tileCta(cta, tiles, n);
      Head head = c.head;
      Value qt = c.tile, rowBase = c.rowBase, q0 = c.start;
      k.phase([&](Value t) {
        stageQueries(qw, t, qkv, dy, head, n, q0, rowBase, lse, dd);
        eachElement(t, [&](Value r, Value e) { store(zero, dq, {r, e}); });
      });
      k.loop(idx(0), add(qt, idx(1)), [&](Value kt) {
        Value k0 = mul(kt, idx(tile));
        k.phase([&](Value t) {
          eachElement(t, [&](Value r, Value e) { stageKeys(qw.kk, qw.v, qkv, head, n, k0, r, e); });
        });
        probabilityGradients(qw, q0, k0, n);
        // dQ[r, e] += Σ_c dS[r, c] k[c, e].
        k.phase([&](Value t) {
          eachBlock(t, tile, hd, /*rowPerThread=*/false, [&](const Block &bl) {
            SmallVector<Value> init;
            for (Value r : bl.row)
              for (Value e : bl.col)
                init.push_back(load(dq, {r, e}));
            SmallVector<Value> sums = products({{{qw.ds, true}, {qw.kk, false}}}, bl, tile, init);
            eachOutput(bl, sums,
                       [&](Value ok, Value v, Value r, Value e) { storeIf(ok, v, dq, {r, e}); });
          });
        });
      });
      k.phase([&](Value t) {
        eachElement(t, [&](Value r, Value e) {
          Value i = add(q0, r);
          k.when(lt(i, n),
                 [&] { store(load(dq, {r, e}), dqkv, {head.batch, i, add(head.col, e)}); });
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

bool mlir::unroll::fitsFusedAttention(Operation *op, int64_t tile) {
  if (auto fwd = dyn_cast<AttentionOp>(op))
    return tileFor(fwd.getQkv(), fwd.getHeads(), tile) != 0;
  if (auto bwd = dyn_cast<AttentionVJPOp>(op))
    return tileFor(bwd.getQkv(), bwd.getHeads(), tile) != 0;
  return false;
}

void mlir::unroll::populateFusedAttentionPatterns(RewritePatternSet &patterns, int64_t tile) {
  patterns.add<FusedAttentionLowering<AttentionOp>, FusedAttentionLowering<AttentionVJPOp>>(
      patterns.getContext(), tile);
}
