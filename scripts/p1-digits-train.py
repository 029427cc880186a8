#!/usr/bin/env python3
"""P1 §6, Fig. 6: the energy of a symmetric-weight Transformer *after
training*, on real data.

Trains the residual variant of examples/digits_energy.mlir (12 iterations of
Y <- ReLU[softmax(Y W_a^s Y^T) Y W_f^s + alpha X]) plus a linear read-out
(mean over tokens -> 10 classes, softmax cross-entropy) on scikit-learn's
digits for 2000 SGD steps. The energy's parameter gradient comes from the
compiled library's own @E_vjp (unroll's compiler-built VJP through the MM,
gradient and prox steps), called through ctypes; the read-out's in numpy.
Then writes EVAL.safetensors (200 held-out images plus the trained W_a, W_f)
for `unroll-run --task energy --input`, which reports the energy per
iteration and how many traces descend monotonically.

  scripts/p1-digits-train.py LIB.so OUT_DIR [--steps 2000] [--lr 0.05]
      [--batch 32] [--seed 0] [--energy digits_energy_residual]
"""
import argparse
import ctypes
import json
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_f64 import write_f64  # noqa: E402
from unroll_ctypes import ref  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("lib")
ap.add_argument("out")
ap.add_argument("--steps", type=int, default=2000)
ap.add_argument("--lr", type=float, default=0.05)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--energy", default="digits_energy_residual")
ap.add_argument("--gradcheck", action="store_true",
                help="compare the loss gradient (VJP) with central differences, then exit")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)

lib = ctypes.CDLL(os.path.abspath(a.lib))
lib.unroll_model_info.restype = ctypes.c_char_p
info = json.loads(lib.unroll_model_info().decode())
e = next(x for x in info["energies"] if x["name"] == a.energy)
if not e.get("vjp"):
    raise SystemExit(f"{a.lib}: energy {a.energy} has no compiled gradient")
iters = e["iterations"]


trace_fn = getattr(lib, "_mlir_ciface_" + e["trace"])
vjp_fn = getattr(lib, "_mlir_ciface_" + e["vjp"])
vjp_fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_void_p]


def run(x, theta):
    y, en = np.zeros_like(x), np.zeros(iters + 1)
    rx, rt, ry, re = ref(x), ref(theta), ref(y), ref(en)
    trace_fn(ctypes.byref(rx), ctypes.byref(rt), ctypes.byref(ry), ctypes.byref(re))
    return y, en


def vjp(x, theta, dy):
    dx, g = np.zeros_like(x), np.zeros_like(theta)
    rx, rt, rdy, rdx, rg = ref(x), ref(theta), ref(dy), ref(dx), ref(g)
    vjp_fn(ctypes.byref(rx), ctypes.byref(rt), iters, ctypes.byref(rdy), ctypes.byref(rdx),
           ctypes.byref(rg))
    return g


digits = load_digits()
rng = np.random.default_rng(a.seed)
order = rng.permutation(len(digits.images))
test_idx, train_idx = order[:200], order[200:]
X = digits.images / 16.0
labels = digits.target

theta = np.zeros(e["num_params"])
for p in e["params"]:
    n = int(np.prod(p["shape"]))
    theta[p["offset"]:p["offset"] + n] = p.get("std", 0.1) * rng.standard_normal(n)
d = X.shape[2]
W_out, b_out = 0.1 * rng.standard_normal((d, 10)), np.zeros(10)


def forward(i):
    x = np.ascontiguousarray(X[i])
    y, en = run(x, theta)
    z = y.mean(axis=0) @ W_out + b_out
    z -= z.max()
    prob = np.exp(z) / np.exp(z).sum()
    return x, y, prob, en


def accuracy(idx):
    return float(np.mean([np.argmax(forward(i)[2]) == labels[i] for i in idx]))


def sample_loss_grad(i):
    x, y, prob, _ = forward(i)
    dz = prob.copy()
    dz[labels[i]] -= 1
    dy = np.ascontiguousarray(np.tile(W_out @ dz / y.shape[0], (y.shape[0], 1)))
    return -np.log(max(prob[labels[i]], 1e-300)), vjp(x, theta, dy)


if a.gradcheck:
    worst = 0.0
    for i in train_idx[:3]:
        _, g = sample_loss_grad(i)
        for j in rng.choice(len(theta), 8, replace=False):
            h, keep = 1e-6, theta[j]
            theta[j] = keep + h
            up = sample_loss_grad(i)[0]
            theta[j] = keep - h
            down = sample_loss_grad(i)[0]
            theta[j] = keep
            fd = (up - down) / (2 * h)
            worst = max(worst, abs(fd - g[j]) / (abs(fd) + 1e-4))
    print(f"loss gradient through {e['vjp']} vs central differences: max relative error {worst:.3g}")
    print("PASS" if worst < 1e-5 else "FAIL")
    raise SystemExit(0 if worst < 1e-5 else 1)

log = []
print(f"training {a.energy} ({iters} iterations, {e['num_params']} energy parameters + read-out) "
      f"on {len(train_idx)} digits: {a.steps} SGD steps, batch {a.batch}, lr {a.lr}", flush=True)
for step in range(1, a.steps + 1):
    batch = rng.choice(train_idx, a.batch, replace=False)
    g_theta, g_w, g_b, loss = np.zeros_like(theta), np.zeros_like(W_out), np.zeros_like(b_out), 0.0
    for i in batch:
        x, y, prob, _ = forward(i)
        loss -= np.log(max(prob[labels[i]], 1e-300))
        dz = prob.copy()
        dz[labels[i]] -= 1
        pooled = y.mean(axis=0)
        g_w += np.outer(pooled, dz)
        g_b += dz
        dy = np.ascontiguousarray(np.tile(W_out @ dz / y.shape[0], (y.shape[0], 1)))
        g_theta += vjp(x, theta, dy)
    theta -= a.lr * g_theta / a.batch
    W_out -= a.lr * g_w / a.batch
    b_out -= a.lr * g_b / a.batch
    if step % 250 == 0 or step == 1 or step == a.steps:
        log.append({"step": step, "loss": loss / a.batch})
        print(f"step {step:5d}/{a.steps} | loss {loss / a.batch:.4f}", flush=True)

acc = {"train_accuracy_1000": accuracy(train_idx[:1000]), "test_accuracy_200": accuracy(test_idx)}
print(json.dumps(acc), flush=True)

# EVAL.safetensors: the 200 held-out images and the trained energy weights.
tensors = {"X": X[test_idx]}
for p in e["params"]:
    n = int(np.prod(p["shape"]))
    tensors[p["name"]] = theta[p["offset"]:p["offset"] + n].reshape(p["shape"])
write_f64(os.path.join(a.out, "trained.safetensors"), tensors)
json.dump({"energy": a.energy, "steps": a.steps, "lr": a.lr, "batch": a.batch, "seed": a.seed,
           "log": log, **acc}, open(os.path.join(a.out, "training.json"), "w"), indent=2)
print(f"wrote {a.out}/trained.safetensors and training.json", flush=True)
