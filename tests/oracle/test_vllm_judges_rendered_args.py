"""Every engine command line the operator renders — every example, a hypothesis matrix of valid CRs and the
extraArgs our rules let through — is accepted by each supported release's own `vllm serve` parser and
`validate_parsed_serve_args`; the extraArgs our flag table refuses as unknown or mistyped are refused by vLLM too."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glm_operator.api.findings import SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.plan.flag_table import SUPPORTED_RELEASES
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr, seed
from tests.oracle.conftest import run_in_oracle

VALID_EXAMPLES = sorted(EXAMPLES.glob("*.yaml"))
#: extraArgs a user might add that our rules accept (the parser must agree).
USER_ARGS = [
    ["--max-num-seqs", "64"], ["--gpu-memory-utilization=0.88"], ["--enable-prefix-caching"],
    ["--tool-call-parser", "glm47", "--enable-auto-tool-choice"], ["--max-num-batched-tokens=8192"],
    ["--reasoning-parser", "glm45"], ["--trust-remote-code"],
]


def engine_command_lines(resource: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """One case per vLLM container: its args after `vllm serve`, downward-API values replaced by a literal."""
    cases = []
    for obj in render(parse(resource)).objects:
        if obj["kind"] != "StatefulSet":
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            if container.get("command") == ["vllm", "serve"]:
                args = [a.replace("$(POD_IP)", "10.0.0.1") for a in container["args"]]
                cases.append({"name": f"{name}/{obj['metadata']['name']}", "args": args})
    assert cases, f"{name} renders no vLLM container"
    return cases


def judge(release: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answer = run_in_oracle(release, "judge.py", cases)
    assert answer["vllm"] == release
    results: list[dict[str, Any]] = answer["results"]
    return results


@pytest.mark.parametrize("release", SUPPORTED_RELEASES)
def test_every_example_is_accepted_by_vllm(release: str) -> None:
    cases = [c for path in VALID_EXAMPLES for c in engine_command_lines(load_cr(path), path.name)]
    refused = [r for r in judge(release, cases) if not r["ok"]]
    assert refused == []


def _matrix() -> list[dict[str, Any]]:
    """Valid variations of the seed (what our rules accept), collected by hypothesis."""
    cases: list[dict[str, Any]] = []

    @settings(max_examples=40, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        decode_data=st.sampled_from([1, 2, 4, 8]),
        mtp=st.integers(min_value=1, max_value=5),
        prefill=st.sampled_from([(1, 8, 8), (1, 8, 1), (8, 1, 8), (2, 4, 2), (1, 1, 1)]),
        user_args=st.lists(st.sampled_from(USER_ARGS), max_size=3, unique_by=lambda a: a[0]),
        offload=st.sampled_from(["0", "64Gi", "512Gi"]),
    )
    def collect(decode_data: int, mtp: int, prefill: tuple[int, int, int], user_args: list[list[str]],
                offload: str) -> None:
        cr = copy.deepcopy(seed())
        spec = cr["spec"]
        spec["model"]["maxModelLen"] = 131072  # a context every layout of the matrix holds
        spec["speculative"]["numSpeculativeTokens"] = mtp
        spec["decode"]["parallelism"]["data"] = decode_data
        tp, pcp, dcp = prefill
        spec["prefill"]["parallelism"].update({"tensor": tp, "prefillContext": pcp, "decodeContext": dcp})
        spec["prefill"]["cpuOffloadPerRank"] = offload
        spec["decode"]["extraArgs"] = [a for group in user_args for a in group]
        try:
            cases.extend(engine_command_lines(cr, f"matrix-{len(cases)}"))
        except SpecInvalidError:
            return  # our rules refuse it: the converse is tested on the refusals themselves

    collect()
    return cases


@pytest.mark.parametrize("release", SUPPORTED_RELEASES)
def test_a_hypothesis_matrix_of_valid_crs_is_accepted_by_vllm(release: str) -> None:
    cases = _matrix()
    assert len(cases) >= 6, "the matrix should hold valid CRs"
    refused = [r for r in judge(release, cases) if not r["ok"]]
    assert refused == []


@pytest.mark.parametrize("release", SUPPORTED_RELEASES)
def test_extra_args_our_table_refuses_vllm_refuses_too(release: str) -> None:
    """The converse for the parser-level refusals: unknown flags, positional words, wrong types and choices."""
    base = engine_command_lines(seed(), "seed")[0]["args"]
    bad = [["--tensor-paralel-size=8"], ["stray", "words"], ["--max-num-seqs=lots"], ["--performance-mode=fast"],
           ["--gpu-memory-utilization", "high"]]
    cases = [{"name": " ".join(extra), "args": [*base, *extra]} for extra in bad]
    results = judge(release, cases)
    assert [r["name"] for r in results if r["ok"]] == []
