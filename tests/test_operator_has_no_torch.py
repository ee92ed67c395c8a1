"""The operator image stays small: no glm_operator module imports torch, triton or glm_kernels (kernels/README.md)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import importlib, pkgutil, sys
import glm_operator
for mod in pkgutil.walk_packages(glm_operator.__path__, "glm_operator."):
    if mod.name != "glm_operator.__main__":
        importlib.import_module(mod.name)
print(sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "triton", "glm_kernels"}))
"""


def test_no_operator_module_imports_torch_triton_or_glm_kernels() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]", result.stdout
