"""Compiled models and energies as PyTorch autograd operations.

``Model(path)`` is a looped model's forward pass with its vector-Jacobian
product (@M_forward_tape, @M_vjp_tape); ``Descent(path)`` is an energy's compiled
descent Y_T = descend(Y_0, X; θ) with its gradient (@E_descend,
@E_descend_vjp). Both are ``torch.nn.Module``s whose parameters are named
as in unroll's checkpoints (dotted names become nested modules, so that
``state_dict()`` has P2's keys) and are views of one flat buffer θ, which
the library reads in place: tensors pass by pointer, without a copy. The
operations are ``torch.autograd.Function``s (PyTorch 1.13 and later), and
where PyTorch has ``torch.library.custom_op`` (2.4 and later) registered
operators (``_custom_ops``), which ``torch.compile`` treats as opaque.
"""
import concurrent.futures
import ctypes
import json
import os
import struct
import weakref

import torch

from . import _custom_ops
from ._library import Library, UnrollError, memref

# Where PyTorch has torch.library.custom_op (2.4 and later), Model and
# Descent run as the registered operators unroll::model_window and
# unroll::descend (opaque to torch.compile); else, and where this is set
# to False, as the torch.autograd.Functions below. Both compute the same.
CUSTOM_OPS = _custom_ops.AVAILABLE

_DTYPE = {"f32": torch.float32, "f64": torch.float64}


def _ref(t):
    """A pointer to a descriptor of `t` for a library call. The descriptor
    holds `t`, so a temporary tensor lives as long as the call's arguments."""
    d = memref(t.data_ptr(), tuple(t.shape))
    d.keep = t
    return ctypes.byref(d)


def _compiling():
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and hasattr(compiler, "is_compiling") and
                compiler.is_compiling())


def _check(t, name, dtype, rank, shape=None):
    """A Python exception naming `name` for anything the library cannot take."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: expected a torch.Tensor, got %s" % (name, type(t).__name__))
    if t.device.type != "cpu":
        raise ValueError("%s is on %s; pass CPU tensors (a GPU library copies them to its GPU "
                         "itself)" % (name, t.device))
    if t.dtype != dtype:
        raise TypeError("%s has dtype %s; the library computes in %s" % (name, t.dtype, dtype))
    if t.dim() != rank:
        raise ValueError("%s must have %d dimensions, got shape %s" % (name, rank, tuple(t.shape)))
    for i, n in enumerate(shape or ()):
        if n is not None and t.shape[i] != n:
            raise ValueError("%s has shape %s; dimension %d must be %d" % (
                name, tuple(t.shape), i, n))
    if any(n == 0 for n in t.shape):
        raise ValueError("%s is empty (shape %s)" % (name, tuple(t.shape)))
    if not t.is_contiguous():
        raise ValueError("%s is not contiguous; pass %s.contiguous()" % (name, name))
    if _compiling():
        return  # the values are not known while torch.compile traces
    bad = ~torch.isfinite(t.detach())
    if bad.any():
        at = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError("%s holds %s at %s (every value must be finite)" % (
            name, float(t.detach()[at]), list(at)))


def _read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    dtypes = {"F64": torch.float64, "F32": torch.float32}
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        if v["dtype"] not in dtypes:
            raise UnrollError("%s: tensor %r has dtype %s (F32 and F64 are read)" % (
                path, k, v["dtype"]))
        a, b = v["data_offsets"]
        out[k] = torch.frombuffer(bytearray(blob[a:b]), dtype=dtypes[v["dtype"]]).reshape(v["shape"])
    return out


class _Parameters(torch.nn.Module):
    """The parameters of a model-info entry as views of one flat buffer, under
    their dotted names (nested modules)."""

    def _setup(self, params, num_params, dtype, generator, trainable):
        self._entries = sorted(params, key=lambda p: p["offset"])
        self._num_params = num_params
        flat = torch.zeros(num_params, dtype=dtype)
        for p in self._entries:
            n = 1
            for s in p["shape"]:
                n *= s
            view = flat[p["offset"]:p["offset"] + n].view(p["shape"])
            init = p.get("init", "normal")
            if init == "ones":
                view.fill_(1.0)
            elif init == "constant":
                view.fill_(p.get("value", 0.0))
            elif init == "normal":
                view.normal_(0.0, p.get("std", 0.02), generator=generator)
            param = torch.nn.Parameter(view, requires_grad=trainable(p))
            owner, leaf = self._owner(p["name"])
            owner.register_parameter(leaf, param)
        self._flat = flat

    def _owner(self, dotted):
        parts = dotted.split(".")
        owner = self
        for part in parts[:-1]:
            if part not in owner._modules:
                owner.add_module(part, torch.nn.Module())
            owner = owner._modules[part]
        return owner, parts[-1]

    def _param(self, name):
        owner, leaf = self._owner(name)
        return owner._parameters[leaf]

    def _ordered(self):
        return [self._param(p["name"]) for p in self._entries]

    def _theta(self, params=None):
        """θ for the library: the flat buffer itself while every parameter
        (of `params`, default the module's) is still a view of it (the usual
        case: optimizers update in place), else a copy gathered from them."""
        flat = self._flat
        base, size = flat.data_ptr(), flat.element_size()
        params = self._ordered() if params is None else params
        if all(q.dtype == flat.dtype and q.device == flat.device and q.is_contiguous() and
               q.data_ptr() == base + p["offset"] * size for p, q in zip(self._entries, params)):
            return flat
        return torch.cat([q.detach().reshape(-1).to(flat.dtype) for q in params])

    def _split(self, grad):
        """The flat gradient as one tensor per parameter (views, no copy)."""
        out = []
        for p, q in zip(self._entries, self._ordered()):
            n = q.numel()
            out.append(grad[p["offset"]:p["offset"] + n].view(q.shape) if q.requires_grad else None)
        return out

    def load_checkpoint(self, path):
        """Parameters from a checkpoint folder of unroll-run (its `latest`
        snapshot, the f64 master copy where it has one), one of its
        snapshots, or a .safetensors file; names as in the model info. A
        tensor the module does not have, or of another shape, is an error;
        parameters the file lacks keep their values (a learned unrolling's
        checkpoint holds only the trained ones)."""
        path = os.fspath(path)
        if os.path.isdir(path):
            if os.path.exists(os.path.join(path, "latest")):
                with open(os.path.join(path, "latest")) as f:
                    path = os.path.join(path, f.read().strip())
            master = os.path.join(path, "optimizer.safetensors")
            if os.path.exists(master):
                tensors = {k[len("master."):]: v for k, v in _read_safetensors(master).items()
                           if k.startswith("master.")}
            else:
                tensors = _read_safetensors(os.path.join(path, "model.safetensors"))
        else:
            tensors = _read_safetensors(path)
        names = {p["name"] for p in self._entries}
        for name, value in tensors.items():
            if name not in names:
                raise UnrollError("%s: tensor %r is not a parameter of this %s (it has %s)" % (
                    path, name, type(self).__name__, ", ".join(sorted(names))))
            q = self._param(name)
            if tuple(value.shape) != tuple(q.shape):
                raise UnrollError("%s: tensor %r has shape %s, the library expects %s" % (
                    path, name, tuple(value.shape), tuple(q.shape)))
            with torch.no_grad():
                q.copy_(value.to(q.dtype))
        return self


class _ModelFunction(torch.autograd.Function):
    """The last `window` iterations' predictions at every token, [T, B, 2k].
    Where a backward can come (`taped`), the forward is @M_forward_tape,
    which leaves the window's states and tape in workspaces that the
    backward's @M_vjp_tape reads: the loop runs once per training step.
    Otherwise it is @M_forward, which keeps nothing."""

    @staticmethod
    def forward(ctx, op, loops, window, taped, z, theta, *params):
        ctx.op, ctx.loops, ctx.window = op, loops, window
        ctx.save_for_backward(z, theta)
        ctx.workspaces = None
        if taped:
            preds, workspaces = op._forward_tape(z, theta, loops, window)
            # Back to the model's pool when PyTorch frees the graph (and ctx).
            ctx.workspaces = _custom_ops._Held(workspaces)
            weakref.finalize(ctx.workspaces, op._give_back, workspaces)
            return preds
        return op._forward(z, theta, loops)[loops - window:]

    @staticmethod
    def backward(ctx, dpreds):
        z, theta = ctx.saved_tensors
        if ctx.workspaces is None:
            raise RuntimeError("unroll.torch.Model: a backward through a forward run without "
                               "gradient (torch.no_grad, or no parameter requiring one)")
        # The workspaces stay with ctx (a retained graph may run this again);
        # PyTorch frees them with the graph.
        grad = ctx.op._vjp_tape(z, dpreds.contiguous(), theta, ctx.loops, ctx.window,
                                ctx.workspaces.tensors)
        return (None, None, None, None, None, None) + tuple(ctx.op._split(grad))


class Model(_Parameters):
    """A compiled looped model (``unroll.model``) as a PyTorch module.

    ``forward(xs, ys, loops=None)`` takes in-context prompts, xs [B, k, d]
    and ys [B, k] in the library's dtype, and returns the prediction for
    every y_i from the points before it after `loops` iterations (default:
    the model's b), [B, k]: what ``unroll-run --predict`` writes; its
    gradient goes through every iteration. ``iterates(xs, ys, loops,
    window)`` returns the last T = `window` iterations' predictions
    [T, B, k] (default: the model's T) with gradient through those T alone,
    the first b − T run without it: P2's training, whose loss is the mean
    of their squared errors. The backward pass is the library's @M_vjp_tape.

    Either encoding: interleaved tokens (P2's: x_1, y_1, x_2, …, every point
    predicted in one pass), or concat tokens (x_i, y_i) with the query
    (x_k, 0) last, where every point's prediction is a pass over the prompt
    cut after it (k passes, as ``unroll-run --predict`` does). ``query=True``
    returns the last point's prediction alone, [B] or [T, B]: one pass in
    either encoding, the concat encoding's training loss.
    """

    def __init__(self, path, model=None, seed=0, threads=None):
        super().__init__()
        self.library = path if isinstance(path, Library) else Library(path)
        self.entry = self.library.model(model)
        # Calls split the batch over this many threads (ctypes releases the
        # GIL), each part one call of the library, as unroll-run's runner
        # does; the results depend on the count only through summation order.
        self.threads = max(1, int(threads if threads is not None else torch.get_num_threads()))
        e = self.entry
        self.encoding = e.get("encoding", "interleaved")
        if self.encoding not in ("interleaved", "concat"):
            raise UnrollError("model %r uses the %r encoding; unroll.torch.Model takes "
                              "'interleaved' or 'concat'" % (e["name"], self.encoding))
        gpu = self.library.target == "gpu"
        if gpu:
            # A GPU library's calls must not overlap.
            self.threads = 1
        # The GPU pipelines emit no tape entry points: such a model runs
        # without gradient.
        for k in ("forward",) if gpu else ("forward", "forward_tape", "vjp_tape"):
            if not e.get(k):
                raise UnrollError("%s: model %r has no @%s_%s (rebuild it with this unroll-opt)" % (
                    self.library.path, e["name"], e["name"], k))
        self.dtype = _DTYPE[self.library.element_type]
        self.dim = e["prompt_dim"]
        self.loops = e["iterations"]
        self.positions = e.get("positions")
        g = torch.Generator().manual_seed(seed)
        self._setup(e["params"], e["num_params"], self.dtype, g, lambda p: True)
        self._fwd = self.library.entry(e["forward"])
        self._fwd.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        self._tape = None
        if e.get("forward_tape") and e.get("vjp_tape"):
            ft = self.library.entry(e["forward_tape"])
            ft.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_void_p]
            vt = self.library.entry(e["vjp_tape"])
            vt.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_void_p] * 2
            self._tape = (ft, vt, e["window_workspace"])
        self._ws_pool = []

    def extra_repr(self):
        return "%s: model %s, %d parameters, d = %d, b = %d, %s encoding, %s" % (
            self.library.path, self.entry["name"], self.entry["num_params"], self.dim, self.loops,
            self.encoding, self.library.element_type)

    def tokens(self, xs, ys):
        """The prompt as the model reads it. Interleaved (P2's): x_1,
        [y_1, 0, …], x_2, … as Z [B, 2k, d]. Concat: (x_i, y_i) for the
        context and (x_k, 0) for the query, Z [B, k, d + 1]."""
        B, k, d = xs.shape
        if self.encoding == "concat":
            z = torch.zeros(B, k, d + 1, dtype=xs.dtype)
            z[:, :, :d] = xs
            z[:, :-1, d] = ys[:, :-1]
            return z
        z = torch.zeros(B, 2 * k, d, dtype=xs.dtype)
        z[:, 0::2] = xs
        z[:, 1::2, 0] = ys
        return z

    def forward(self, xs, ys, loops=None, query=False):
        loops = self.loops if loops is None else loops
        return self.iterates(xs, ys, loops, window=loops, query=query)[-1]

    def iterates(self, xs, ys, loops=None, window=None, query=False):
        _check(xs, "xs", self.dtype, 3, (None, None, self.dim))
        _check(ys, "ys", self.dtype, 2, (xs.shape[0], xs.shape[1]))
        loops = self.loops if loops is None else int(loops)
        window = min(self.entry.get("window", loops) if window is None else int(window), loops)
        if loops < 1 or window < 1:
            raise ValueError("loops and window must be >= 1, got loops = %d, window = %d" % (
                loops, window))
        k = xs.shape[1]
        tokens = k if self.encoding == "concat" else 2 * k
        if self.positions is not None and tokens > self.positions:
            raise ValueError("xs holds %d points: %d tokens, past the model's %d positions" % (
                k, tokens, self.positions))
        if k < 1:
            raise ValueError("xs holds no points")
        if self.encoding == "concat" and not query:
            # Point i's prediction is the query's of the prompt cut after it.
            return torch.stack([self._pass(xs[:, :i + 1], ys[:, :i + 1], loops, window)[:, :, i]
                                for i in range(k)], dim=2)
        preds = self._pass(xs, ys, loops, window)
        if query:
            return preds[:, :, -1 if self.encoding == "concat" else 2 * k - 2]
        return preds[:, :, 0::2]

    def _pass(self, xs, ys, loops, window):
        """One call of the library on the prompt: every token's prediction
        in the last `window` iterations, [T, B, tokens]."""
        z = self.tokens(xs.detach(), ys.detach())
        params = self._ordered()
        # Keep the window's tape for a backward only when one can come.
        taped = torch.is_grad_enabled() and any(q.requires_grad for q in params)
        if taped and self._tape is None:
            raise UnrollError(
                "%s: model %r has no vector-Jacobian product (@%s_vjp_tape; the GPU pipelines "
                "emit none), so it runs without gradient: call it under torch.no_grad() or with "
                "requires_grad_(False) parameters, or build a CPU library to train it" % (
                    self.library.path, self.entry["name"], self.entry["name"]))
        if CUSTOM_OPS:
            return _custom_ops.model_window(_custom_ops.handle(self), loops, window, taped, z,
                                            params)[0]
        return _ModelFunction.apply(self, loops, window, taped, z, self._theta(), *params)

    def _parts(self, batch):
        n = min(self.threads, batch)
        return [(batch * i // n, batch * (i + 1) // n) for i in range(n)]

    def _map(self, fn, parts):
        if len(parts) == 1:
            return [fn(*parts[0])]
        if getattr(self, "_pool", None) is None or self._pool._max_workers < len(parts):
            self._pool = concurrent.futures.ThreadPoolExecutor(len(parts))
        return list(self._pool.map(lambda p: fn(*p), parts))

    def _forward(self, z, theta, loops):
        def part(b0, b1):
            preds = torch.empty(loops, b1 - b0, z.shape[1], dtype=self.dtype)
            self._fwd(_ref(z[b0:b1]), _ref(theta), loops, _ref(preds))
            return preds
        return torch.cat(self._map(part, self._parts(z.shape[0])), dim=1)

    def _workspace_size(self, rows, tokens, window):
        """The values of @M_forward_tape's workspace for `rows` prompts."""
        w = self._tape[2]
        per = (window + 1) * w["state"] + window * sum(w["tape"]) + (w["state"] if w["previous"] else 0)
        return rows * tokens * per

    def _workspace_parts(self, flat, batch, tokens, window):
        """One buffer's slices, one workspace per part of the batch."""
        out, at = [], 0
        for b0, b1 in self._parts(batch):
            size = self._workspace_size(b1 - b0, tokens, window)
            out.append(flat[at:at + size])
            at += size
        return out

    def _workspace(self, rows, tokens, window):
        """A workspace of @M_forward_tape, from the pool of those a freed
        graph gave back where one fits (a step's workspaces are large: fresh
        ones would fault their pages in at every step)."""
        return self._pooled(self._workspace_size(rows, tokens, window))

    def _pooled(self, size):
        """`size` values from the pool: the smallest buffer that fits, or a
        fresh one where none does."""
        fits = [i for i, ws in enumerate(self._ws_pool) if ws.numel() >= size]
        if not fits:
            return torch.empty(size, dtype=self.dtype)
        i = min(fits, key=lambda i: self._ws_pool[i].numel())
        return self._ws_pool.pop(i)[:size]

    def _give_back(self, workspaces):
        # At most one step's worth is kept (a forward per thread's part):
        # the largest buffers, so that a smaller batch (or more threads)
        # once does not leave only buffers too small for the usual one.
        pool = self._ws_pool + [w for w in workspaces]
        pool.sort(key=lambda w: w.numel(), reverse=True)
        self._ws_pool[:] = pool[:max(self.threads, 1)]

    def _forward_tape(self, z, theta, loops, window, flat=None):
        """The window's predictions, and the workspaces (one per part of the
        batch) holding its states and tape: from the pool, or slices of
        `flat` (the custom op's output)."""
        ft = self._tape[0]
        parts = self._parts(z.shape[0])
        # Taken here, not in the threads: the pool is a plain list.
        given = (self._workspace_parts(flat, z.shape[0], z.shape[1], window) if flat is not None
                 else [self._workspace(b1 - b0, z.shape[1], window) for b0, b1 in parts])

        def part(i, b0, b1):
            preds = torch.empty(window, b1 - b0, z.shape[1], dtype=self.dtype)
            ws = given[i]
            ft(_ref(z[b0:b1]), _ref(preds), _ref(theta), loops, window, _ref(ws))
            return preds, ws
        out = self._map(part, [(i,) + p for i, p in enumerate(parts)])
        return torch.cat([p for p, _ in out], dim=1), [ws for _, ws in out]

    def _vjp_tape(self, z, dpreds, theta, loops, window, workspaces):
        vt = self._tape[1]

        def part(i, b0, b1):
            grad = torch.empty(self.entry["num_params"], dtype=self.dtype)
            d = dpreds[:, b0:b1].contiguous()
            vt(_ref(z[b0:b1]), _ref(d), _ref(theta), loops, window, _ref(workspaces[i]), _ref(grad))
            return grad
        parts = self._parts(z.shape[0])
        grads = self._map(part, [(i,) + p for i, p in enumerate(parts)])
        total = grads[0]
        for g in grads[1:]:
            total += g
        return total



def _gradient_mode(g):
    """("unrolled" | "implicit" | "jfb" | "phantom", steps back) from the
    gradient= string."""
    if g in ("unrolled", "implicit"):
        return g, 0
    if g == "jfb":
        return "jfb", 1
    if isinstance(g, str) and g.startswith("phantom:"):
        try:
            k = int(g[len("phantom:"):])
        except ValueError:
            k = 0
        if k >= 1:
            return "phantom", k
    raise ValueError("gradient=%r: expected 'unrolled', 'implicit', 'jfb' or 'phantom:K' with "
                     "K >= 1" % (g,))


class _DescentFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, iterations, y0, x, theta, *params):
        y = op._descend(y0, x, theta, iterations)
        ctx.op, ctx.iterations = op, iterations
        ctx.save_for_backward(y0, x, theta)
        return y

    @staticmethod
    def backward(ctx, dy):
        y0, x, theta = ctx.saved_tensors
        dy0, dx, grad = ctx.op._vjp(y0, x, theta, ctx.iterations, dy.contiguous())
        return (None, None, dy0, dx, None) + tuple(ctx.op._split(grad))


class _FixedPointFunction(torch.autograd.Function):
    """z* = f(z*; X, θ) found without gradient; its gradient by the mode."""

    @staticmethod
    def forward(ctx, op, z, z_back, steps_back, x, theta, *params):
        ctx.op, ctx.steps_back = op, steps_back
        ctx.save_for_backward(z, z_back, x, theta)
        return z.clone()

    @staticmethod
    def backward(ctx, dz):
        z, z_back, x, theta = ctx.saved_tensors
        op = ctx.op
        dz = dz.contiguous()
        if op.mode == "implicit":
            # g = dz + J_zᵀ g at z*, by fixed-point iteration with one step's
            # VJP; then X's and θ's gradients are the step's VJP with g.
            g = dz.clone()
            for it in range(op.max_iter):
                jg, _, _ = op._vjp(z, x, theta, 1, g)
                nxt = dz + jg
                change = float((nxt - g).norm() / max(float(nxt.norm()), 1e-300))
                g = nxt
                if change <= op.tol:
                    break
            op.backward_info = {"steps": it + 1, "residual": change}
            _, dx, grad = op._vjp(z, x, theta, 1, g)
        else:
            # jfb: the last step alone; phantom:K: the last K steps unrolled.
            _, dx, grad = op._vjp(z_back, x, theta, ctx.steps_back, dz)
        return (None, None, None, None, dx, None) + tuple(op._split(grad))


class Descent(_Parameters):
    """An energy's compiled descent as a differentiable layer.

    ``gradient="unrolled"`` (default): ``forward(y0, x, iterations=None)`` =
    Y_T, T steps of the energy's derived (or hand-written, layered) steps
    from Y_0 with input X (default T: the energy's iterations), with
    gradients to Y_0, X and θ through every step.

    ``gradient="implicit"``, ``"phantom:K"`` or ``"jfb"``, for energies
    whose steps are one map Y ← f(Y; X, θ) (model info ``stationary``):
    ``forward(y0, x)`` iterates to the fixed point, until the relative
    change ‖Y_t − Y_{t−1}‖ / ‖Y_{t−1}‖ is at most `tol` or after `max_iter`
    steps, and returns torchdeq's ``(z, info)``, info = {"steps",
    "residual"}. The gradient to X and θ is the implicit function theorem's
    (g = dz + J_fᵀ g solved by iteration to `tol`), the last K steps
    unrolled, or the last step's (Jacobian-free); Y_0 gets none.

    Parameters marked ``fixed`` in the IR (a dictionary A, ALISTA's W) are
    parameters without gradient: set them, or load them with
    ``load_checkpoint``.
    """

    def __init__(self, path, energy=None, gradient="unrolled", seed=0, tol=1e-6, max_iter=500):
        super().__init__()
        self.library = path if isinstance(path, Library) else Library(path)
        self.entry = self.library.energy(energy)
        e = self.entry
        self.mode, self.phantom_steps = _gradient_mode(gradient)
        if self.mode != "unrolled" and not e.get("stationary"):
            raise ValueError(
                "gradient=%r needs a fixed point of one map Y <- f(Y; X, theta), but energy %r's "
                "steps take the iteration index or the previous iterate (layered or FISTA steps; "
                "model info 'stationary' is false): use gradient='unrolled'" % (gradient, e["name"]))
        if tol <= 0 or max_iter < 1:
            raise ValueError("tol must be > 0 and max_iter >= 1, got %r, %r" % (tol, max_iter))
        self.tol, self.max_iter = tol, int(max_iter)
        self.backward_info = None
        if not e.get("descend_vjp"):
            raise UnrollError("%s: energy %r was compiled without its gradient (run "
                              "--lower-to-cpu, which differentiates it)" % (
                                  self.library.path, e["name"]))
        self.dtype = _DTYPE[self.library.element_type]
        self.dim = e.get("dim")
        self.input_dim = e.get("input_dim")
        self.iterations = e["iterations"]
        # X pairs with Y row by row (measurements of codes, a center), except
        # as a Hopfield memory, which has rows of its own (model info
        # input_rows: "paired" or "own").
        self._x_rows_free = e.get("input_rows", "paired") == "own"
        g = torch.Generator().manual_seed(seed)
        self._setup(e["params"], e["num_params"], self.dtype, g, lambda p: not p.get("fixed"))
        self._desc = self.library.entry(e["descend"])
        self._desc_vjp = self.library.entry(e["descend_vjp"])
        self._desc_vjp.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_void_p] * 4

    def extra_repr(self):
        return "%s: energy %s, %d parameters, %d iterations, %s" % (
            self.library.path, self.entry["name"], self.entry["num_params"], self.iterations,
            self.library.element_type)

    def forward(self, y0, x, iterations=None):
        self._check_inputs(y0, x)
        if self.mode != "unrolled":
            return self._fixed_point(y0, x)
        iterations = self.iterations if iterations is None else int(iterations)
        if iterations < 1:
            raise ValueError("iterations must be >= 1, got %d" % iterations)
        if CUSTOM_OPS:
            return _custom_ops.descend(_custom_ops.handle(self), iterations, y0, x, self._ordered())
        return _DescentFunction.apply(self, iterations, y0, x, self._theta(), *self._ordered())

    def _check_inputs(self, y0, x):
        _check(y0, "y0", self.dtype, 2, (None, self.dim))
        _check(x, "x", self.dtype, 2, (None if self._x_rows_free else y0.shape[0], self.input_dim))

    def _fixed_point(self, y0, x):
        theta = self._theta()
        xd = x.detach()
        z = y0.detach().contiguous()
        keep = max(self.phantom_steps, 1)
        history = [z]
        residual, steps = float("inf"), 0
        while steps < self.max_iter:
            nxt = self._descend(z, xd, theta, 1)
            residual = float((nxt - z).norm() / max(float(z.norm()), 1e-300))
            z = nxt
            steps += 1
            history = (history + [z])[-(keep + 1):]
            if residual <= self.tol:
                break
        back = min(keep, len(history) - 1)
        z_back = history[-1 - back]
        out = _FixedPointFunction.apply(self, z, z_back, back, x, theta, *self._ordered())
        return out, {"steps": steps, "residual": residual}

    def energies(self, y0, x, iterations=None):
        """E(Y_0) … E(Y_T) along the descent (no gradient)."""
        self._check_inputs(y0, x)
        iterations = self.iterations if iterations is None else int(iterations)
        y = torch.empty_like(y0)
        e = torch.empty(iterations + 1, dtype=self.dtype)
        self._desc(_ref(y0.detach()), _ref(x.detach()), _ref(self._theta()), _ref(y), _ref(e))
        return e

    def _descend(self, y0, x, theta, iterations):
        y = torch.empty_like(y0)
        e = torch.empty(iterations + 1, dtype=self.dtype)
        self._desc(_ref(y0), _ref(x), _ref(theta), _ref(y), _ref(e))
        return y

    def _vjp(self, y0, x, theta, iterations, dy):
        dy0, dx = torch.empty_like(y0), torch.empty_like(x)
        grad = torch.empty(self.entry["num_params"], dtype=self.dtype)
        self._desc_vjp(_ref(y0), _ref(x), _ref(theta), iterations, _ref(dy), _ref(dy0), _ref(dx),
                       _ref(grad))
        return dy0, dx, grad
