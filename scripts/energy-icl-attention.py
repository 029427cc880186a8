#!/usr/bin/env python3
"""Where the attention of a trained energy model (examples/energy_icl.mlir:
the reweighted softmax of P1's eq. 20 step with a causal mask) goes, from
its checkpoint and fresh linear-regression prompts, in plain NumPy:

  scripts/energy-icl-attention.py CHECKPOINT_DIR [--prompts 256] [--loops 10]

For every loop iteration: the attention mass of x tokens on themselves, on
other x tokens and on y tokens; and of each y_j token on its own x_j (the
token before it) against another x token. Learning y = w·x in context
needs y_j to take in x_j (a pairing by position).
"""
import argparse, json, os, struct
import numpy as np


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": np.float32, "F64": np.float64}[t["dtype"]]
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=dt).reshape(t["shape"]).astype(np.float64)
    return out


ap = argparse.ArgumentParser()
ap.add_argument("checkpoint")
ap.add_argument("--prompts", type=int, default=256)
ap.add_argument("--points", type=int, default=11)
ap.add_argument("--loops", type=int, default=10)
a = ap.parse_args()
step = open(os.path.join(a.checkpoint, "latest")).read().strip()
th = read(os.path.join(a.checkpoint, step, "model.safetensors"))
d = th["_read_in.weight"].shape[1]
rng = np.random.default_rng(3)
B, K = a.prompts, a.points
xs = rng.standard_normal((B, K, d))
ys = np.einsum("bkd,bd->bk", xs, rng.standard_normal((B, d)))
z = np.zeros((B, 2 * K, d))
z[:, 0::2] = xs
z[:, 1::2, 0] = ys
P = z @ th["_read_in.weight"].T + th["_read_in.bias"]
Wa, Wf, alpha = th["W_a"], th["W_f"], th["alpha"][0]
Ws = (1 - alpha) * np.eye(Wf.shape[0]) - alpha * (Wf + Wf.T) / 2
n = 2 * K
causal = np.tril(np.ones((n, n), dtype=bool))
isx = np.arange(n) % 2 == 0
print(f"{B} prompts of {K} points, d = {d}, learned alpha = {alpha:.3f}")
print(f"{'t':>3} {'x on itself':>12} {'x on other x':>13} {'x on y':>8} | {'y_j on x_j':>11} {'y_j on other x (each)':>22}")
Y = P.copy()
for t in range(a.loops):
    U = Y @ Wa
    logits = U @ U.transpose(0, 2, 1) - 0.5 * (U * U).sum(-1)[:, None, :]
    logits = np.where(causal, logits, -np.inf)
    A = np.exp(logits - logits.max(-1, keepdims=True))
    A /= A.sum(-1, keepdims=True)
    xr = [i for i in range(2, n) if isx[i]]
    yr = [i for i in range(3, n) if not isx[i]]
    xs_self = np.mean([A[:, i, i].mean() for i in xr])
    xs_y = np.mean([A[:, i, ~isx].sum(-1).mean() for i in xr])
    xs_ox = np.mean([(A[:, i, isx].sum(-1) - A[:, i, i]).mean() for i in xr])
    y_own = np.mean([A[:, i, i - 1].mean() for i in yr])
    y_other = np.mean([((A[:, i, isx].sum(-1) - A[:, i, i - 1]) / ((i + 1) // 2 - 1)).mean() for i in yr])
    print(f"{t + 1:>3} {xs_self:>12.3f} {xs_ox:>13.3f} {xs_y:>8.3f} | {y_own:>11.3f} {y_other:>22.3f}")
    Y = np.maximum(A @ Y @ Ws + alpha * P, 0.0)
