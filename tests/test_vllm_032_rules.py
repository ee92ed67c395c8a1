"""Start-up checks of the pinned vLLM 0.32.0 (vllm/config/vllm.py, parallel.py, v1/worker/gpu/pcp_manager.py),
encoded as rules so a CR vLLM would refuse is refused before a GPU is touched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from glm_operator.api.load import parse
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr, refusal, seed

_seed = seed


_findings = refusal


def _args(cr: dict[str, Any], name: str) -> list[str]:
    sts = next(o for o in render(parse(cr)).objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == name)
    args: list[str] = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_hisparse_refuses_decode_context_parallelism() -> None:
    cr = _seed()
    cr["spec"]["decode"]["parallelism"] = {"tensor": 8, "decodeContext": 8, "data": 1, "expert": True}
    assert any(f.field == "spec.decode.parallelism.decodeContext" and "HiSparse" in f.message for f in _findings(cr))


def test_nixl_dcp_must_equal_the_transfer_parallel_size() -> None:
    cr = _seed()  # prefill PCP8 x DCP8 with TP1: transfer size max(tp, pcp) = 8 -> fine
    assert render(parse(cr)).objects
    cr["spec"]["decode"]["hiSparse"] = {"enabled": False}
    cr["spec"]["decode"]["parallelism"] = {"tensor": 8, "decodeContext": 4, "data": 1, "expert": True}
    assert any(f.field == "spec.decode.parallelism.decodeContext" and "NIXL" in f.message for f in _findings(cr))


def test_pcp_with_dcp_needs_a_sparse_mla_model() -> None:
    cr = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
    cr["spec"]["engine"]["parallelism"] = {"tensor": 1, "prefillContext": 8, "decodeContext": 8}
    assert any(f.field == "spec.engine.parallelism.decodeContext" and "sparse MLA" in f.message for f in _findings(cr))


def test_hisparse_uses_vllms_default_cudagraph_mode() -> None:
    assert "--compilation-config" not in _args(_seed(), "glm-5-3-decode")


def test_sparse_mla_pcp_without_dcp_disables_cuda_graphs() -> None:
    cr = _seed()
    cr["spec"]["prefill"]["parallelism"] = {"tensor": 1, "prefillContext": 8, "decodeContext": 1, "expert": True}
    cr["spec"]["model"]["maxModelLen"] = 262_144  # PCP without DCP replicates the KV: 1M does not fit
    args = _args(cr, "glm-5-3-prefill")
    assert json.loads(args[args.index("--compilation-config") + 1]) == {"cudagraph_mode": "NONE"}
    cr["spec"]["prefill"]["extraArgs"] = ['--compilation-config={"cudagraph_mode":"PIECEWISE"}']
    assert any(f.field == "spec.prefill.extraArgs[0]" for f in _findings(cr))


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_model_runner_v2_cannot_be_turned_off_for_pcp_or_hisparse(role: str) -> None:
    cr = _seed()
    cr["spec"][role]["env"] = [{"name": "VLLM_USE_V2_MODEL_RUNNER", "value": "0"}]
    assert any(f.field == f"spec.{role}.env[0].name" for f in _findings(cr))


@pytest.mark.parametrize("arg", ["--disable-hybrid-kv-cache-manager", "--no-scheduler-reserve-full-isl"])
def test_hisparse_prerequisites_cannot_be_switched_off(arg: str) -> None:
    cr = _seed()
    cr["spec"]["decode"]["extraArgs"] = [arg]
    assert any(f.field == "spec.decode.extraArgs[0]" for f in _findings(cr))
