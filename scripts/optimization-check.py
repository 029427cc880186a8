#!/usr/bin/env python3
"""Checks the sparse-coding and Hopfield energies of a compiled library
against independent NumPy code (usage: optimization-check.py LIB).

For each energy of test/Integration/CPU/Inputs/optimization-energies.mlir:
  * the compiled descent (@E_descend) against the same algorithm written
    here from its formula: ISTA with L = the largest eigenvalue of AᵀA from
    numpy.linalg.eigvalsh, and the Hopfield update softmax(β ξ Xᵀ) X;
  * the compiled energies against the energy written here;
  * the energy never increases along the descent;
  * the compiled gradient (@E_descend_vjp) of <W, Y_T> against central
    differences, for Y_0, X and every parameter;
  * the learned unrollings' compiled Adam (@E_adam) against its formula.
Prints one line per check and exits 1 if any fails."""
import ctypes
import json
import sys

import os

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from unroll_ctypes import ref as memref  # noqa: E402

lib = ctypes.CDLL(sys.argv[1])
lib.unroll_model_info.restype = ctypes.c_char_p
info = json.loads(lib.unroll_model_info().decode())
energies = {e["name"]: e for e in info["energies"]}
failed = []


def ref(a):
    return ctypes.byref(memref(a))


def descend(e, y0, x, theta, iters):
    y, en = np.zeros_like(y0), np.zeros(iters + 1)
    getattr(lib, "_mlir_ciface_" + e["descend"])(ref(y0), ref(x), ref(theta), ref(y), ref(en))
    return y, en


def descend_vjp(e, y0, x, theta, iters, dy):
    dy0, dx, g = np.zeros_like(y0), np.zeros_like(x), np.zeros_like(theta)
    fn = getattr(lib, "_mlir_ciface_" + e["descend_vjp"])
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_void_p] * 4
    fn(ref(y0), ref(x), ref(theta), iters, ref(dy), ref(dy0), ref(dx), ref(g))
    return dy0, dx, g


def check(name, ok, detail):
    print(("PASS" if ok else "FAIL") + f" {name}: {detail}")
    if not ok:
        failed.append(name)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(1e-300, np.max(np.abs(b))))


def grad_check(name, e, y0, x, theta, iters, rng, tol=1e-6, step=1e-6):
    """Central differences of <W, Y_T> with steps `step` (relative): small
    enough not to cross a soft threshold's kink, large enough for round-off
    (the Hopfield energy's softmax needs 1e-5)."""
    w = rng.standard_normal(y0.shape)
    dy0, dx, g = descend_vjp(e, y0, x, theta, iters, w)
    worst = 0.0
    for arr, grad, what in ((y0, dy0, "Y0"), (x, dx, "X"), (theta, g, "theta")):
        for idx in rng.choice(arr.size, size=min(arr.size, 12), replace=False):
            h = step * max(1.0, abs(arr.flat[idx]))
            old = arr.flat[idx]
            arr.flat[idx] = old + h
            fp = np.sum(w * descend(e, y0, x, theta, iters)[0])
            arr.flat[idx] = old - h
            fm = np.sum(w * descend(e, y0, x, theta, iters)[0])
            arr.flat[idx] = old
            fd = (fp - fm) / (2 * h)
            # relative, with a floor at 1% of the array's largest entry
            # (round-off of a central difference on a tiny entry)
            err = abs(fd - grad.flat[idx]) / max(abs(fd), 1e-2 * np.max(np.abs(grad)), 1e-300)
            worst = max(worst, err)
    check(f"{name} gradient vs central differences", worst < tol,
          f"max relative error {worst:.2e} over Y0, X and the parameters (tol {tol:g})")


rng = np.random.default_rng(0)

# --- sparse coding ---------------------------------------------------------
def power_method(A, iterations):
    """L as the ISTA step computes it: the power method on AᵀA from
    v_i = 1.5 + sin(12.9898 i), then ‖A v‖²."""
    v = 1.5 + np.sin(12.9898 * np.arange(A.shape[1]))
    v /= np.linalg.norm(v)
    for _ in range(iterations):
        v = A.T @ (A @ v)
        v /= np.linalg.norm(v)
    return float(np.sum((A @ v) ** 2))


def soft(v, t, nonneg):
    return np.maximum(v - t, 0.0) if nonneg else np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


for name, nonneg in (("ista", False), ("ista_nonneg", True)):
    e = energies[name]
    lam = next(t["lambda"] for t in e["terms"] if t["op"] == "l1")
    m, n, rows, iters = 8, 12, 5, 40
    A = rng.standard_normal((m, n)) / np.sqrt(m)
    A /= np.linalg.norm(A, axis=0)
    xs = rng.standard_normal((rows, n)) * (rng.random((rows, n)) < 0.3)
    if nonneg:
        xs = np.abs(xs)
    b = xs @ A.T + 0.01 * rng.standard_normal((rows, m))
    theta = np.ascontiguousarray(A.ravel())
    y0 = np.zeros((rows, n))
    y, en = descend(e, y0, b, theta, iters)
    # L as the step computes it must match the largest eigenvalue.
    L = power_method(A, e["power_iterations"])
    ev = np.linalg.eigvalsh(A.T @ A)
    check(f"{name} power-method L vs eigvalsh", abs(L - ev[-1]) < 1e-12 * ev[-1],
          f"L = {L:.12f}, λ_max = {ev[-1]:.12f}, next {ev[-2]:.4f}")
    ref_y, ref_e = y0.copy(), []
    energy = lambda z: 0.5 * np.sum((b - z @ A.T) ** 2) + lam * np.sum(np.abs(z))
    ref_e.append(energy(ref_y))
    for _ in range(iters):
        ref_y = soft(ref_y + (b - ref_y @ A.T) @ A / L, lam / L, nonneg)
        ref_e.append(energy(ref_y))
    check(f"{name} iterates vs NumPy ISTA (same power method)", rel(y, ref_y) < 1e-9,
          f"max |Δ|/max|x| = {rel(y, ref_y):.2e} after {iters} steps")
    check(f"{name} energies vs NumPy", rel(en, np.array(ref_e)) < 1e-9,
          f"{rel(en, np.array(ref_e)):.2e}; E: {en[0]:.4f} -> {en[-1]:.4f}")
    inc = int(np.sum(np.diff(en) > 1e-12 * abs(en[0])))
    check(f"{name} descent", inc == 0, f"{inc} of {iters} steps increased the energy")
    if nonneg:
        check(f"{name} feasibility", bool(np.all(y >= 0)), "every code entry >= 0")
    # gradients: start from a non-zero point so that the threshold's two
    # sides are both exercised.
    y0 = 0.1 * rng.standard_normal((rows, n))
    grad_check(name, e, y0, b, theta, 3, rng)

# FISTA (schedule fista: the ISTA step at the extrapolated point, the
# previous iterate a second loop state): iterates, energies, its O(1/k²)
# bound, and gradients through both states.
e = energies["fista"]
m, n, rows, iters = 8, 12, 5, 60
A = rng.standard_normal((m, n)) / np.sqrt(m)
A /= np.linalg.norm(A, axis=0)
xs = rng.standard_normal((rows, n)) * (rng.random((rows, n)) < 0.3)
b = xs @ A.T + 0.01 * rng.standard_normal((rows, m))
theta = np.ascontiguousarray(A.ravel())
lam = 0.05
L = power_method(A, e["power_iterations"])
energy = lambda z: 0.5 * np.sum((b - z @ A.T) ** 2) + lam * np.sum(np.abs(z))
y, en = descend(e, np.zeros((rows, n)), b, theta, iters)
x, xp, t, ref_e = np.zeros((rows, n)), np.zeros((rows, n)), 1.0, [energy(np.zeros((rows, n)))]
for _ in range(iters):
    tn = (1 + np.sqrt(1 + 4 * t * t)) / 2
    z = x + (t - 1) / tn * (x - xp)
    xp, x, t = x, soft(z + (b - z @ A.T) @ A / L, lam / L, False), tn
    ref_e.append(energy(x))
check("fista iterates vs NumPy FISTA (Beck & Teboulle's t_k)", rel(y, x) < 1e-9,
      f"max |Δ|/max|x| = {rel(y, x):.2e} after {iters} steps")
check("fista energies vs NumPy", rel(en, np.array(ref_e)) < 1e-9, f"{rel(en, np.array(ref_e)):.2e}")
# F(x_k) − F* ≤ 2 L ‖x_0 − x*‖² / (k + 1)², with x*, F* from 2000 more steps
y_star, en_star = descend(e, np.zeros((rows, n)), b, theta, 2000)
const = max((en[k] - en_star[-1]) * (k + 1) ** 2 / (2 * L * np.sum(y_star ** 2)) for k in range(1, iters + 1))
check("fista O(1/k²) bound", const <= 1.0, f"max (F_k − F*)(k+1)²/(2L‖x*‖²) = {const:.3f} (≤ 1)")
grad_check("fista", e, 0.1 * rng.standard_normal((rows, n)), b, theta, 4, rng)

# --- learned unrollings (LISTA-CP, ALISTA) -------------------------------------
def params_of(e):
    return {p["name"]: p for p in e["params"]}


def support_mask(v, k, theta, nonneg):
    """LISTA-CPSS: the round(p n) largest magnitudes of each row, p = min(1.2 (k+1), 13)%,
    among the entries past the threshold theta."""
    mag = v if nonneg else np.abs(v)
    count = int(np.round(min(1.2 * (k + 1), 13.0) / 100 * v.shape[1]))
    mask = np.zeros_like(v, dtype=bool)
    if count > 0:
        idx = np.argsort(-mag, axis=1)[:, :count]
        np.put_along_axis(mask, idx, True, axis=1)
    return mask & (mag > theta)


for name in ("lista_cp", "alista", "lista", "lista_cpss"):
    e = energies[name]
    ps = params_of(e)
    nonneg = any(t.get("nonneg") for t in e["terms"] if t["op"] == "l1")
    support = name == "lista_cpss"
    m, n, rows, K = 8, e["dim"], 5, ps["gamma"]["shape"][0]
    theta = np.zeros(e["num_params"])
    def view(p):
        q = ps[p]
        return theta[q["offset"]:q["offset"] + int(np.prod(q["shape"]))].reshape(q["shape"])
    A = rng.standard_normal((m, n)) / np.sqrt(m)
    view("A")[...] = A
    view("W")[...] = A / 3.0 + 0.05 * rng.standard_normal(ps["W"]["shape"])
    view("gamma")[...] = 1.0 + 0.2 * rng.standard_normal(K)
    view("theta")[...] = 0.02 + 0.01 * rng.random(K)
    if "W2" in ps:
        view("W2")[...] = np.eye(n) - A.T @ A / 3.0 + 0.05 * rng.standard_normal(ps["W2"]["shape"])
    b = rng.standard_normal((rows, m))
    y0 = 0.1 * np.abs(rng.standard_normal((rows, n)))
    steps = K + 2  # past the last layer: the last layer's parameters again
    y, _ = descend(e, y0, b, theta, steps)
    ref_y = y0.copy()
    for k in range(steps):
        kk = min(k, K - 1)
        W = view("W")[kk] if view("W").ndim == 3 else view("W")
        if "W2" in ps:
            v = view("gamma")[kk] * b @ W + ref_y @ view("W2")[kk]
        else:
            v = ref_y + view("gamma")[kk] * (b - ref_y @ A.T) @ W
        out = soft(v, view("theta")[kk], nonneg)
        if support:
            out = np.where(support_mask(v, kk, view("theta")[kk], nonneg), v, out)
        ref_y = out
    check(f"{name} layers vs NumPy x' = soft(x + γ_k W_kᵀ(b − A x), θ_k)"
          + (" (W1 b + W2 x)" if "W2" in ps else "") + (" with support selection" if support else ""), rel(y, ref_y) < 1e-12,
          f"max |Δ|/max|x| = {rel(y, ref_y):.2e} over {steps} steps ({K} layers)")
    grad_check(name, e, y0, b, theta, steps, rng)

# --- the learned unrollings' optimizer (@E_adam) ----------------------------
# Three steps of the compiled Adam against PyTorch's formulation written here:
# m ← β1 m + (1−β1) g, v ← β2 v + (1−β2) g², θ ← θ − lr m̂ / (√v̂ + ε).
e = energies["lista_cp"]
size = e["num_params"]
arng = np.random.default_rng(7)  # its own stream: the checks above and below keep theirs
theta = arng.standard_normal(size)
m_ref, v_ref, t_ref = np.zeros(size), np.zeros(size), theta.copy()
mom, vel, got = np.zeros(size), np.zeros(size), theta.copy()
lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
adam = getattr(lib, "_mlir_ciface_" + e["adam"])
for step in range(1, 4):
    g = arng.standard_normal(size) * (arng.random(size) < 0.7)
    hyper = np.array([lr / (1 - b1 ** step), np.sqrt(1 - b2 ** step), b1, b2, eps])
    partial = np.zeros(7)
    adam(ref(got), ref(g), ref(mom), ref(vel), ref(hyper), ref(partial))
    m_ref = b1 * m_ref + (1 - b1) * g
    v_ref = b2 * v_ref + (1 - b2) * g * g
    t_ref = t_ref - lr * (m_ref / (1 - b1 ** step)) / (np.sqrt(v_ref / (1 - b2 ** step)) + eps)
    norm_ok = abs(partial.sum() - np.sum(g * g)) < 1e-12 * np.sum(g * g)
check("lista_cp Adam (@E_adam) vs NumPy, 3 steps", rel(got, t_ref) < 1e-12 and rel(vel, v_ref) < 1e-12 and norm_ok,
      f"max |Δθ|/max|θ| = {rel(got, t_ref):.2e}, squared gradient norm {'matches' if norm_ok else 'DIFFERS'}")
check("energies without trained parameters have no Adam", e["adam"] and energies["hopfield"]["adam"] is None,
      f"lista_cp: {e['adam']}, hopfield: {energies['hopfield']['adam']}")

# --- Hopfield ----------------------------------------------------------------
e = energies["hopfield"]
beta = next(t["beta"] for t in e["terms"] if t["op"] == "lse")
N, d, q, iters = 10, 6, 4, 5
X = rng.standard_normal((N, d))
xi = X[:q] + 0.5 * rng.standard_normal((q, d))
empty = np.zeros(1)
y, en = descend(e, xi, X, empty, iters)


def hop_energy(z):
    s = beta * z @ X.T
    mx = s.max(axis=1, keepdims=True)
    lse = (mx[:, 0] + np.log(np.exp(s - mx).sum(axis=1))) / beta
    return -lse.sum() + 0.5 * np.sum(z * z)


ref_y, ref_e = xi.copy(), [hop_energy(xi)]
for _ in range(iters):
    s = beta * ref_y @ X.T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ref_y = p @ X
    ref_e.append(hop_energy(ref_y))
check("hopfield iterates vs NumPy softmax(β ξ Xᵀ) X", rel(y, ref_y) < 1e-12,
      f"max |Δ|/max|ξ| = {rel(y, ref_y):.2e}")
check("hopfield energies vs NumPy", rel(en, np.array(ref_e)) < 1e-12,
      f"{rel(en, np.array(ref_e)):.2e}; E: {en[0]:.4f} -> {en[-1]:.4f}")
grad_check("hopfield", e, xi.copy(), X.copy(), empty, 3, rng, step=1e-5)

print("all checks passed" if not failed else f"{len(failed)} checks failed: {', '.join(failed)}")
sys.exit(1 if failed else 0)
