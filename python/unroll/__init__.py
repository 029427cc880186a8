"""unroll from Python.

``unroll.Library(path)`` loads a library that ``unroll-translate`` built
(``compiled.so``) and exposes its model info; ``unroll.torch`` (with
PyTorch) makes its models and energies differentiable PyTorch operations:
``unroll.torch.Model`` and ``unroll.torch.Descent``. docs/python.md is the
reference.
"""
from ._library import Library, UnrollError

__all__ = ["Library", "UnrollError"]
__version__ = "0.1.0"
