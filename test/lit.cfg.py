# -*- Python -*-
import os
import shutil
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "unroll"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "Inputs", "tools"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.unroll_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
config.substitutions.append(("%examples", os.path.join(config.unroll_src_root, "examples")))
config.substitutions.append(("%python", sys.executable))

llvm_config.with_system_environment(["HOME", "TMPDIR", "CC"])
llvm_config.use_default_substitutions()

tool_dirs = [config.unroll_tools_dir, config.llvm_tools_dir, "/usr/lib/llvm-19/bin"]
tools = ["unroll-opt", "unroll-translate", "unroll-run", "unroll-energy-check", "unroll-model-check"]
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

# GPU execution tests need a device; none of this tests do.
if shutil.which("nvidia-smi"):
    config.available_features.add("cuda-device")
if shutil.which("ptxas") or os.path.exists("/usr/local/cuda/bin/ptxas"):
    config.available_features.add("ptxas")
