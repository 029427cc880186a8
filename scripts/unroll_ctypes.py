"""Calling a compiled unroll library from Python: memref descriptors over
NumPy arrays (ctypes), for the test and experiment scripts."""
import ctypes

import numpy as np


class MemRef1(ctypes.Structure):
    _fields_ = [("alloc", ctypes.c_void_p), ("data", ctypes.c_void_p), ("offset", ctypes.c_int64),
                ("sizes", ctypes.c_int64 * 1), ("strides", ctypes.c_int64 * 1)]


class MemRef2(ctypes.Structure):
    _fields_ = [("alloc", ctypes.c_void_p), ("data", ctypes.c_void_p), ("offset", ctypes.c_int64),
                ("sizes", ctypes.c_int64 * 2), ("strides", ctypes.c_int64 * 2)]


def ref(a):
    """A memref descriptor over a C-contiguous float64 array of rank 1 or 2
    (the caller keeps the array alive)."""
    assert a.dtype == np.float64 and a.flags.c_contiguous
    p = a.ctypes.data
    if a.ndim == 1:
        return MemRef1(p, p, 0, (ctypes.c_int64 * 1)(a.shape[0]), (ctypes.c_int64 * 1)(1))
    return MemRef2(p, p, 0, (ctypes.c_int64 * 2)(*a.shape), (ctypes.c_int64 * 2)(a.shape[1], 1))
