#!/usr/bin/env python3
"""Copies the CUDA ELF images (cubins) embedded in a compiled.so out as files.

    extract-cubins.py LIBRARY.so OUTDIR

gpu-module-to-binary embeds each kernel module's cubin as a constant in the
host library, where `cuobjdump` does not look (it reads fatbin sections).
Written out, each is a plain cubin that `cuobjdump --dump-sass` and
`--dump-resource-usage` (registers, stack, spills) read. Prints one line per
file written.
"""
import os
import struct
import sys

EM_CUDA = 190


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    lib, outdir = sys.argv[1], sys.argv[2]
    data = open(lib, "rb").read()
    os.makedirs(outdir, exist_ok=True)
    stem = os.path.basename(lib).split(".")[0]
    count, at = 0, data.find(b"\x7fELF", 1)
    while at != -1:
        head = data[at:at + 64]
        if len(head) == 64 and head[4] == 2 and struct.unpack_from("<H", head, 18)[0] == EM_CUDA:
            phoff, shoff = struct.unpack_from("<QQ", head, 0x20)
            phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 0x36)
            # The image ends at its last table or section, whichever is last.
            size = max(shoff + shentsize * shnum, phoff + phentsize * phnum)
            for i in range(shnum):
                sh = data[at + shoff + i * shentsize:at + shoff + (i + 1) * shentsize]
                if len(sh) == 64 and struct.unpack_from("<I", sh, 4)[0] != 8:  # not NOBITS
                    offset, length = struct.unpack_from("<QQ", sh, 0x18)
                    size = max(size, offset + length)
            if 64 <= size <= len(data) - at:
                path = os.path.join(outdir, f"{stem}.{count}.cubin")
                with open(path, "wb") as f:
                    f.write(data[at:at + size])
                print(path)
                count += 1
                at = data.find(b"\x7fELF", at + size)
                continue
        at = data.find(b"\x7fELF", at + 1)
    if count == 0:
        sys.exit(f"extract-cubins: no CUDA ELF image in {lib}")


if __name__ == "__main__":
    main()
