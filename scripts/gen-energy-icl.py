#!/usr/bin/env python3
"""Writes models whose loop descends a kernel energy on in-context
regression (examples/energy_icl_*.mlir), in the concat encoding.

    scripts/gen-energy-icl.py NAME --d 5 --schedule cg --loops 10 \\
        [--window 10] [--kernel linear] [--heads 1] [--dense] [--dtype f32] \\
        [--alpha 0.02] [--momentum 0.5] [--eps 1e-5] > out.mlir

The tokens are (x_i, y_i) and the query (x, 0), d + 1 features; the
loop starts at them (no read-in) and each iteration is one step of the
energy

    E(Y; X) = 1/2 sum_{i,j in context} kappa(W_q x_i, W_q x_j) <W_v y_i, W_v y_j>

whose kernel reads the x features of the prompt (with --dense, every
feature of the tokens) and whose value reads the tokens themselves. With
the linear kernel, W_q W_q^T is the learned preconditioner of gradient
descent on the prompt's least squares (von Oswald et al., 2023; Ahn et
al., 2023). The read-out is a learned linear map of the query token.
Schedules: gd (a learned step size per iteration), line_search and cg
(per-prompt exact step lengths; cg takes the previous iterate), nesterov
(a learned step size and momentum per iteration).
"""
import argparse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--schedule", required=True, choices=["gd", "line_search", "cg", "nesterov"])
    ap.add_argument("--loops", type=int, required=True)
    ap.add_argument("--window", type=int, default=0, help="loss window T (default: every loop)")
    ap.add_argument("--kernel", default="linear")
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--rank", type=int, default=0, help="columns of W_q per head (default d)")
    ap.add_argument("--dense", action="store_true", help="the kernel reads every feature")
    ap.add_argument("--mean", action="store_true",
                    help="divide the kernel by the context's size (least squares' mean)")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--alpha", type=float, default=0.02)
    ap.add_argument("--momentum", type=float, default=0.5)
    ap.add_argument("--eps", type=float, default=0.0)
    ap.add_argument("--std", type=float, default=0.4)
    ap.add_argument("--comment", default="")
    a = ap.parse_args()
    d, t, H = a.d, a.dtype, a.heads
    F = d + 1
    r = (a.rank or d) * H
    kin = F if a.dense else d
    window = a.window or a.loops
    tok = f"tensor<?x{F}x{t}>"
    batch = f"tensor<?x?x{F}x{t}>"
    mat = lambda rows, cols: f"tensor<{rows}x{cols}x{t}>"
    out = []
    w = out.append
    for line in a.comment.split("\\n"):
        w(f"// {line}" if line else "//")
    energy = a.name + "_descent"  # (not NAME_energy: the model has NAME_energy_trace)
    w(f"unroll.energy @{energy} {{")
    w(f"^bb0(%Y: {tok}, %X: {tok}):")
    w(f'  %Wq = unroll.param "W_q" {{std = {a.std!r} : f64}} : {mat(kin, r)}')
    w(f'  %Wv = unroll.param "W_v" {{std = {a.std!r} : f64}} : {mat(F, H)}')
    features = "" if a.dense else f" features [0, {d}]"
    heads = f" heads({H})" if H > 1 else ""
    w(f"  %e = unroll.kernel_pairwise %Y kernel({a.kernel}) of %X : {tok}{features} "
      f"query %Wq : {mat(kin, r)} value %Wv : {mat(F, H)}{heads} mask(context)"
      f"{' mean' if a.mean else ''} : {tok}")
    sched = f"schedule({a.schedule}) iterations({a.loops})"
    if a.schedule == "gd":
        sched += f" alpha({a.alpha!r}) learnable per_iteration"
    elif a.schedule == "nesterov":
        sched += f" alpha({a.alpha!r}) momentum({a.momentum!r}) learnable per_iteration"
    elif a.eps:
        sched += f" eps({a.eps:.6e})"
    w(f"  unroll.minimize %e {sched}")
    w("}")
    w("")
    index = a.schedule != "line_search"
    prev = a.schedule in ("cg", "nesterov")
    w(f"unroll.model @{a.name} encoding(concat) {{")
    w(f"^bb0(%Z: {batch}):")
    w(f'  %Wo = unroll.param "_read_out.weight" {{std = {a.std!r} : f64}} : {mat(1, F)}')
    w(f'  %bo = unroll.param "_read_out.bias" init(zeros) : tensor<1x{t}>')
    w(f"  // Y_0 = the tokens; Y_t = one step on E(.; X = the tokens) from Y_(t-1)")
    w(f"  %Y = unroll.loop %Z iterations({a.loops}) window({window}) injection(none) : {batch} {{")
    args = f"%u: {batch}, %p: {batch}"
    if index:
        args += ", %k: index"
    if prev:
        args += f", %v: {batch}"
    w(f"  ^bb0({args}):")
    extra = (" iteration %k" if index else "") + (f" prev %v : {batch}" if prev else "")
    w(f"    %n = unroll.descend @{energy}(%u, %p){extra} : {batch}")
    w(f"    unroll.yield %n : {batch}")
    w("  }")
    w("  // the prediction: read_out of the query token (the loss reads the last token)")
    w(f"  %pred = unroll.linear %Y, %Wo, %bo : ({batch}, {mat(1, F)}, tensor<1x{t}>) -> "
      f"tensor<?x?x1x{t}>")
    w(f"  unroll.output %pred : tensor<?x?x1x{t}>")
    w("}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
