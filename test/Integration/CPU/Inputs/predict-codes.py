"""unroll-run --task sparse_coding --predict against NumPy.

  predict-codes.py gen OUT B m SEED        measurements 'b' [B, m] ~ N(0, 1)
  predict-codes.py check CKPT IN OUT [DICT]
                                           OUT's codes 'x' are LISTA-CP's layers
                                           x' = soft(x + γ_k W_kᵀ(b − A x), θ_k)
                                           from x = 0 with the checkpoint's f64
                                           parameters and OUT's dictionary 'A'
                                           (with DICT: DICT's 'A', which OUT's
                                           must equal)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "scripts"))
from safetensors_f64 import read_f64 as read, write_f64  # noqa: E402


if sys.argv[1] == "gen":
    out, rows, m, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    write_f64(out, {"b": np.random.default_rng(seed).standard_normal((rows, m))})
    sys.exit(0)

ckpt, inp, out = sys.argv[2:5]
step = open(os.path.join(ckpt, "latest")).read().strip()
p = read(os.path.join(ckpt, step, "optimizer.safetensors"))
W, gamma, theta = p["master.W"], p["master.gamma"], p["master.theta"]
b = read(inp)["b"]
o = read(out)
A, x = o["A"], o["x"]
if len(sys.argv) > 5:
    given = read(sys.argv[5])["A"]
    if given.shape != A.shape or np.any(given != A):
        sys.exit(f"{out}: its dictionary 'A' is not {sys.argv[5]}'s")
    A = given
ref = np.zeros((b.shape[0], A.shape[1]))
for k in range(len(gamma)):
    v = ref + gamma[k] * (b - ref @ A.T) @ W[k]
    ref = np.sign(v) * np.maximum(np.abs(v) - theta[k], 0.0)
err = np.max(np.abs(x - ref)) / max(np.max(np.abs(ref)), 1e-300)
nonzero = int(np.count_nonzero(ref))
print("predict" if err < 1e-12 and nonzero > 0 else "predict DIFFERS",
      f"max |Δ|/max|x| = {err:.2e}, {x.shape[0]} codes, {nonzero} nonzeros, {len(gamma)} layers")
