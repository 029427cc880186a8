# -*- Python -*-
import os
import shutil
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "unroll"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "Inputs", "tools", "cubin.test.deps.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.unroll_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
config.substitutions.append(("%examples", os.path.join(config.unroll_src_root, "examples")))
config.substitutions.append(("%unroll_scripts", os.path.join(config.unroll_src_root, "scripts")))
config.substitutions.append(("%unroll_src", config.unroll_src_root))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%unroll_lib", os.path.join(config.unroll_obj_root, "lib")))
config.substitutions.append(("%unroll_bin", config.unroll_tools_dir))

llvm_config.with_system_environment(["HOME", "TMPDIR", "CC"])
llvm_config.use_default_substitutions()

tool_dirs = [config.unroll_tools_dir, config.llvm_tools_dir, "/usr/lib/llvm-19/bin"]
tools = ["unroll-opt", "unroll-translate", "unroll-run", "unroll-energy-check", "unroll-model-check", "unroll-fixed-point-check",
         "unroll-baseline-check", "unroll-plot", "unroll-gemm-bench", "unroll-bench"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", "/usr/lib/llvm-19/bin", append_path=True)

# The PyTorch peer (Debian's python3-torch) for checkpoint interoperability.
import subprocess
torch_python = "/usr/bin/python3"
try:
    if subprocess.run([torch_python, "-c", "import torch"], capture_output=True, timeout=120).returncode == 0:
        config.available_features.add("torch")
except Exception:
    pass
config.substitutions.append(("%torch_python", torch_python))
# Python scripts that dlopen a compiled library (ctypes): in a sanitizer
# build (make test-asan) the library carries instrumented runtime code, so
# the interpreter must have the sanitizer runtimes loaded first.
ctypes_python = torch_python
flags = getattr(config, "unroll_cxx_flags", "")
if "sanitize=" in flags:
    # Tests of the optimized build's machine code do not apply.
    config.available_features.add("sanitizer")
    preload = []
    for lib, flag in (("libasan.so", "address"), ("libubsan.so", "undefined")):
        if flag in flags:
            path = subprocess.run([config.unroll_cxx_compiler, "-print-file-name=" + lib],
                                  capture_output=True, text=True).stdout.strip()
            if os.path.isabs(path):
                preload.append(path)
    if preload:
        ctypes_python = "env LD_PRELOAD=%s %s" % (":".join(preload), torch_python)
config.substitutions.append(("%ctypes_python", ctypes_python))
# scikit-learn (Debian's python3-sklearn, installed by scripts/setup.sh): the
# independent peer of the tree and boosting baselines.
try:
    if subprocess.run([torch_python, "-c", "import sklearn"], capture_output=True, timeout=120).returncode == 0:
        config.available_features.add("sklearn")
except Exception:
    pass

# bf16 GEMM operands (--cpu-precision bf16) need AVX512_BF16 (vdpbf16ps).
try:
    if "avx512_bf16" in open("/proc/cpuinfo").read().split():
        config.available_features.add("avx512bf16")
    # AMX tiles with bf16 (the bf16 GEMM's AMX kernel), where Linux also
    # grants a process the tile state: the same arch_prctl request
    # (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) the kernel makes, asked here.
    if {"amx_tile", "amx_bf16"} <= set(open("/proc/cpuinfo").read().split()):
        import ctypes
        SYS_arch_prctl = 158
        if ctypes.CDLL(None, use_errno=True).syscall(SYS_arch_prctl, 0x1023, 18) == 0:
            config.available_features.add("amx")
except (OSError, AttributeError):
    pass

# The CUDA toolkit (libdevice, ptxas) for --lower-to-gpu, and a usable GPU
# (asked through unroll's own runtime: driver, device, context) for running.
cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
if os.path.exists(os.path.join(cuda_home, "nvvm", "libdevice", "libdevice.10.bc")):
    config.available_features.add("cuda-toolkit")
if os.path.exists(os.path.join(cuda_home, "bin", "ptxas")):
    config.available_features.add("ptxas")
try:
    probe = subprocess.run([os.path.join(config.unroll_tools_dir, "unroll-run"), "--gpu-info"],
                           capture_output=True, timeout=60)
    if probe.returncode == 0:
        config.available_features.add("cuda-device")
except Exception:
    pass
config.substitutions.append(("%cuda_home", cuda_home))
config.substitutions.append(("%cc", os.environ.get("CC") or "cc"))
config.substitutions.append(("%scripts", os.path.join(config.unroll_src_root, "scripts")))

# Data-parallel runs (docs/training.md, "More than one process"): Open MPI's
# mpirun (Debian's openmpi-bin) and libunroll_mpi.so, built where CMake found
# MPI. Root (as CI runs) needs --allow-run-as-root; --oversubscribe lets two
# ranks start on any number of cores.
mpirun = shutil.which("mpirun")
if mpirun and os.path.exists(os.path.join(config.unroll_obj_root, "lib", "libunroll_mpi.so")):
    config.available_features.add("mpi")
    flags = " --oversubscribe"
    if os.geteuid() == 0:
        flags += " --allow-run-as-root"
    config.substitutions.append(("%mpirun", mpirun + flags))
