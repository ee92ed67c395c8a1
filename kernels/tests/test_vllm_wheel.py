"""Opt-in: every symbol in the plugin's tables exists in the pinned vLLM wheel with the expected signature.

Reads the wheel's source (zip + ast) without installing vLLM. The wheel is ~330 MB, so this is skipped unless the
wheel is present; fetch it and run the check with ``make check-vllm-symbols`` (see kernels/README.md), or point
``GLM_VLLM_WHEEL`` at a downloaded ``vllm-0.32.0-*.whl``.
"""

from __future__ import annotations

import ast
import os
import re
import zipfile
from functools import cache
from pathlib import Path

import pytest

from glm_kernels.vllm_plugin import MIRRORED, PINNED_VLLM, REPLACEMENTS


def _find_wheel() -> Path | None:
    if os.environ.get("GLM_VLLM_WHEEL"):
        return Path(os.environ["GLM_VLLM_WHEEL"])
    cache_dir = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "glm-kernels" / "vllm-wheel"
    found = sorted(cache_dir.glob(f"vllm-{PINNED_VLLM}-*.whl"))
    return found[0] if found else None


WHEEL = _find_wheel()
pytestmark = [
    pytest.mark.vllm_wheel,
    pytest.mark.skipif(WHEEL is None, reason="pinned vLLM wheel not downloaded: run `make check-vllm-symbols`"),
]


@cache
def _source(module: str) -> str:
    assert WHEEL is not None
    path = module.replace(".", "/")
    with zipfile.ZipFile(WHEEL) as wheel:
        names = set(wheel.namelist())
        member = f"{path}.py" if f"{path}.py" in names else f"{path}/__init__.py"
        return wheel.read(member).decode()


def _function(module: str, name: str) -> ast.FunctionDef | None:
    for node in ast.parse(_source(module)).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _params(fn: ast.FunctionDef) -> tuple[str, ...]:
    args = fn.args
    return tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])


def _constant(module: str, name: str) -> object:
    for node in ast.parse(_source(module)).body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{module}.{name} not found")


def test_the_wheel_is_the_pinned_version() -> None:
    assert WHEEL is not None and f"vllm-{PINNED_VLLM}-" in WHEEL.name
    assert _constant("vllm._version", "__version__") == PINNED_VLLM


@pytest.mark.parametrize("rep", REPLACEMENTS, ids=lambda r: f"{r.module}.{r.name}")
def test_replaced_symbol_exists_with_expected_signature(rep) -> None:  # type: ignore[no-untyped-def]
    fn = _function(rep.module, rep.name)
    assert fn is not None, f"{rep.module}.{rep.name} is gone from vLLM {PINNED_VLLM}"
    assert _params(fn) == rep.params


@pytest.mark.parametrize("rep", REPLACEMENTS, ids=lambda r: f"{r.module}.{r.name}")
def test_replaced_symbol_is_only_reached_through_its_module(rep) -> None:  # type: ignore[no-untyped-def]
    # Patching module.name reaches every caller only if no other module bound the name at import time.
    assert WHEEL is not None
    importers = []
    with zipfile.ZipFile(WHEEL) as wheel:
        for member in wheel.namelist():
            if member.endswith(".py") and member != rep.module.replace(".", "/") + ".py":
                text = wheel.read(member).decode(errors="replace")
                if re.search(rf"\b{rep.name}\b", text):
                    importers.append(member)
    assert importers == [], f"{rep.name} is named in {importers}: check for bindings the patch would miss"


@pytest.mark.parametrize("fact", MIRRORED, ids=lambda m: f"{m.module}.{m.name}")
def test_mirrored_fact_holds(fact) -> None:  # type: ignore[no-untyped-def]
    if fact.params is not None:
        fn = _function(fact.module, fact.name)
        assert fn is not None and _params(fn) == fact.params
    else:
        assert _constant(fact.module, fact.name) == fact.value


def test_cp_lse_common_calls_correct_attn_out_as_a_module_global() -> None:
    fn = _function("vllm.v1.attention.ops.dcp", "_cp_lse_common")
    assert fn is not None
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert "correct_attn_out" in {c.func.id for c in calls}  # type: ignore[attr-defined]
