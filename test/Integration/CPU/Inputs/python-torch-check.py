"""python/unroll against independent computations (usage below). Prints one
PASS/FAIL/SKIP line per check and exits 1 if any fails.

  python-torch-check.py prepare DIR
      DIR/train.safetensors (400 linear-regression prompts of 5 points, d = 3)
      and DIR/prompts.safetensors (4 prompts) for the unroll-run runs
  python-torch-check.py check DIR M64.so M32.so E.so INIT RUN C64.so
      M64/M32: the tiny looped model in f64/f32; E: optimization-energies;
      INIT: M64's checkpoint at step 0, RUN: after 50 steps of unroll-run's
      host Adam on DIR/train.safetensors (batch 8, lr 1e-3, window 4);
      DIR/preds64.safetensors, DIR/preds32.safetensors: unroll-run --predict;
      C64: the tiny model with the concat encoding (f64), DIR/initc its
      checkpoint at step 0, DIR/predsc.safetensors its unroll-run --predict
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "scripts"))
from safetensors_f64 import write_f64  # noqa: E402

if sys.argv[1] == "prepare":
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    r = np.random.default_rng(1)
    xs = r.standard_normal((400, 5, 3))
    w = r.standard_normal((400, 3))
    write_f64(os.path.join(out, "train.safetensors"), {"xs": xs, "ys": np.einsum("nkd,nd->nk", xs, w)})
    xs = r.standard_normal((4, 5, 3))
    write_f64(os.path.join(out, "prompts.safetensors"),
              {"xs": xs, "ys": np.einsum("nkd,nd->nk", xs, r.standard_normal((4, 3)))})
    sys.exit(0)

import torch  # noqa: E402

import unroll  # noqa: E402
import unroll.torch as ut  # noqa: E402
from unroll.torch import _read_safetensors  # noqa: E402

d, m64, m32, e_so, init, run, c64 = sys.argv[2:9]
failed = []


def check(name, ok, detail):
    print(("PASS" if ok else "FAIL") + " %s: %s" % (name, detail))
    if not ok:
        failed.append(name)


def raises(name, kind, fn, words):
    try:
        fn()
    except kind as e:
        ok = all(w in str(e) for w in words)
        check(name, ok, "%s: %s" % (type(e).__name__, e))
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, "raised %s: %s, expected %s" % (type(e).__name__, e, kind.__name__))
        return
    check(name, False, "no exception, expected %s" % kind.__name__)


# --- unroll.Library --------------------------------------------------------
lib = unroll.Library(m64)
check("Library info", lib.info["kind"] == "model" and "tiny64" in lib.models and
      lib.element_type == "f64", repr(lib))
raises("Library: missing file", unroll.UnrollError, lambda: unroll.Library(d + "/none.so"),
       ["none.so", "no such file"])
import _ctypes  # noqa: E402  (a shared library that is not unroll's)

raises("Library: not an unroll library", unroll.UnrollError,
       lambda: unroll.Library(_ctypes.__file__), ["not an unroll library", "unroll_model_info"])
raises("Library: unknown model", unroll.UnrollError, lambda: lib.model("gpt"),
       ["no model named 'gpt'", "tiny64"])

# --- Model: gradient against central differences (f64) ----------------------
torch.manual_seed(0)
model = ut.Model(m64)
xs = torch.randn(2, 3, 3, dtype=torch.float64)
ys = torch.randn(2, 3, dtype=torch.float64)
params = model._ordered()


def through(*ps):
    theta = torch.cat([p.detach().reshape(-1) for p in ps])
    z = model.tokens(xs, ys)
    return ut._ModelFunction.apply(model, 4, 4, True, z, theta, *ps)[-1, :, 0::2]


ok = torch.autograd.gradcheck(through, tuple(p.detach().clone().requires_grad_(True)
                                             for p in params), eps=1e-6, atol=1e-6, rtol=1e-5)
check("Model gradcheck (f64, every parameter, through 4 iterations)", ok,
      "%d parameters" % model.entry["num_params"])
# The window's gradient (P2's loss, the first b − T iterations without
# gradient) against the library's own loss gradient (@M_loss_grad).
model.zero_grad()
loss = ((model.iterates(xs, ys, window=2) - ys) ** 2).mean()
loss.backward()
g = torch.cat([p.grad.reshape(-1) for p in params])
import ctypes  # noqa: E402
from unroll._library import memref  # noqa: E402

lg = lib.entry(model.entry["loss_grad"])
lg.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_void_p] * 2
z = model.tokens(xs, ys)
losses, grad = torch.zeros(2, dtype=torch.float64), torch.zeros(model.entry["num_params"], dtype=torch.float64)
theta = model._theta()
lg(ut._ref(z), ut._ref(ys), ut._ref(theta), 4, 2, ut._ref(losses), ut._ref(grad))
err = float((g - grad).abs().max() / grad.abs().max())
check("Model window gradient vs @M_loss_grad (b 4, T 2)",
      err < 1e-12 and abs(loss.item() - losses.mean().item()) < 1e-12 * abs(loss.item()),
      "max |Δ|/max|g| = %.2e" % err)

# --- Model against P2's model in PyTorch (bench/p2_torch.py) ---------------
# Its state_dict loads into the op (P2's names, strict), and the op's
# window predictions and gradients equal PyTorch autograd through P2's
# class: an independent forward and backward.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "bench"))
from p2_torch import LoopedTransformer  # noqa: E402

torch.manual_seed(3)
p2 = LoopedTransformer(3, 16, 2, 1, model.entry["positions"]).double()
ours = ut.Model(m64)
ours.load_state_dict(p2.state_dict(), strict=True)
xs5, ys5 = torch.randn(4, 5, 3, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
theirs = torch.stack(p2(xs5, ys5, 4, 2))
mine = ours.iterates(xs5, ys5, loops=4, window=2)
((theirs - ys5) ** 2).mean().backward()
((mine - ys5) ** 2).mean().backward()
ferr = float((mine - theirs).abs().max() / theirs.abs().max())
gerr = max(float((dict(ours.named_parameters())[k].grad - v.grad).abs().max() /
                 max(float(v.grad.abs().max()), 1e-300)) for k, v in p2.named_parameters())
check("Model vs P2's model in PyTorch (load_state_dict strict; b 4, T 2)",
      ferr < 1e-10 and gerr < 1e-8, "predictions %.2e, gradients %.2e (max rel, over %d tensors)"
      % (ferr, gerr, len(list(p2.parameters()))))

# --- Model: forward against unroll-run --predict ---------------------------
prompts = _read_safetensors(os.path.join(d, "prompts.safetensors"))
for so, ckpt, name, dtype in ((m64, run + "/checkpoint", "preds64", torch.float64),
                              (m32, None, "preds32", torch.float32)):
    mm = ut.Model(so)
    if ckpt:
        mm.load_checkpoint(ckpt)
    else:
        mm.load_checkpoint(os.path.join(d, "init32", "checkpoint"))
    with torch.no_grad():
        p = mm(prompts["xs"].to(dtype).contiguous(), prompts["ys"].to(dtype).contiguous())
    ref = _read_safetensors(os.path.join(d, name + ".safetensors"))["preds"]
    err = float((p.double() - ref).abs().max())
    check("Model forward vs unroll-run --predict (%s)" % mm.library.element_type, err <= 1e-6,
          "max |Δ| = %.2e over %s predictions" % (err, tuple(p.shape)))

# --- Model: 50 steps of torch.optim.Adam against unroll-run's host Adam ------
m = ut.Model(m64).load_checkpoint(init + "/checkpoint")
train = _read_safetensors(os.path.join(d, "train.safetensors"))
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
ours = []
for s in range(50):
    idx = [(s * 8 + i) % train["xs"].shape[0] for i in range(8)]
    x, y = train["xs"][idx].contiguous(), train["ys"][idx].contiguous()
    opt.zero_grad()
    loss = ((m.iterates(x, y, window=4) - y) ** 2).mean()
    loss.backward()
    opt.step()
    ours.append(loss.item())
theirs = [json.loads(line)["loss"] for line in open(run + "/metrics.jsonl")]
final = ut.Model(m64).load_checkpoint(run + "/checkpoint")
a = torch.cat([p.detach().reshape(-1) for p in m._ordered()])
b = torch.cat([p.detach().reshape(-1) for p in final._ordered()])
lerr = max(abs(u - v) / abs(v) for u, v in zip(ours, theirs))
werr = float((a - b).abs().max() / b.abs().max())
check("50 steps of torch.optim.Adam vs unroll-run's host Adam", len(theirs) == 50 and lerr <= 1e-5
      and werr <= 1e-5, "losses max rel %.2e, weights max |Δ|/max|w| %.2e" % (lerr, werr))
check("state_dict has P2's names", list(m.state_dict())[:2] == ["_read_in.weight", "_read_in.bias"],
      ", ".join(list(m.state_dict())[:3]) + ", ...")
check("parameters are views of θ (zero-copy)", m._theta().data_ptr() == m._flat.data_ptr(),
      "optimizer steps update the buffer the library reads")

# --- Model with the concat encoding ----------------------------------------
# Every point's prediction is the query's of the prompt cut after it (one
# library pass per point) against the runner's own cuts (unroll-run
# --predict); query=True is the last point's alone, in one pass, and its
# window loss and gradient are the library's training loss (@M_loss_grad).
mc = ut.Model(c64).load_checkpoint(os.path.join(d, "initc", "checkpoint"))
with torch.no_grad():
    p = mc(prompts["xs"].contiguous(), prompts["ys"].contiguous())
ref = _read_safetensors(os.path.join(d, "predsc.safetensors"))["preds"]
err = float((p - ref).abs().max())
check("Model (concat) forward vs unroll-run --predict", mc.encoding == "concat" and err <= 1e-6,
      "max |Δ| = %.2e over %s predictions" % (err, tuple(p.shape)))
with torch.no_grad():
    q = mc(prompts["xs"].contiguous(), prompts["ys"].contiguous(), query=True)
check("Model (concat) query=True is the last point's prediction",
      tuple(q.shape) == (4,) and float((q - p[:, -1]).abs().max()) == 0.0, "shape %s" % (tuple(q.shape),))
cxs, cys = torch.randn(2, 3, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
cparams = mc._ordered()


def through_c(*ps):
    theta = torch.cat([p.detach().reshape(-1) for p in ps])
    return ut._ModelFunction.apply(mc, 3, 3, True, mc.tokens(cxs, cys), theta, *ps)[-1, :, -1]


ok = torch.autograd.gradcheck(through_c, tuple(p.detach().clone().requires_grad_(True)
                                               for p in cparams), eps=1e-6, atol=1e-6, rtol=1e-5)
check("Model (concat) gradcheck (f64, every parameter, through 3 iterations)", ok,
      "%d parameters" % mc.entry["num_params"])
mc.zero_grad()
loss = ((mc.iterates(cxs, cys, window=2, query=True) - cys[:, -1]) ** 2).mean()
loss.backward()
g = torch.cat([p.grad.reshape(-1) for p in cparams])
lgc = unroll.Library(c64).entry(mc.entry["loss_grad"])
lgc.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_void_p] * 2
losses, grad = torch.zeros(2, dtype=torch.float64), torch.zeros(mc.entry["num_params"], dtype=torch.float64)
lgc(ut._ref(mc.tokens(cxs, cys)), ut._ref(cys), ut._ref(mc._theta()), 3, 2, ut._ref(losses),
    ut._ref(grad))
err = float((g - grad).abs().max() / grad.abs().max())
check("Model (concat) query window gradient vs @M_loss_grad (b 3, T 2)",
      err < 1e-12 and abs(loss.item() - losses.mean().item()) < 1e-12 * abs(loss.item()),
      "max |Δ|/max|g| = %.2e, loss %.6g vs %.6g" % (err, loss.item(), losses.mean().item()))

# --- Descent: a learned unrolling (LISTA-CP) ------------------------------
desc = ut.Descent(e_so, energy="lista_cp")
torch.manual_seed(1)
with torch.no_grad():
    A = torch.randn(8, 12, dtype=torch.float64) / 8 ** 0.5
    desc.A.copy_(A)
    desc.W.copy_(A.expand(4, 8, 12) / 3 + 0.05 * torch.randn(4, 8, 12, dtype=torch.float64))
    desc.theta.copy_(0.02 + 0.01 * torch.rand(4, dtype=torch.float64))
y0 = 0.1 * torch.randn(3, 12, dtype=torch.float64)
b = torch.randn(3, 8, dtype=torch.float64)
dparams = desc._ordered()


def descend(y0, b, *ps):
    theta = torch.cat([p.detach().reshape(-1) for p in ps])
    return ut._DescentFunction.apply(desc, 4, y0, b, theta, *ps)


inputs = (y0.clone().requires_grad_(True), b.clone().requires_grad_(True)) + tuple(
    p.detach().clone().requires_grad_(p.requires_grad) for p in dparams)
ok = torch.autograd.gradcheck(descend, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)
check("Descent gradcheck (LISTA-CP, 4 layers: Y0, X, W, gamma, theta)", ok,
      "A fixed: %s" % (not desc.A.requires_grad))
# Its layers against the formula x' = soft(x + γ_k W_kᵀ(b − A x), θ_k).
with torch.no_grad():
    y = desc(y0, b)
    ref = y0.clone()
    for k in range(4):
        v = ref + desc.gamma[k] * (b - ref @ desc.A.T) @ desc.W[k]
        ref = torch.sign(v) * torch.clamp(v.abs() - desc.theta[k], min=0)
err = float((y - ref).abs().max() / ref.abs().max())
check("Descent forward vs LISTA-CP's layers in PyTorch", err < 1e-12, "max |Δ|/max|x| = %.2e" % err)

# --- Descent at a fixed point: implicit, phantom and Jacobian-free gradients --
# ISTA's map x ← soft(x + Aᵀ(b − A x)/L, λ/L) (A a parameter here): the
# implicit gradient of <w, x*> for b and A against central differences of
# the converged fixed point, phantom:K → implicit as K grows, JFB finite.
# Codes with 2 nonzeros: the map contracts on their support (ρ ≈ 0.9),
# so that the fixed point is reached to 1e-13 in a few hundred steps.
torch.manual_seed(2)
w = torch.randn(3, 12, dtype=torch.float64)
A0 = torch.randn(8, 12, dtype=torch.float64) / 8 ** 0.5
A0 /= A0.norm(dim=0)
x0 = torch.zeros(3, 12, dtype=torch.float64)
for r in range(3):
    x0[r, torch.randperm(12)[:2]] = 2.0 + torch.rand(2, dtype=torch.float64)
b0 = x0 @ A0.T
grads = {}
for mode in ("implicit", "phantom:400", "jfb"):
    fp = ut.Descent(e_so, energy="ista", gradient=mode, tol=1e-13, max_iter=20000)
    with torch.no_grad():
        fp.A.copy_(A0)
    bb = b0.clone().requires_grad_(True)
    z, info = fp(torch.zeros(3, 12, dtype=torch.float64), bb)
    (w * z).sum().backward()
    grads[mode] = (bb.grad.clone(), fp.A.grad.clone(), info)
fp = ut.Descent(e_so, energy="ista", gradient="implicit", tol=1e-13, max_iter=20000)


def fixed(A, b):
    with torch.no_grad():
        fp.A.copy_(A)
        z, _ = fp(torch.zeros(3, 12, dtype=torch.float64), b)
    return float((w * z).sum())


h = 1e-6
fd_b = torch.zeros_like(b0)
for i in range(b0.numel()):
    e = torch.zeros(b0.numel(), dtype=torch.float64)
    e[i] = h
    e = e.view_as(b0)
    fd_b.view(-1)[i] = (fixed(A0, b0 + e) - fixed(A0, b0 - e)) / (2 * h)
some = torch.randperm(A0.numel())[:16]  # 16 of A's 96 entries
fd_A = torch.zeros(len(some), dtype=torch.float64)
for j, i in enumerate(some):
    e = torch.zeros(A0.numel(), dtype=torch.float64)
    e[i] = h
    e = e.view_as(A0)
    fd_A[j] = (fixed(A0 + e, b0) - fixed(A0 - e, b0)) / (2 * h)
gb, gA, info = grads["implicit"]
gA = gA.reshape(-1)[some]
err = max(float((gb - fd_b).abs().max() / fd_b.abs().max()), float((gA - fd_A).abs().max() / fd_A.abs().max()))
check("Descent implicit gradient vs central differences of the fixed point (ISTA: b, 16 of A)",
      err < 1e-5 and info["residual"] <= 1e-13, "max rel error %.2e; forward %d steps, residual %.1e"
      % (err, info["steps"], info["residual"]))
pb, pA, _ = grads["phantom:400"]
pA = pA.reshape(-1)[some]
perr = max(float((pb - gb).abs().max() / gb.abs().max()), float((pA - gA).abs().max() / gA.abs().max()))
check("Descent phantom:400 vs implicit", perr < 1e-6, "max rel difference %.2e" % perr)
jb, jA, _ = grads["jfb"]
check("Descent jfb", bool(torch.isfinite(jb).all() and torch.isfinite(jA).all()),
      "the last step's gradient (differs from implicit by %.2e, as it should)" %
      float((jb - gb).abs().max() / gb.abs().max()))
raises("Descent: a fixed point of layered steps", ValueError,
       lambda: ut.Descent(e_so, energy="lista_cp", gradient="implicit"), ["stationary", "unrolled"])
raises("Descent: gradient='phantom:0'", ValueError,
       lambda: ut.Descent(e_so, energy="ista", gradient="phantom:0"), ["phantom:K"])

# --- bad input: a Python exception naming the argument -----------------------
xs32 = torch.randn(2, 3, 3)
raises("wrong dtype", TypeError, lambda: model(xs32, ys), ["xs", "torch.float32", "torch.float64"])
raises("wrong shape", ValueError, lambda: model(torch.randn(2, 3, 4, dtype=torch.float64), ys),
       ["xs", "dimension 2 must be 3"])
raises("wrong rank", ValueError, lambda: model(xs, ys[0]), ["ys", "2 dimensions"])
raises("wrong device", ValueError, lambda: model(xs.to("meta"), ys), ["xs", "meta", "CPU"])
raises("not contiguous", ValueError,
       lambda: model(torch.randn(2, 3, 3, dtype=torch.float64).transpose(0, 1), ys),
       ["xs", "not contiguous"])
bad = ys.clone()
bad[1, 2] = float("nan")
raises("non-finite", ValueError, lambda: model(xs, bad), ["ys", "nan", "[1, 2]"])
many = model.positions // 2 + 1
raises("too many points", ValueError, lambda: model(torch.randn(2, many, 3, dtype=torch.float64),
                                                      torch.randn(2, many, dtype=torch.float64)),
       ["%d tokens" % (2 * many), "positions"])
raises("Descent: X of the wrong width", ValueError, lambda: desc(y0, torch.randn(3, 9, dtype=torch.float64)),
       ["x", "dimension 1 must be 8"])
raises("Descent: X rows other than Y's", ValueError,
       lambda: desc(y0, torch.randn(2, 8, dtype=torch.float64)), ["x", "dimension 0 must be 3"])
hop = ut.Descent(e_so, energy="hopfield")
with torch.no_grad():
    mem = torch.randn(10, 6, dtype=torch.float64)
    e = hop.energies(mem[:4] + 0.1 * torch.randn(4, 6, dtype=torch.float64), mem)
check("Descent: a Hopfield memory has rows of its own", bool((e[1:] <= e[:-1] + 1e-12).all()),
      "4 queries, 10 stored patterns; E: %.4f -> %.4f" % (float(e[0]), float(e[-1])))
raises("not a tensor", TypeError, lambda: model(xs.numpy(), ys), ["xs", "torch.Tensor"])

# --- PyTorch >= 2.4: the registered operators -------------------------------
from unroll import _custom_ops  # noqa: E402

if _custom_ops.AVAILABLE and hasattr(torch.library, "opcheck"):
    torch.manual_seed(5)
    mo = ut.Model(m64)
    desc = ut.Descent(e_so, energy="lista_cp")
    with torch.no_grad():
        desc.A.copy_(torch.randn(8, 12, dtype=torch.float64) / 8 ** 0.5)
    xs, ys = torch.randn(2, 3, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
    y0, b = 0.1 * torch.randn(3, 12, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    h = _custom_ops.handle(mo)
    z = mo.tokens(xs, ys)

    def fresh(ps, grad=True):
        return [p.detach().clone().requires_grad_(grad and p.requires_grad) for p in ps]

    try:
        torch.library.opcheck(torch.ops.unroll.model_window.default,
                              (h, 4, 2, True, z, fresh(mo._ordered())))
        torch.library.opcheck(torch.ops.unroll.model_window.default,
                              (h, 4, 2, False, z, fresh(mo._ordered(), grad=False)))
        hd = _custom_ops.handle(desc)
        torch.library.opcheck(torch.ops.unroll.descend.default,
                              (hd, 4, y0.clone().requires_grad_(), b.clone().requires_grad_(),
                               fresh(desc._ordered())))
        check("opcheck", True, "unroll::model_window (taped and not), unroll::descend; PyTorch %s"
              % torch.__version__)
    except Exception as e:  # noqa: BLE001
        check("opcheck", False, "%s: %s" % (type(e).__name__, e))

    def run(custom):
        ut.CUSTOM_OPS = custom
        mo.zero_grad()
        loss = ((mo.iterates(xs, ys, window=2) - ys) ** 2).mean()
        loss.backward()
        desc.zero_grad()
        yd = desc(y0, b)
        (yd ** 2).sum().backward()
        ut.CUSTOM_OPS = _custom_ops.AVAILABLE
        return [loss.detach(), yd.detach()] + [p.grad.clone() for p in mo._ordered() + desc._ordered()
                                               if p.grad is not None]

    a, c = run(True), run(False)
    err = max(float((u - v).abs().max()) for u, v in zip(a, c))
    check("custom ops = autograd.Functions", len(a) == len(c) and err == 0.0,
          "%d tensors (losses, Y_T, gradients), max |Δ| = %.1e" % (len(a), err))

    # torch.compile(fullgraph=True): one graph, each call one opaque op;
    # the loss and its gradient as in eager mode.
    def step(xs, ys):
        return ((mo.iterates(xs, ys, window=2) - ys) ** 2).mean()

    try:
        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        mo.zero_grad()
        lc = compiled(xs, ys)
        lc.backward()
        gc = [p.grad.clone() for p in mo._ordered()]
        mo.zero_grad()
        le = step(xs, ys)
        le.backward()
        ge = [p.grad.clone() for p in mo._ordered()]
        err = max(float((u - v).abs().max()) for u, v in zip(gc, ge))
        check("torch.compile(fullgraph=True) of a training loss", err <= 1e-12 and
              abs(lc.item() - le.item()) <= 1e-12 * abs(le.item()),
              "aot_eager; loss %.6g vs %.6g, gradients max |Δ| %.1e" % (lc.item(), le.item(), err))
    except Exception as e:  # noqa: BLE001
        check("torch.compile(fullgraph=True) of a training loss", False,
              "%s: %s" % (type(e).__name__, str(e)[:2000]))
    # Two graphs alive at once hold two workspaces: neither may be reused
    # before its backward (eager and compiled, against the Functions).
    xs2, ys2 = torch.randn(2, 3, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)

    def two(f, custom):
        ut.CUSTOM_OPS = custom
        mo.zero_grad()
        l1, l2 = f(xs, ys), f(xs2, ys2)
        f(xs2, ys); f(xs, ys2)  # more forwards, their graphs freed at once
        (l1 + 2 * l2).backward()
        ut.CUSTOM_OPS = _custom_ops.AVAILABLE
        return [p.grad.clone() for p in mo._ordered()]

    ref = two(step, False)
    errs = [max(float((u - v).abs().max()) for u, v in zip(two(f, True), ref))
            for f in (step, torch.compile(step, fullgraph=True, backend="aot_eager"))]
    check("two graphs alive: each workspace kept until its backward", max(errs) <= 1e-12,
          "eager %.1e, compiled %.1e (max |Δ| of the gradients)" % tuple(errs))
    # The graph Dynamo captures holds the model as one unroll op.
    seen = []

    def record(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    torch.compile(step, fullgraph=True, backend=record)(xs, ys)
    ops = [t for t in seen if "unroll" in t]
    check("the captured graph holds the model as one opaque op", len(ops) == 1,
          "%s among %d calls" % (ops, len(seen)))
else:
    print("SKIP opcheck: PyTorch %s has no torch.library.custom_op and opcheck (they came in 2.4); "
          "the ops run as torch.autograd.Functions" % torch.__version__)

# --- offline install ---------------------------------------------------------
import shutil  # noqa: E402

src = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "python")
with tempfile.TemporaryDirectory() as site, tempfile.TemporaryDirectory() as copy:
    # pip builds in the folder it installs from: a copy keeps the tree clean.
    pkg = os.path.join(copy, "python")
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--root-user-action=ignore",
                        "--no-build-isolation", "--no-index", "--target", site, pkg],
                       capture_output=True, text=True)
    env = dict(os.environ, PYTHONPATH=site)
    imp = subprocess.run([sys.executable, "-c", "import unroll, unroll.torch; print(unroll.__file__)"],
                         capture_output=True, text=True, env=env, cwd=site)
    check("pip install --no-deps --no-build-isolation ./python", r.returncode == 0 and
          imp.returncode == 0 and imp.stdout.startswith(site),
          (r.stderr.strip().splitlines() or ["installed"])[-1] + "; import: " +
          (imp.stdout.strip() or imp.stderr.strip()))

print("all checks passed" if not failed else "%d checks failed: %s" % (len(failed), ", ".join(failed)))
sys.exit(1 if failed else 0)
