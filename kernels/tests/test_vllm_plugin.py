"""The vLLM plugin against a stand-in ``vllm`` package: installs on the pinned version, changes nothing otherwise."""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

import pytest
import torch

from glm_kernels import vllm_plugin
from glm_kernels.dcp import lse_correct_ref
from glm_kernels.testing import HAS_TRITON, assert_within_ref_error


def _original_correct_attn_out(out, lses, cp_rank, ctx, is_lse_base_on_e=True):  # type: ignore[no-untyped-def]
    raise AssertionError("the original must not run once the plugin is installed")


def _fake_vllm(version: str, fn: Any = _original_correct_attn_out) -> dict[str, types.ModuleType]:
    mods = {name: types.ModuleType(name) for name in ("vllm", "vllm.v1", "vllm.v1.attention", "vllm.v1.attention.ops")}
    mods["vllm"].__version__ = version  # type: ignore[attr-defined]
    dcp = types.ModuleType("vllm.v1.attention.ops.dcp")
    dcp.correct_attn_out = fn  # type: ignore[attr-defined]
    mods["vllm.v1.attention.ops.dcp"] = dcp
    return mods


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def install(version: str, fn: Any = _original_correct_attn_out) -> types.ModuleType:
        for name, mod in _fake_vllm(version, fn).items():
            monkeypatch.setitem(sys.modules, name, mod)
        return sys.modules["vllm.v1.attention.ops.dcp"]

    yield install
    vllm_plugin.unregister()


def test_entry_point_is_declared() -> None:
    eps = entry_points(group="vllm.general_plugins")
    assert any(ep.value == "glm_kernels.vllm_plugin:register" for ep in eps), [ep.value for ep in eps]


def test_table_lists_every_replacement_once() -> None:
    keys = [f"{r.module}.{r.name}" for r in vllm_plugin.REPLACEMENTS]
    assert keys == ["vllm.v1.attention.ops.dcp.correct_attn_out"] and len(set(keys)) == len(keys)
    for rep in vllm_plugin.REPLACEMENTS:  # our replacement accepts exactly vLLM's parameters
        assert tuple(__import__("inspect").signature(rep.impl).parameters) == rep.params


def test_pinned_version_installs(fake: Any, caplog: pytest.LogCaptureFixture) -> None:
    dcp = fake(vllm_plugin.PINNED_VLLM)
    with caplog.at_level(logging.INFO, logger="glm_kernels.vllm_plugin"):
        vllm_plugin.register()
        vllm_plugin.register()  # idempotent
    assert dcp.correct_attn_out is vllm_plugin.correct_attn_out
    assert sum("replaced" in r.message for r in caplog.records) == 1
    vllm_plugin.unregister()
    assert dcp.correct_attn_out is _original_correct_attn_out


@pytest.mark.parametrize("version", ["0.31.1", "0.33.0", "dev"])
def test_unknown_version_logs_and_changes_nothing(fake: Any, caplog: pytest.LogCaptureFixture, version: str) -> None:
    dcp = fake(version)
    with caplog.at_level(logging.WARNING, logger="glm_kernels.vllm_plugin"):
        vllm_plugin.register()
    assert dcp.correct_attn_out is _original_correct_attn_out
    assert any(f"vLLM {version} is not the pinned" in r.message for r in caplog.records)


def test_changed_signature_changes_nothing(fake: Any, caplog: pytest.LogCaptureFixture) -> None:
    def changed(out, lses, cp_rank, ctx, is_lse_base_on_e=True, extra=None):  # type: ignore[no-untyped-def]
        return out, lses

    dcp = fake(vllm_plugin.PINNED_VLLM, changed)
    with caplog.at_level(logging.WARNING, logger="glm_kernels.vllm_plugin"):
        vllm_plugin.register()
    assert dcp.correct_attn_out is changed
    assert any("expected" in r.message and "nothing installed" in r.message for r in caplog.records)


def test_switch_off(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    dcp = fake(vllm_plugin.PINNED_VLLM)
    monkeypatch.setenv(vllm_plugin.ENV_SWITCH, "0")
    vllm_plugin.register()
    assert dcp.correct_attn_out is _original_correct_attn_out


def test_without_vllm_nothing_happens(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with caplog.at_level(logging.WARNING, logger="glm_kernels.vllm_plugin"):
        vllm_plugin.register()
    assert any("not importable" in r.message for r in caplog.records)


@pytest.mark.interpret
@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_replacement_keeps_vllm_contract_including_4d_views() -> None:
    gen = torch.Generator().manual_seed(0)
    n, b, h, d = 8, 2, 3, 16
    out = torch.randn(b, 1, h, d, generator=gen, dtype=torch.float64)
    lses = torch.randn(n, b, h, 1, generator=gen, dtype=torch.float64)
    lses[6] = float("-inf")
    truth, truth_lse = lse_correct_ref(out[:, 0], lses[..., 0], 2)
    ref, _ = lse_correct_ref(out[:, 0].half(), lses[..., 0].float(), 2)
    got, lse = vllm_plugin.correct_attn_out(out.float(), lses.float(), 2, None)
    assert got.shape == (b, h, d) and lse.shape == (b, h)
    assert_within_ref_error(got, ref, truth, name="correct_attn_out")
    assert torch.allclose(lse.double(), truth_lse, atol=1e-5)


@pytest.mark.parametrize("value", ["0", "false", "False", "NO", "off", " Off "])
def test_switch_off_accepts_the_usual_false_spellings(fake: Any, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    dcp = fake(vllm_plugin.PINNED_VLLM)
    monkeypatch.setenv(vllm_plugin.ENV_SWITCH, value)
    vllm_plugin.register()
    assert dcp.correct_attn_out is _original_correct_attn_out


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", ""])
def test_switch_on_spellings_install(fake: Any, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    dcp = fake(vllm_plugin.PINNED_VLLM)
    monkeypatch.setenv(vllm_plugin.ENV_SWITCH, value)
    vllm_plugin.register()
    assert dcp.correct_attn_out is vllm_plugin.correct_attn_out


def test_unknown_switch_value_logs_and_installs(
    fake: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    dcp = fake(vllm_plugin.PINNED_VLLM)
    monkeypatch.setenv(vllm_plugin.ENV_SWITCH, "maybe")
    with caplog.at_level(logging.WARNING, logger="glm_kernels.vllm_plugin"):
        vllm_plugin.register()
    assert dcp.correct_attn_out is vllm_plugin.correct_attn_out
    assert "GLM_KERNELS_VLLM_PLUGIN='maybe'" in caplog.text


def test_docs_name_exactly_what_the_plugin_replaces() -> None:
    from pathlib import Path  # noqa: PLC0415

    root = Path(__file__).resolve().parents[2]
    symbols = [f"{r.module}.{r.name}" for r in vllm_plugin.REPLACEMENTS]
    assert symbols == ["vllm.v1.attention.ops.dcp.correct_attn_out"]
    head = (root / "kernels" / "README.md").read_text().split("## Modules")[0]
    top = (root / "README.md").read_text().split("## Kernels")[1].split("\n## ")[0]
    for text in (head, top):
        assert "`vllm.v1.attention.ops.dcp.correct_attn_out`" in text
        assert "reference implementations" in text and "not installed into vLLM" in text
        for mechanism in ("PCP", "overlap", "sparse-MLA", "HiSparse"):
            assert mechanism in text
