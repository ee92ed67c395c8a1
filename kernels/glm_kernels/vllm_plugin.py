"""vLLM plugin: installs our kernels into the pinned vLLM (entry point group ``vllm.general_plugins``).

vLLM calls ``register()`` in every process it starts (``vllm.plugins.load_general_plugins``). ``REPLACEMENTS`` is
the one table of every vLLM symbol this plugin replaces — today exactly one,
``vllm.v1.attention.ops.dcp.correct_attn_out`` (PCP, the overlapped prefill, sparse-MLA and HiSparse are reference
implementations, not installed into vLLM); ``MIRRORED`` lists vLLM facts our references rely on (not
replaced). ``kernels/tests/test_vllm_wheel.py`` checks both tables against the pinned wheel's source.

Safety: on a vLLM version other than ``PINNED_VLLM``, or when any symbol is missing or its parameters differ from
the table, ``register()`` logs a warning and changes nothing (all or nothing). ``GLM_KERNELS_VLLM_PLUGIN=0``
(or ``false``/``no``/``off``, any case) turns the plugin off. Calling ``register()`` again is a no-op.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from glm_kernels.dcp import lse_correct

__all__ = ["MIRRORED", "PINNED_VLLM", "REPLACEMENTS", "Mirrored", "Replacement", "correct_attn_out", "register"]

logger = logging.getLogger("glm_kernels.vllm_plugin")

#: The vLLM release the serving image pins (reference/vllm.md; images/vllm-glm, tag v0.32.0-glm.*).
PINNED_VLLM = "0.32.0"
#: Environment switch: "0", "false", "no" or "off" (any case, surrounding blanks ignored) disables the plugin;
#: unset, empty, "1", "true", "yes" or "on" enables it; anything else logs a warning and enables it.
ENV_SWITCH = "GLM_KERNELS_VLLM_PLUGIN"
_OFF = ("0", "false", "no", "off")
_ON = ("", "1", "true", "yes", "on")


def correct_attn_out(
    out: torch.Tensor,
    lses: torch.Tensor,
    cp_rank: int,
    ctx: Any,
    is_lse_base_on_e: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop-in for vLLM 0.32.0 ``vllm.v1.attention.ops.dcp.correct_attn_out``, backed by our Triton kernel.

    Same contract: ``out`` ``[B, H, D]`` (or ``[B, 1, H, D]``) is rescaled in place by ``exp(L_rank - L)`` with
    ``L = logsumexp`` over the all-gathered ``lses`` ``[N, B, H]`` (optionally with a size-1 extra dim); returns
    ``(out, L [B, H])``. ``ctx`` (vLLM's ``CPTritonContext``) is accepted and unused.
    """
    del ctx
    if out.ndim == 4 and out.shape[1] == 1:
        out = out.squeeze(1)
    if lses.ndim == 4 and lses.shape[-1] == 1:
        lses = lses.squeeze(-1)
    if lses.ndim == 4 and lses.shape[1] == 1:
        lses = lses.squeeze(1)
    return lse_correct(out, lses, cp_rank, base_e=is_lse_base_on_e, backend="triton")


@dataclass(frozen=True)
class Replacement:
    """One replaced vLLM symbol: ``module.name`` must be a function with exactly ``params`` (in order)."""

    module: str
    name: str
    params: tuple[str, ...]
    impl: Callable[..., Any]
    why: str


@dataclass(frozen=True)
class Mirrored:
    """A vLLM fact our code mirrors: in ``module``, ``name`` is a function with ``params`` or a constant ``value``."""

    module: str
    name: str
    params: tuple[str, ...] | None = None
    value: object = None
    why: str = ""


REPLACEMENTS: tuple[Replacement, ...] = (
    Replacement(
        module="vllm.v1.attention.ops.dcp",
        name="correct_attn_out",
        params=("out", "lses", "cp_rank", "ctx", "is_lse_base_on_e"),
        impl=correct_attn_out,
        why="DCP LSE correction of the ag_rs/ag_ar backends (cp_lse_ag_out_rs/_ar via _cp_lse_common): "
        "glm_kernels.dcp.lse_correct, safe with empty shards",
    ),
)

MIRRORED: tuple[Mirrored, ...] = (
    Mirrored("vllm.v1.attention.ops.dcp", "_lse_weighted_combine",
             params=("outputs", "lses", "return_lse", "is_lse_base_on_e"),
             why="vLLM's CPU reference of the LSE merge; glm_kernels.dcp.lse_merge_ref has the same semantics"),
    Mirrored("vllm.v1.attention.ops.dcp", "_cp_lse_common",
             params=("cp_attn_out", "cp_attn_lse", "cp_group", "ctx", "is_lse_base_on_e", "seq_lens",
                     "query_start_loc"),
             why="the caller of correct_attn_out; it must look it up as a module global"),
    Mirrored("vllm.v1.hisparse.runtime", "FP8_DS_MLA_ROW_BYTES", value=656,
             why="glm_kernels.sparse_mla.ROW_BYTES"),
    Mirrored("vllm.plugins", "DEFAULT_PLUGINS_GROUP", value="vllm.general_plugins",
             why="the entry point group of kernels/pyproject.toml"),
)  # fmt: skip

_installed: dict[str, Callable[..., Any]] = {}


def _version() -> str | None:
    try:
        import vllm  # noqa: PLC0415
    except ImportError:
        return None
    return str(getattr(vllm, "__version__", "unknown"))


def register() -> None:
    """Install every entry of ``REPLACEMENTS`` into vLLM, or nothing (see module doc)."""
    switch = os.environ.get(ENV_SWITCH, "1").strip().lower()
    if switch in _OFF:
        logger.info("glm_kernels: %s=%r, vLLM left unchanged", ENV_SWITCH, switch)
        return
    if switch not in _ON:
        logger.warning(
            "glm_kernels: %s=%r is not one of %s (off) or %s (on); installing as if on",
            ENV_SWITCH, os.environ[ENV_SWITCH], "/".join(_OFF), "/".join(_ON),
        )  # fmt: skip
    version = _version()
    if version is None:
        logger.warning("glm_kernels: vLLM is not importable; nothing installed")
        return
    if version != PINNED_VLLM:
        logger.warning(
            "glm_kernels: vLLM %s is not the pinned %s; nothing installed (kernels were checked against %s only)",
            version, PINNED_VLLM, PINNED_VLLM,
        )  # fmt: skip
        return
    resolved = []
    for rep in REPLACEMENTS:
        key = f"{rep.module}.{rep.name}"
        try:
            module = importlib.import_module(rep.module)
        except ImportError as exc:
            logger.warning("glm_kernels: cannot import %s (%s); nothing installed", rep.module, exc)
            return
        current = getattr(module, rep.name, None)
        if current is rep.impl:
            continue
        if current is None or not callable(current):
            logger.warning("glm_kernels: %s is missing in vLLM %s; nothing installed", key, version)
            return
        params = tuple(inspect.signature(current).parameters)
        if params != rep.params:
            logger.warning(
                "glm_kernels: %s has parameters %s, expected %s; nothing installed", key, params, rep.params
            )
            return
        resolved.append((module, rep, current))
    for module, rep, current in resolved:
        _installed[f"{rep.module}.{rep.name}"] = current
        setattr(module, rep.name, rep.impl)
        logger.info("glm_kernels: replaced %s.%s (%s)", rep.module, rep.name, rep.why)


def unregister() -> None:
    """Restore the originals replaced by ``register()`` (tests)."""
    for key, original in list(_installed.items()):
        module_name, _, name = key.rpartition(".")
        setattr(importlib.import_module(module_name), name, original)
        del _installed[key]
