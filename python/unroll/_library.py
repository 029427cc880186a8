"""Loading a compiled library and calling its C-interface entry points.

Every entry point takes MLIR's memref descriptors (allocated pointer, aligned
pointer, offset, sizes, strides) by pointer; ``memref`` builds one over any
buffer given its address and shape, so NumPy arrays and PyTorch tensors pass
without a copy.
"""
import ctypes
import json
import os

_ELEMENT = {"f32": 4, "f64": 8}


class UnrollError(RuntimeError):
    """A compiled library cannot do what was asked (the message says why)."""


def _memref_type(rank):
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
              ("offset", ctypes.c_int64)]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type("MemRef%d" % rank, (ctypes.Structure,), {"_fields_": fields})


_MEMREF = {r: _memref_type(r) for r in range(5)}


def memref(address, shape):
    """A descriptor of the row-major buffer at ``address`` with ``shape``.
    The caller keeps the buffer alive for the call."""
    rank = len(shape)
    d = _MEMREF[rank]()
    d.allocated = d.aligned = address
    d.offset = 0
    stride = 1
    strides = []
    for n in reversed(shape):
        strides.append(stride)
        stride *= int(n)
    for i, n in enumerate(shape):
        d.sizes[i] = int(n)
        d.strides[i] = strides[rank - 1 - i]
    return d


class Library:
    """A library built by ``unroll-translate`` (``compiled.so``).

    ``info`` is its model info (the dict ``unroll-run LIB --info`` prints);
    ``models`` and ``energies`` map names to their entries. A GPU library
    (``--lower-to-gpu``) is opened only where a GPU can be used
    (``unroll_gpu_init``): elsewhere ``UnrollError`` says why not. Its entry
    points take host memory and copy to and from the GPU themselves;
    ``device`` names the GPU (None for a CPU library).
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise UnrollError("%s: no such file" % self.path)
        try:
            self._lib = ctypes.CDLL(os.path.abspath(self.path))
        except OSError as e:
            raise UnrollError("%s: cannot load it as a shared library (%s)" % (self.path, e))
        try:
            info_fn = self._lib.unroll_model_info
        except AttributeError:
            raise UnrollError("%s: not an unroll library (it has no unroll_model_info)" % self.path)
        info_fn.restype = ctypes.c_char_p
        self.info = json.loads(info_fn().decode())
        self.target = self.info.get("target", "cpu")
        self.device = None
        if self.target == "gpu":
            init = self._lib.unroll_gpu_init
            init.restype = ctypes.c_char_p
            why = init()
            if why is not None:
                raise UnrollError(
                    "%s is built for an NVIDIA GPU (%s), and no GPU can be used here: %s. Build "
                    "a CPU library with unroll-opt --lower-to-cpu" % (
                        self.path, self.info.get("chip", "?"), why.decode()))
            device = self._lib.unroll_gpu_device
            device.restype = ctypes.c_char_p
            self.device = (device() or b"").decode()
        elif self.target != "cpu":
            raise UnrollError("%s: unknown target %r in its model info" % (self.path, self.target))
        self.element_type = self.info.get("element_type", "f64")
        self.itemsize = _ELEMENT[self.element_type]
        self.models = {m["name"]: m for m in self.info.get("models", [])}
        self.energies = {e["name"]: e for e in self.info.get("energies", [])}

    def __repr__(self):
        return "unroll.Library(%r: %s, %s%s, models %s, energies %s)" % (
            self.path, self.info.get("kind"), self.element_type,
            ", on %s" % self.device if self.device else "", sorted(self.models),
            sorted(self.energies))

    def model(self, name=None):
        """The model-info entry of the model `name` (the first if None)."""
        return self._pick(self.models, name, "model")

    def energy(self, name=None):
        """The model-info entry of the energy `name` (the first if None)."""
        return self._pick(self.energies, name, "energy")

    def _pick(self, table, name, what):
        if not table:
            raise UnrollError("%s has no %s (its model info lists none)" % (self.path, what))
        if name is None:
            return next(iter(table.values()))
        if name not in table:
            raise UnrollError("%s has no %s named %r (it has %s)" % (
                self.path, what, name, ", ".join(sorted(table))))
        return table[name]

    def entry(self, name):
        """The C-interface function of entry point `name` (``_mlir_ciface_`` +
        name), its arguments untyped (pointers) unless the caller sets
        ``argtypes``."""
        if not name:
            raise UnrollError("%s: the library has no such entry point" % self.path)
        try:
            return getattr(self._lib, "_mlir_ciface_" + name)
        except AttributeError:
            raise UnrollError("%s: missing entry point _mlir_ciface_%s" % (self.path, name))
