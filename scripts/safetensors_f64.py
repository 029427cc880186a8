"""Writes float64 tensors as safetensors (what unroll-run --input reads):
an 8-byte little-endian header length, a JSON header padded to 8 bytes,
then the raw little-endian data. Shared by the scripts in this folder."""
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
