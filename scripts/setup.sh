#!/usr/bin/env bash
# Installs the Debian (bookworm) packages unroll needs to build and test, if
# any are missing. Safe to run repeatedly; needs root or sudo only when
# something is missing.
set -euo pipefail

PKGS=(
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools libmlir-19 clang-19
  nlohmann-json3-dev libgtest-dev
  cmake ninja-build ccache g++ make python3
  # The PyTorch peer: checkpoint interoperability test and the benchmark;
  # python/unroll's torch ops and their offline install (pip, setuptools).
  python3-torch libopenblas0-pthread python3-pip python3-setuptools python3-wheel
  # The independent peer of the tree and boosting baselines, and the digits
  # data set of P1's energy experiment.
  python3-sklearn
  # Data-parallel training: mpirun, and MPI for libunroll_mpi.so.
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all build packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
