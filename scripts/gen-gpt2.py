#!/usr/bin/env python3
"""Writes P2's GPT-2 models in the unroll dialect (examples/*.mlir).

    scripts/gen-gpt2.py NAME --d 20 --D 256 --heads 8 --layers 1 --loops 20 \
        --window 15 --positions 101 [--injection add] [--dtype f32] \
        [--encoding interleaved|concat] > out.mlir

With --encoding concat the model reads tokens (x_i, y_i) and the query
(x, 0) last (d + 1 features, one token per point: wpe has positions + 1
rows) and predicts at the query.

Tensor names and layouts follow P2's PyTorch model (nanoGPT layout, Linear
weights [out, in]), so checkpoints load with load_state_dict. Init as in P2:
Linear and embedding weights N(0, 0.02), c_proj weights N(0, 0.02/sqrt(2L)),
biases 0, LayerNorm gains 1. read_in/read_out use std 1/sqrt(3 fan_in), the
variance of PyTorch's default Linear init.
"""
import argparse
import math


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--D", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--loops", type=int, required=True)
    ap.add_argument("--window", type=int, required=True)
    ap.add_argument("--positions", type=int, required=True, help="n_positions; wpe has 2n+1 rows")
    ap.add_argument("--injection", default="add")
    ap.add_argument("--dtype", default="f32")
    ap.add_argument("--comment", default="")
    ap.add_argument("--encoding", default="interleaved", choices=["interleaved", "concat"])
    a = ap.parse_args()
    D, H, L, t = a.D, a.heads, a.layers, a.dtype
    concat = a.encoding == "concat"
    d = a.d + 1 if concat else a.d  # the tokens' features
    rows = a.positions + 1 if concat else 2 * a.positions + 1
    tok = lambda f: f"tensor<?x?x{f}x{t}>"
    mat = lambda r, c: f"tensor<{r}x{c}x{t}>"
    vec = lambda n: f"tensor<{n}x{t}>"
    out = []
    w = out.append
    for line in a.comment.split("\\n"):
        if line:
            w(f"// {line}")
    w(f"unroll.model @{a.name}{' encoding(concat)' if concat else ''} {{")
    w(f"^bb0(%Z: {tok(d)}):")
    ssa = {}

    def param(name, shape, init="normal", std=None):
        v = "%p" + str(len(ssa))
        ssa[name] = v
        ty = mat(*shape) if len(shape) == 2 else vec(shape[0])
        kind = f" init({init})" if init != "normal" else ""
        attr = f" {{std = {std!r} : f64}}" if std is not None else ""
        w(f'  {v} = unroll.param "{name}"{kind}{attr} : {ty}')
        return v

    param("_read_in.weight", (D, d), std=round(1 / math.sqrt(3 * d), 6))
    param("_read_in.bias", (D,), "zeros")
    param("_backbone.transformer.wpe.weight", (rows, D), std=0.02)
    proj_std = round(0.02 / math.sqrt(2 * L), 8)
    for l in range(L):
        h = f"_backbone.transformer.h.{l}"
        param(f"{h}.ln_1.weight", (D,), "ones")
        param(f"{h}.ln_1.bias", (D,), "zeros")
        param(f"{h}.attn.c_attn.weight", (3 * D, D), std=0.02)
        param(f"{h}.attn.c_attn.bias", (3 * D,), "zeros")
        param(f"{h}.attn.c_proj.weight", (D, D), std=proj_std)
        param(f"{h}.attn.c_proj.bias", (D,), "zeros")
        param(f"{h}.ln_2.weight", (D,), "ones")
        param(f"{h}.ln_2.bias", (D,), "zeros")
        param(f"{h}.mlp.c_fc.weight", (4 * D, D), std=0.02)
        param(f"{h}.mlp.c_fc.bias", (4 * D,), "zeros")
        param(f"{h}.mlp.c_proj.weight", (D, 4 * D), std=proj_std)
        param(f"{h}.mlp.c_proj.bias", (D,), "zeros")
    param("_backbone.transformer.ln_f.weight", (D,), "ones")
    param("_backbone.transformer.ln_f.bias", (D,), "zeros")
    param("_read_out.weight", (1, D), std=round(1 / math.sqrt(3 * D), 6))
    param("_read_out.bias", (1,), "zeros")
    p = lambda n: ssa[n]

    def lin(x, name, k, o):
        return (f"unroll.linear {x}, {p(name + '.weight')}, {p(name + '.bias')} : "
                f"({tok(k)}, {mat(o, k)}, {vec(o)}) -> {tok(o)}")

    w("  // P = read_in(Z)")
    w(f"  %P = {lin('%Z', '_read_in', d, D)}")
    w(f"  %Y = unroll.loop %P iterations({a.loops}) window({a.window}) "
      f"injection({a.injection}) : {tok(D)} {{")
    w(f"  ^bb0(%u: {tok(D)}):")
    w(f"    %x = unroll.position_embed %u, {p('_backbone.transformer.wpe.weight')} : {tok(D)}, {mat(rows, D)}")
    x = "%x"
    for l in range(L):
        h = f"_backbone.transformer.h.{l}"
        s = f"_{l}"
        w(f"    // block {l}: x += attn(ln_1(x)); x += mlp(ln_2(x))")
        w(f"    %a{s} = unroll.layer_norm {x}, {p(h + '.ln_1.weight')}, {p(h + '.ln_1.bias')} : {tok(D)}, {vec(D)}")
        w(f"    %qkv{s} = {lin('%a' + s, h + '.attn.c_attn', D, 3 * D)}")
        w(f"    %att{s} = unroll.attention %qkv{s} heads({H}) : {tok(3 * D)} -> {tok(D)}")
        w(f"    %ap{s} = {lin('%att' + s, h + '.attn.c_proj', D, D)}")
        w(f"    %r{s} = unroll.add {x}, %ap{s} : {tok(D)}")
        w(f"    %m{s} = unroll.layer_norm %r{s}, {p(h + '.ln_2.weight')}, {p(h + '.ln_2.bias')} : {tok(D)}, {vec(D)}")
        w(f"    %fc{s} = {lin('%m' + s, h + '.mlp.c_fc', D, 4 * D)}")
        w(f"    %g{s} = unroll.gelu %fc{s} : {tok(4 * D)}")
        w(f"    %mp{s} = {lin('%g' + s, h + '.mlp.c_proj', 4 * D, D)}")
        w(f"    %o{s} = unroll.add %r{s}, %mp{s} : {tok(D)}")
        x = f"%o{s}"
    w(f"    %y = unroll.layer_norm {x}, {p('_backbone.transformer.ln_f.weight')}, "
      f"{p('_backbone.transformer.ln_f.bias')} : {tok(D)}, {vec(D)}")
    w(f"    unroll.yield %y : {tok(D)}")
    w("  }")
    w("  // predictions = read_out(Y), read by the loss at the "
      + ("query (the last token)" if concat else "x positions"))
    w(f"  %pred = {lin('%Y', '_read_out', D, 1)}")
    w(f"  unroll.output %pred : {tok(1)}")
    w("}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
