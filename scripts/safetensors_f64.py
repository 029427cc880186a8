"""Writes float64 tensors as safetensors (what unroll-run --input reads):
an 8-byte little-endian header length, a JSON header padded to 8 bytes,
then the raw little-endian data; reads F32/F64 ones (what unroll-run
writes) as float64 arrays. Shared by the scripts in this folder."""
import json
import struct

import numpy as np


def write_f64(path, tensors, metadata=None):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        raw = np.ascontiguousarray(t, dtype="<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(np.shape(t)),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_f64(path):
    """{name: float64 array} of a safetensors file of F32 and F64 tensors."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    kinds = {"F64": "<f8", "F32": "<f4"}
    return {k: np.frombuffer(blob[v["data_offsets"][0]:v["data_offsets"][1]],
                             dtype=kinds[v["dtype"]]).reshape(v["shape"]).astype(np.float64)
            for k, v in header.items() if k != "__metadata__"}
