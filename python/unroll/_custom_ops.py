"""unroll's operations as ``torch.library.custom_op``s (PyTorch 2.4 and later).

Registered, each is one opaque operator to ``torch.compile`` (with
``fullgraph=True`` too), with a fake implementation for shapes
(``register_fake``) and its backward (``register_autograd``):

- ``unroll::model_window(handle, loops, window, taped, z, params)`` ->
  (predictions [window, B, tokens], workspace): a looped model's last
  `window` iterations; where `taped`, the workspace holds the window's
  states and tape (``@M_forward_tape``), which the backward's
  ``unroll::model_window_vjp`` reads (``@M_vjp_tape``); else it is empty
  and the forward is ``@M_forward``.
- ``unroll::descend(handle, iterations, y0, x, params)`` -> Y_T, with
  ``unroll::descend_vjp`` (``@E_descend_vjp``) as its backward.

An operator's arguments are tensors and numbers, so the module that runs it
is named by `handle`, an integer this process gives each ``Model`` and
``Descent`` (its library, entry points, threads and workspace sizes).
``params`` are the module's parameters in θ's order; θ is their flat
buffer itself where they are still its views, else a copy.
"""
import itertools
import typing
import weakref

import torch

AVAILABLE = hasattr(torch, "library") and hasattr(torch.library, "custom_op")

_MODULES = weakref.WeakValueDictionary()
_NEXT = itertools.count(1)


def handle(module):
    """The integer that names `module` to the operators."""
    h = getattr(module, "_op_handle", None)
    if h is None:
        h = next(_NEXT)
        module._op_handle = h
        _MODULES[h] = module
    return h


def _module(h):
    m = _MODULES.get(h)
    if m is None:
        raise RuntimeError("unroll: operator handle %d names no live module (it was freed)" % h)
    return m


class _Held:
    """What a graph node holds until it is freed (weakly referenceable,
    unlike a list): workspaces, here and in torch.py's Function."""

    def __init__(self, tensors=()):
        self.tensors = tensors


def _flat_views(module, grad, params):
    """A flat gradient as one tensor per parameter (views)."""
    return [grad[p["offset"]:p["offset"] + q.numel()].view(q.shape)
            for p, q in zip(module._entries, params)]


if AVAILABLE:
    Tensor = torch.Tensor
    TensorList = typing.List[torch.Tensor]

    @torch.library.custom_op("unroll::model_window", mutates_args=())
    def model_window(handle: int, loops: int, window: int, taped: bool, z: Tensor,
                     params: TensorList) -> typing.Tuple[Tensor, Tensor]:
        m = _module(handle)
        theta = m._theta(params)
        if not taped:
            preds = m._forward(z, theta, loops)[loops - window:].clone()
            return preds, z.new_empty(0)
        # From the module's pool. In eager mode it goes back when the graph
        # node that saved it is freed (_model_setup). Under torch.compile no
        # node of ours holds it (the compiled graph saves an alias whose
        # lifetime this cannot see), so it does not go back and the next
        # call takes a fresh one.
        ws = m._pooled(m._workspace_size(z.shape[0], z.shape[1], window))
        preds, _ = m._forward_tape(z, theta, loops, window, flat=ws)
        return preds, ws

    @model_window.register_fake
    def _(handle, loops, window, taped, z, params):
        m = _module(handle)
        size = m._workspace_size(z.shape[0], z.shape[1], window) if taped else 0
        return z.new_empty(window, z.shape[0], z.shape[1]), z.new_empty(size)

    @torch.library.custom_op("unroll::model_window_vjp", mutates_args=())
    def model_window_vjp(handle: int, loops: int, window: int, z: Tensor, dpreds: Tensor,
                         params: TensorList, ws: Tensor) -> Tensor:
        m = _module(handle)
        if ws.numel() == 0:
            raise RuntimeError("unroll::model_window_vjp: the forward ran without its tape "
                               "(taped=False)")
        parts = m._workspace_parts(ws, z.shape[0], z.shape[1], window)
        return m._vjp_tape(z, dpreds.contiguous(), m._theta(params), loops, window, parts)

    @model_window_vjp.register_fake
    def _(handle, loops, window, z, dpreds, params, ws):
        return z.new_empty(_module(handle).entry["num_params"])

    def _model_setup(ctx, inputs, output):
        h, loops, window, taped, z, params = inputs
        ctx.handle, ctx.loops, ctx.window = h, loops, window
        ctx.save_for_backward(z, output[1], *params)
        ctx.mark_non_differentiable(output[1])
        # No zeros for the workspace's gradient (it has none; zeros the
        # size of a paper-config tape cost seconds).
        ctx.set_materialize_grads(False)
        m = _MODULES.get(h)
        # Eager mode only: while torch.compile or opcheck traces, the
        # outputs are fake or functional tensors.
        if taped and m is not None and type(output[1]) is torch.Tensor:
            # The workspace goes back to the pool with this node (ctx);
            # detached, so that the finalizer does not hold the graph.
            ctx.held = _Held()
            weakref.finalize(ctx.held, m._give_back, [output[1].detach()])

    def _model_backward(ctx, dpreds, dws):
        z, ws, *params = ctx.saved_tensors
        if dpreds is None:
            return None, None, None, None, None, [None] * len(params)
        grad = model_window_vjp(ctx.handle, ctx.loops, ctx.window, z, dpreds, params, ws)
        return None, None, None, None, None, _flat_views(_module(ctx.handle), grad, params)

    model_window.register_autograd(_model_backward, setup_context=_model_setup)

    @torch.library.custom_op("unroll::descend", mutates_args=())
    def descend(handle: int, iterations: int, y0: Tensor, x: Tensor,
                params: TensorList) -> Tensor:
        m = _module(handle)
        return m._descend(y0, x, m._theta(params), iterations)

    @descend.register_fake
    def _(handle, iterations, y0, x, params):
        return torch.empty_like(y0)

    @torch.library.custom_op("unroll::descend_vjp", mutates_args=())
    def descend_vjp(handle: int, iterations: int, y0: Tensor, x: Tensor, params: TensorList,
                    dy: Tensor) -> typing.Tuple[Tensor, Tensor, Tensor]:
        m = _module(handle)
        return m._vjp(y0, x, m._theta(params), iterations, dy.contiguous())

    @descend_vjp.register_fake
    def _(handle, iterations, y0, x, params, dy):
        return (torch.empty_like(y0), torch.empty_like(x),
                y0.new_empty(_module(handle).entry["num_params"]))

    def _descend_setup(ctx, inputs, output):
        h, iterations, y0, x, params = inputs
        ctx.handle, ctx.iterations = h, iterations
        ctx.save_for_backward(y0, x, *params)

    def _descend_backward(ctx, dy):
        y0, x, *params = ctx.saved_tensors
        dy0, dx, grad = descend_vjp(ctx.handle, ctx.iterations, y0, x, params, dy)
        return None, None, dy0, dx, _flat_views(_module(ctx.handle), grad, params)

    descend.register_autograd(_descend_backward, setup_context=_descend_setup)
