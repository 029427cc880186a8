"""An independent NumPy reference of examples/energy_icl.mlir's forward, to
check `unroll-run --predict` on a trained energy model (test/Integration/CPU/
energy-icl-predict.test) and to look inside one (scripts/energy-icl-attention.py).

  energy_icl_numpy.py make PROMPTS.safetensors B K D     xs [B,K,D], ys [B,K]
  energy_icl_numpy.py compare CKPT_DIR PROMPTS PREDS LOOPS
  energy_icl_numpy.py halt CKPT_DIR PROMPTS PREDS TOL MAX

halt checks `--predict --loops auto`: each prompt stops at the first t with
||Y_t - Y_{t-1}|| <= TOL ||Y_{t-1}|| (Frobenius, over its tokens), at most
MAX; PREDS must hold its predictions and 'loops', the t each prompt used.

compare recomputes, from the checkpoint's tensors, P = read_in(Z) and LOOPS
iterations of Y <- ReLU(A Y W_s + alpha P), A the causal reweighted softmax
softmax_j(u_i.u_j - |u_j|^2/2) with u = Y W_a, W_s = (1 - alpha) I -
alpha (W_f + W_f^T)/2, Y_0 = P; predictions read_out(Y) at the x tokens.
"""
import json, os, struct, sys
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


def write(path, tensors):
    header, data, off = {}, b"", 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a, dtype=np.float64).tobytes()
        header[name] = {"dtype": "F64", "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def checkpoint(ckpt):
    """The tensors of a checkpoint folder's latest step."""
    step = open(os.path.join(ckpt, "latest")).read().strip()
    return read(os.path.join(ckpt, step, "model.safetensors"))


def iteration(th, xs, ys):
    """P = read_in(Z) [B, n, D] and the loop's step f(Y) -> (Y', A), A the
    attention matrix [B, n, n] it used (shared with anderson-probe.py)."""
    B, K, D = xs.shape
    z = np.zeros((B, 2 * K, D))
    z[:, 0::2] = xs
    z[:, 1::2, 0] = ys
    P = z @ th["_read_in.weight"].T + th["_read_in.bias"]
    Wa, Wf, alpha = th["W_a"], th["W_f"], th["alpha"][0]
    Ws = (1 - alpha) * np.eye(Wf.shape[0]) - alpha * (Wf + Wf.T) / 2
    n = 2 * K
    causal = np.tril(np.ones((n, n), dtype=bool))

    def step(Y):
        U = Y @ Wa
        logits = U @ U.transpose(0, 2, 1) - 0.5 * (U * U).sum(-1)[:, None, :]
        logits = np.where(causal, logits, -np.inf)
        A = np.exp(logits - logits.max(-1, keepdims=True))
        A /= A.sum(-1, keepdims=True)
        return np.maximum(A @ Y @ Ws + alpha * P, 0.0), A

    return P, step


def forward(th, xs, ys, loops, on_attention=None, halt=None):
    """Predictions at the x tokens after LOOPS iterations; on_attention(t, A)
    sees the attention matrix [B, n, n] of every iteration t = 1..LOOPS.
    halt=TOL: each prompt keeps its iterate from the first t whose relative
    change is <= TOL; returns (predictions, t per prompt)."""
    B = xs.shape[0]
    P, step = iteration(th, xs, ys)
    Y = P.copy()
    used = np.zeros(B)
    halted = np.zeros(B, dtype=bool)
    for t in range(loops):
        if halt is not None and halted.all():
            break
        prev = Y
        Y, A = step(Y)
        if on_attention:
            on_attention(t + 1, A)
        if halt is not None:
            Y = np.where(halted[:, None, None], prev, Y)
            used += ~halted
            change = np.sqrt(((Y - prev) ** 2).sum((1, 2)))
            halted |= change <= halt * np.sqrt((prev ** 2).sum((1, 2)))
    preds = (Y @ th["_read_out.weight"].T + th["_read_out.bias"])[:, 0::2, 0]
    return (preds, used) if halt is not None else preds


def main():
    if sys.argv[1] == "make":
        B, K, D = map(int, sys.argv[3:6])
        rng = np.random.default_rng(7)
        xs = rng.standard_normal((B, K, D))
        w = rng.standard_normal((B, D))
        write(sys.argv[2], {"xs": xs, "ys": np.einsum("bkd,bd->bk", xs, w)})
        return 0
    if sys.argv[1] == "halt":
        ckpt, prompts, preds = sys.argv[2:5]
        tol, most = float(sys.argv[5]), int(sys.argv[6])
        pr, out = read(prompts), read(preds)
        want, used = forward(checkpoint(ckpt), pr["xs"], pr["ys"], most, halt=tol)
        err = np.abs(out["preds"] - want).max() / max(np.abs(want).max(), 1e-12)
        # f32 rounding may move a prompt that sits on the threshold by one loop.
        off = np.abs(out["loops"] - used)
        ok = err < 1e-3 and off.max() <= 1 and (off > 0).mean() <= 0.125
        print(f"--predict --loops auto vs NumPy reference: {len(used)} prompts, tol {tol:g}: loops used "
              f"mean {used.mean():.1f} (library {out['loops'].mean():.1f}), {int((off > 0).sum())} "
              f"prompts differ by one; max rel. error of predictions {err:.3g}")
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    ckpt, prompts, preds, loops = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    pr, got = read(prompts), read(preds)["preds"]
    want = forward(checkpoint(ckpt), pr["xs"], pr["ys"], loops)
    B, K, _ = pr["xs"].shape
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-12)
    print(f"--predict vs NumPy reference: {B} prompts, {K} points, {loops} loops: max rel. error {err:.3g}")
    print("PASS" if err < 1e-4 else "FAIL")
    return 0 if err < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
