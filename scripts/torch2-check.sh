#!/bin/bash
# Runs python/unroll's checks under PyTorch 2.x, where the operations are
# also registered as torch.library.custom_ops: opcheck, torch.compile
# (fullgraph=True) and the custom ops against the autograd.Functions, with
# every other check of test/Integration/CPU/python-torch.test.
#
# Debian 12 ships PyTorch 1.13, so the PyTorch is Debian 13's python3-torch
# (2.6) in a chroot that debootstrap builds once (needs root and Debian's
# archive; about 1.5 GB). The libraries it checks are those the lit test
# builds, so this runs that test first.
#
#   scripts/torch2-check.sh [BUILD] [ROOT]     (default: build /var/tmp/unroll-trixie)
set -euo pipefail
BUILD=${1:-build}
ROOT=${2:-/var/tmp/unroll-trixie}
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
[ "$(id -u)" = 0 ] || { echo "torch2-check: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
if ! chroot "$ROOT" python3 -c 'import torch, pip' 2>/dev/null; then
  command -v debootstrap >/dev/null || apt-get install -y debootstrap
  echo "torch2-check: building a Debian 13 chroot with PyTorch in $ROOT (once)"
  debootstrap --variant=minbase \
    --include=python3-torch,python3-numpy,python3-pip,python3-setuptools,python3-wheel \
    trixie "$ROOT" http://deb.debian.org/debian
fi
python3 /usr/lib/llvm-19/build/utils/lit/lit.py -q "$BUILD/test/Integration/CPU/python-torch.test"
# The check reads the lit test's files by their paths: the tree is mounted
# at the same path in the chroot.
mkdir -p "$ROOT$SRC" "$ROOT/proc"
mounted=()
mountpoint -q "$ROOT$SRC" || { mount --bind "$SRC" "$ROOT$SRC"; mounted+=("$ROOT$SRC"); }
mountpoint -q "$ROOT/proc" || { mount -t proc proc "$ROOT/proc"; mounted+=("$ROOT/proc"); }
trap 'for m in "${mounted[@]}"; do umount "$m"; done' EXIT
O=$(cd "$BUILD" && pwd)/test/Integration/CPU/Output/python-torch.test.tmp
chroot "$ROOT" python3 -c 'import torch; print("PyTorch", torch.__version__)'
chroot "$ROOT" env PYTHONPATH="$SRC/python" python3 "$SRC/test/Integration/CPU/Inputs/python-torch-check.py" \
  check "$O.d" "$O.64.so" "$O.32.so" "$O.e.so" "$O.init" "$O.run" "$O.c.so"
