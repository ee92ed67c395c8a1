"""Property tests of the capacity planner (hypothesis): monotonicity, and refusals that name real fields."""

from __future__ import annotations

import copy
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glm_operator.api.crd import build_crd
from glm_operator.api.findings import SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.plan import rules
from glm_operator.plan.capacity import plan_deployment
from glm_operator.plan.kv import kv_bytes_per_gpu
from tests.conftest import EXAMPLES, load_cr, seed

SPEC_SCHEMA = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
KIMI = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
tokens = st.integers(min_value=1, max_value=16_777_216)


def field_exists(path: str) -> bool:
    """Whether a finding's dotted path (``spec.decode.env[2].name``) names a field of the CRD schema."""
    node = SPEC_SCHEMA
    for part in re.sub(r"\[\d+\]", ".[]", path).split("."):
        if part == "[]":
            node = node.get("items", {})
            continue
        props = node.get("properties")
        if props is None or part not in props:
            return False
        node = props[part]
    return True


def test_field_exists_resolves_crd_paths() -> None:
    assert field_exists("spec.decode.env[2].name") and field_exists("spec.model.maxModelLen")
    assert not field_exists("spec.model.maxModelLength") and not field_exists("spec.decode.env[0].nope")


@given(n=tokens, per_token=st.integers(min_value=1, max_value=200_000))
def test_more_dcp_never_needs_more_kv_per_gpu(n: int, per_token: int) -> None:
    sizes = [kv_bytes_per_gpu(n, per_token, dcp) for dcp in (1, 2, 4, 8, 16)]
    assert sizes == sorted(sizes, reverse=True)


@settings(deadline=None)
@given(n=st.integers(min_value=1024, max_value=4_194_304))
def test_more_dcp_never_needs_more_kv_per_gpu_in_a_real_plan(n: int) -> None:
    needs = []
    for dcp in (1, 2, 4, 8):
        cr = copy.deepcopy(KIMI)
        cr["spec"]["engine"]["parallelism"]["decodeContext"] = dcp
        role = plan_deployment(parse(cr).spec).roles["engine"]
        needs.append(role.request_bytes_per_gpu(n))
    assert needs == sorted(needs, reverse=True)


@settings(deadline=None)
@given(shorter=st.integers(min_value=1, max_value=4_000_000), extra=st.integers(min_value=0, max_value=4_000_000),
       role=st.sampled_from(["prefill", "decode"]), hisparse=st.booleans())
def test_a_longer_context_never_needs_less(shorter: int, extra: int, role: str, hisparse: bool) -> None:
    cr = seed()
    cr["spec"]["decode"]["hiSparse"]["enabled"] = hisparse
    plan = plan_deployment(parse(cr).spec).roles[role]
    assert plan.request_bytes_per_gpu(shorter + extra) >= plan.request_bytes_per_gpu(shorter)
    assert plan.concurrency_per_rank(shorter + extra) <= plan.concurrency_per_rank(shorter)


@settings(deadline=None)
@given(n=st.integers(min_value=1024, max_value=3_000_000), role=st.sampled_from(["prefill", "decode"]))
def test_max_context_is_exactly_where_one_request_stops_fitting(n: int, role: str) -> None:
    plan = plan_deployment(parse(seed()).spec).roles[role]
    fits = plan.request_bytes_per_gpu(n) <= plan.kv_budget_bytes_per_gpu
    assert fits == (n <= plan.max_context_tokens)


mutations = st.fixed_dictionaries({
    "maxModelLen": st.one_of(st.none(), st.integers(min_value=1024, max_value=1_048_576)),
    "prefill": st.sampled_from([
        {"data": 8, "expert": True}, {"prefillContext": 8, "decodeContext": 1, "expert": True},
        {"prefillContext": 8, "decodeContext": 8, "expert": True}, {"data": 8, "expert": False},
        {"tensor": 8, "expert": True}, {"tensor": 8, "decodeContext": 8, "expert": True},
    ]),
    "hiSparse": st.booleans(),
    "hostPool": st.sampled_from(["1Gi", "8Gi", "48Gi", "200Gi"]),
    "nodeMemory": st.one_of(st.none(), st.sampled_from(["256Gi", "768Gi", "2Ti"])),
    "product": st.sampled_from(["H200", "B200"]),
    "dtype": st.sampled_from(["fp8", "bfloat16"]),
    "profile": st.sampled_from(["glm-5.3", "glm-5.1", "deepseek-v3.2"]),
})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=mutations)
def test_every_refusal_names_a_field_that_exists_in_the_crd(m: dict[str, Any]) -> None:
    cr = seed()
    spec = cr["spec"]
    spec["model"]["maxModelLen"] = m["maxModelLen"]
    if m["maxModelLen"] is None:
        del spec["model"]["maxModelLen"]
    spec["model"]["profile"] = m["profile"]
    spec["model"]["name"] = {"glm-5.3": "zai-org/GLM-5.3-FP8", "glm-5.1": "zai-org/GLM-5.1-FP8",
                             "deepseek-v3.2": "deepseek-ai/DeepSeek-V3.2"}[m["profile"]]
    spec["prefill"]["parallelism"] = m["prefill"]
    spec["decode"]["hiSparse"] = {"enabled": m["hiSparse"], "hostPoolPerRank": m["hostPool"]}
    spec["gpu"] = {"product": m["product"], "perNode": 8}
    if m["nodeMemory"]:
        spec["gpu"]["nodeMemory"] = m["nodeMemory"]
    spec["kvCache"]["dtype"] = m["dtype"]
    try:
        findings = rules.check(parse(cr).spec)
    except SpecInvalidError as exc:
        findings = exc.findings
    for finding in findings:
        assert field_exists(finding.field), f"{finding.field} is not a CRD field: {finding}"
        assert finding.fix
