"""von Oswald et al.'s construction for the kernel energies of
examples/energy_icl_*.mlir, and the check that the compiled loop computes
what it claims (test/Integration/CPU/energy-icl-construction.test).

  energy-icl-construction.py weights INFO.json OUT.safetensors [ALPHAS]
      The model's weights set by hand: the kernel reads x (W_q = I on the
      features [0, d)), the value is the y slot (W_v = e_y), the read-out
      -e_y; ALPHAS (comma-separated) fill a learned per-iteration step size
      'alpha'. With them, iteration t of the loop is one gradient step of
      size alpha_t on the prompt's least squares 1/2 ||y - X w||^2 (the
      y slots hold the residuals, the query's y slot -x_q.w_t).
  energy-icl-construction.py prompts OUT.safetensors B K D SEED
      xs [B, K, D] ~ N(0, 1), ys = xs w, w ~ N(0, I) per prompt.
  energy-icl-construction.py check PROMPTS PREDS LOOPS gd ALPHAS | ls | ls-nonsquare
      PREDS (from unroll-run --predict, one prediction per point from the
      points before it) against: LOOPS gradient steps from w = 0 with the
      step sizes ALPHAS (gd), or the least-squares solution (ls: the
      minimum-norm one while k < d; ls-nonsquare leaves out the points with
      exactly k = d before them, whose square systems are the worst
      conditioned: there d steps of conjugate gradients in f64 lose digits
      to rounding, and one step more recovers them). Prints the largest
      error relative to the predictions' scale; passes at 1e-12.
"""
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from energy_icl_numpy import read  # noqa: E402
from safetensors_f64 import write_f64  # noqa: E402


def weights(info_path, out, alphas):
    info = json.load(open(info_path))
    model = info["models"][0]
    d = model["prompt_dim"]
    t = {}
    for p in model["params"]:
        shape, name = p["shape"], p["name"]
        w = np.zeros(shape)
        if name == "W_q":  # the kernel on x: q_i = x_i
            w[:d, :d] = np.eye(d)
        elif name == "W_v":  # the value: the y slot
            w[d, 0] = 1.0
        elif name == "_read_out.weight":  # the prediction: minus the query's y slot
            w[0, d] = -1.0
        elif name == "alpha":
            a = [float(v) for v in alphas.split(",")]
            w[:] = (a + [a[-1]] * len(w))[: len(w)]
        elif name != "_read_out.bias":
            sys.exit("construction: unexpected parameter '%s'" % name)
        t[name] = w
    write_f64(out, t)


def prompts(out, B, K, D, seed):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((B, K, D))
    w = rng.standard_normal((B, D))
    write_f64(out, {"xs": xs, "ys": np.einsum("bkd,bd->bk", xs, w)})


def check(prompts_path, preds_path, loops, kind, alphas):
    p = read(prompts_path)
    xs, ys = p["xs"], p["ys"]
    got = read(preds_path)["preds"]
    B, K, D = xs.shape
    a = [float(v) for v in alphas.split(",")] if kind == "gd" else []
    want = np.zeros((B, K))
    keep = np.ones(K, dtype=bool)
    if kind == "ls-nonsquare" and D < K:
        keep[D] = False
    for b in range(B):
        for i in range(K):  # point i from the points before it
            X, y = xs[b, :i], ys[b, :i]
            if kind == "gd":
                w = np.zeros(D)
                for t in range(loops):
                    w = w + a[min(t, len(a) - 1)] * X.T @ (y - X @ w)
            else:
                w = np.linalg.lstsq(X, y, rcond=None)[0] if i else np.zeros(D)
            want[b, i] = xs[b, i] @ w
    err = np.abs(got - want)[:, keep].max() / max(np.abs(want).max(), 1e-300)
    print("construction (%s, %d loops): %d prompts, %d points: max |compiled - reference| / max "
          "|reference| = %.3g" % (kind, loops, B, K, err))
    return err


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "weights":
        weights(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "0.1")
    elif cmd == "prompts":
        prompts(sys.argv[2], *(int(v) for v in sys.argv[3:7]))
    elif cmd == "check":
        tol = 1e-12
        err = check(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5],
                    sys.argv[6] if len(sys.argv) > 6 else "")
        print("PASS" if err <= tol else "FAIL (tolerance %g)" % tol)
        sys.exit(0 if err <= tol else 1)
    else:
        sys.exit(__doc__)
