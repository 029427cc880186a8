"""ALISTA as an unroll.model (examples/alista.mlir's @alista_model) against ALISTA's
layers written again here in NumPy, through the library's C entry points:

  forward   @M_forward's code after every layer vs the NumPy layers (f32)
  loss      @M_loss_grad's windowed losses vs the NumPy layers' squared
            errors (f64), for windows (b, T) = (16, 16), (16, 1), (5, 1)
            and (9, 4); its gradient for gamma and theta vs central
            differences of the NumPy loss (f64), where the truncated window
            reaches
  vjp_tape  @M_forward_tape + @M_vjp_tape with a cotangent at the last
            layer alone: the last layer's loss through all layers (f64)

The dictionary A is the one the shipped checkpoint was trained on (written by
`unroll-run --predict`), W its analytic weight, gamma/theta the checkpoint's.

usage: alista-model-check.py LIB_F32 LIB_F64 DICT.safetensors CHECKPOINT
"""
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../scripts"))
from safetensors_f64 import read_f64  # noqa: E402
from unroll import Library  # noqa: E402
from unroll._library import memref  # noqa: E402

lib32, lib64, dict_path, ckpt = sys.argv[1:5]
A = read_f64(dict_path)["A"]
m, n = A.shape
G = np.linalg.solve(A @ A.T, A)
W = G / (A * G).sum(0, keepdims=True)
latest = open(os.path.join(ckpt, "latest")).read().strip()
params = read_f64(os.path.join(ckpt, latest, "model.safetensors"))
gamma0, theta0 = params["gamma"], params["theta"]
layers = len(gamma0)

rng = np.random.default_rng(7)
codes = (rng.random((40, n)) < 0.1) * rng.standard_normal((40, n))
b = codes @ A.T


def numpy_layers(gamma, theta, count, dtype):
    """x_1 .. x_count of ALISTA with support selection, from x_0 = 0."""
    At, Wt = A.astype(dtype), W.astype(dtype)
    bt = b.astype(dtype)
    x = np.zeros((len(b), n), dtype)
    out = []
    for k in range(count):
        z = x + dtype(gamma[k]) * ((bt - x @ At.T) @ Wt)
        a = np.abs(z)
        p = min(1.2 * (k + 1), 13.0)
        cut = np.sort(a, axis=1)[:, int(round((1 - p / 100) * (n - 1)))][:, None]
        free = (a > theta[k]) & (a > cut)
        x = np.where(free, z, np.sign(z) * np.maximum(a - dtype(theta[k]), 0))
        out.append(x.astype(np.float64))
    return out


def numpy_loss(gamma, theta, loops, window):
    xs = numpy_layers(gamma, theta, loops, np.float64)
    return np.mean([((x - codes) ** 2).mean() for x in xs[loops - window:]])


class Compiled:
    def __init__(self, path):
        self.lib = Library(path)
        self.info = self.lib.model()
        self.dtype = np.float32 if self.lib.element_type == "f32" else np.float64
        assert self.info["encoding"] == "dense" and self.info["outputs"] == n, self.info
        self.theta = np.zeros(self.info["num_params"], self.dtype)
        self.offsets = {p["name"]: p["offset"] for p in self.info["params"]}
        self.set("A", A)
        self.set("W", W)
        self.z = np.ascontiguousarray(b.reshape(len(b), 1, m), self.dtype)

    def set(self, name, v):
        o = self.offsets[name]
        self.theta[o:o + v.size] = v.ravel()

    def _ref(self, a):
        return ctypes.byref(memref(a.ctypes.data, a.shape))

    def forward(self, loops):
        preds = np.zeros((loops, len(b), n), self.dtype)
        self.lib.entry(self.info["forward"])(self._ref(self.z), self._ref(self.theta),
                                             ctypes.c_int64(loops), self._ref(preds))
        return preds.astype(np.float64)

    def loss_grad(self, loops, window):
        ys = np.ascontiguousarray(codes, self.dtype)
        losses = np.zeros(min(loops, window), self.dtype)
        grad = np.zeros_like(self.theta)
        self.lib.entry(self.info["loss_grad"])(
            self._ref(self.z), self._ref(ys), self._ref(self.theta), ctypes.c_int64(loops),
            ctypes.c_int64(window), self._ref(losses), self._ref(grad))
        return losses.astype(np.float64), grad.astype(np.float64)


ok = True
f32 = Compiled(lib32)
f32.set("gamma", gamma0)
f32.set("theta", theta0)
mine = numpy_layers(gamma0, theta0, layers, np.float32)
got = f32.forward(layers)
worst = max(np.abs(got[k] - mine[k]).max() for k in range(layers))
nmse = [10 * np.log10(((x - codes) ** 2).sum() / (codes ** 2).sum()) for x in got]
print(f"forward f32: {layers} layers, max |compiled - numpy| = {worst:.1e}; NMSE at layer "
      f"{layers}: compiled {nmse[-1]:.2f} dB, numpy "
      f"{10 * np.log10(((mine[-1] - codes) ** 2).sum() / (codes ** 2).sum()):.2f} dB")
ok &= worst <= 1e-3

f64 = Compiled(lib64)
f64.set("gamma", gamma0)
f64.set("theta", theta0)


def central(loss, name, k):
    """d loss / d name_k by central differences of a NumPy loss(gamma, theta)."""
    base = gamma0 if name == "gamma" else theta0
    h = 1e-6 * max(1.0, abs(base[k]))
    vals = []
    for s in (h, -h):
        v = base.copy()
        v[k] += s
        vals.append(loss(v, theta0) if name == "gamma" else loss(gamma0, v))
    return (vals[0] - vals[1]) / (2 * h)


def compare(grad, loss, trained):
    """Max relative error of grad's gamma/theta entries in `trained` against
    central differences, and whether every other entry is exactly 0."""
    worst, zero = 0.0, True
    scale = 1e-3 * np.abs(grad).max()
    for name in ("gamma", "theta"):
        o = f64.offsets[name]
        for k in range(layers):
            if k in trained:
                fd = central(loss, name, k)
                worst = max(worst, abs(grad[o + k] - fd) / (abs(fd) + scale))
            else:
                zero &= grad[o + k] == 0.0
    return worst, zero


# @M_loss_grad: the mean loss over the last T of b layers, back-propagated
# through those T (truncated): exact for the layers in the window, zero for
# the layers before it and past b.
for loops, window in [(16, 16), (16, 1), (5, 1), (9, 4)]:
    losses, grad = f64.loss_grad(loops, window)
    xs = numpy_layers(gamma0, theta0, loops, np.float64)
    want = np.array([((x - codes) ** 2).mean() for x in xs[loops - window:]])
    rel = np.abs(losses - want).max() / want.max()
    worst, zero = compare(grad, lambda g, t: numpy_loss(g, t, loops, window),
                          range(loops - window, loops))
    print(f"loss_grad f64 b = {loops}, T = {window}: losses vs numpy rel {rel:.1e}; gradient "
          f"(layers {loops - window + 1}..{loops}) vs central differences rel {worst:.1e}; "
          f"others zero: {zero}")
    ok &= rel <= 1e-9 and worst <= 1e-4 and zero

# @M_forward_tape + @M_vjp_tape with a cotangent at the last layer alone:
# the last layer's loss, back-propagated through every layer (the whole stack
# trained at layer b).
for loops in (16, 6) if f64.info["forward_tape"] else ():
    info, B = f64.info, len(b)
    ws = np.zeros(B * (loops + 1) * info["window_workspace"]["state"], np.float64)
    preds = np.zeros((loops, B, n))
    f64.lib.entry(info["forward_tape"])(f64._ref(f64.z), f64._ref(preds), f64._ref(f64.theta),
                                        ctypes.c_int64(loops), ctypes.c_int64(loops), f64._ref(ws))
    dpreds = np.zeros_like(preds)
    dpreds[-1] = 2 * (preds[-1] - codes) / codes.size
    grad = np.zeros_like(f64.theta)
    f64.lib.entry(info["vjp_tape"])(f64._ref(f64.z), f64._ref(dpreds), f64._ref(f64.theta),
                                    ctypes.c_int64(loops), ctypes.c_int64(loops), f64._ref(ws),
                                    f64._ref(grad))
    worst, zero = compare(grad, lambda g, t: numpy_loss(g, t, loops, 1), range(loops))
    print(f"vjp_tape f64 b = {loops}, the last layer's loss: gradient (layers 1..{loops}) vs "
          f"central differences rel {worst:.1e}; others zero: {zero}")
    ok &= worst <= 1e-4 and zero
if not f64.info["forward_tape"]:
    print("vjp_tape: not in this library (the GPU pipelines leave it out)")
print("agree" if ok else "DIFFER")
