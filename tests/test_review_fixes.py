"""Defects found in review, each pinned by a test first."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from glm_operator.api.load import parse
from glm_operator.api.quantity import format_bytes
from glm_operator.cluster.drift import is_subset
from glm_operator.observe.status import replica_counts, workload_ready
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr, refusal


def _seed() -> dict[str, Any]:
    cr = load_cr(EXAMPLES / "glm-5.3-pd.yaml")
    cr["metadata"]["uid"] = "u-1"
    return cr


def _objects(cr: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in render(parse(cr)).objects}


_findings = refusal


def _vllm(objects: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, Any]:
    return objects[("StatefulSet", name)]["spec"]["template"]["spec"]["containers"][0]


def test_removing_a_field_is_drift_the_operator_applies() -> None:
    with_selector = _seed()
    with_selector["spec"]["scheduling"] = {"nodeSelector": {"pool": "gpu"}, "priorityClassName": "high"}
    old = _objects(with_selector)[("StatefulSet", "glm-5-3-decode")]
    new = _objects(_seed())[("StatefulSet", "glm-5-3-decode")]
    assert not is_subset(new, old), "a spec that only removes keys must still be applied"


def test_only_the_changed_child_gets_a_new_hash() -> None:
    base, changed = _seed(), _seed()
    changed["spec"]["decode"]["replicas"] = 2
    a, b = _objects(base), _objects(changed)
    differ = {key for key in a if a[key] != b[key]}
    assert differ == {("StatefulSet", "glm-5-3-decode")}


def test_user_env_overrides_unprotected_defaults_without_duplicates() -> None:
    cr = _seed()
    cr["spec"]["prefill"]["env"] = [{"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": "300"}]
    env = _vllm(_objects(cr), "glm-5-3-prefill")["env"]
    names = [e["name"] for e in env]
    assert len(names) == len(set(names))
    assert {"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": "300"} in env


def test_duplicate_env_names_are_refused() -> None:
    cr = _seed()
    cr["spec"]["decode"]["env"] = [{"name": "FOO", "value": "1"}, {"name": "FOO", "value": "2"}]
    assert any(f.field.startswith("spec.decode.env") and "FOO" in f.message for f in _findings(cr))


def test_empty_env_value_is_rendered_as_the_server_stores_it() -> None:
    cr = _seed()
    cr["spec"]["decode"]["env"] = [{"name": "EMPTY", "value": ""}]
    assert {"name": "EMPTY"} in _vllm(_objects(cr), "glm-5-3-decode")["env"]


@pytest.mark.parametrize(
    ("n", "text"), [(10**9, "1G"), (1_500_000_000, "1500M"), (2**30, "1Gi"), (1000, "1k"), (1001, "1001")]
)
def test_format_bytes_uses_the_servers_canonical_form(n: int, text: str) -> None:
    assert format_bytes(n) == text


def test_explicit_null_is_refused_because_the_api_server_drops_it() -> None:
    cr = _seed()
    cr["spec"]["prefill"]["cpuOffloadPerRank"] = None
    found = _findings(cr)
    assert any(f.field == "spec.prefill.cpuOffloadPerRank" and "null" in f.message for f in found)


def test_zero_turns_cpu_offload_off() -> None:
    cr = _seed()
    cr["spec"]["prefill"]["cpuOffloadPerRank"] = "0"
    args = _vllm(_objects(cr), "glm-5-3-prefill")["args"]
    config = json.loads(args[args.index("--kv-transfer-config") + 1])
    assert config["kv_connector"] == "NixlConnector"


def test_epp_probes_use_leader_election_services_with_replicas() -> None:
    cr = _seed()
    cr["spec"]["router"]["endpointPicker"]["replicas"] = 2
    epp = _objects(cr)[("Deployment", "glm-5-3-epp")]["spec"]["template"]["spec"]["containers"][0]
    assert epp["livenessProbe"]["grpc"]["service"] == "liveness"
    assert epp["readinessProbe"]["grpc"]["service"] == "readiness"


def test_flag_and_value_in_one_extra_arg_are_refused() -> None:
    cr = _seed()
    cr["spec"]["decode"]["extraArgs"] = ["--max-num-seqs 64"]
    assert any(f.field == "spec.decode.extraArgs[0]" for f in _findings(cr))


def test_attention_config_is_allowed_where_the_operator_does_not_render_it() -> None:
    cr = _seed()
    cr["spec"]["decode"]["extraArgs"] = ['--attention-config={"hisparse_config":{"device_buffer_size":8192}}']
    assert render(parse(cr)).objects
    cr["spec"]["prefill"]["extraArgs"] = ["--attention-config={}"]
    assert any(f.field == "spec.prefill.extraArgs[0]" for f in _findings(cr))


def test_secure_serving_can_be_turned_off_behind_a_gateway() -> None:
    cr = _seed()
    cr["spec"]["router"]["gateway"] = {"name": "gw"}
    cr["spec"]["router"]["endpointPicker"]["secureServing"] = False
    epp = _objects(cr)[("Deployment", "glm-5-3-epp")]["spec"]["template"]["spec"]["containers"][0]
    assert "--secure-serving=false" in epp["args"]


def test_a_workload_mid_rollout_is_not_ready() -> None:
    sts: dict[str, Any] = {
        "metadata": {"generation": 2},
        "status": {"observedGeneration": 1, "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1},
    }
    assert not workload_ready(sts, 1)
    rolled = copy.deepcopy(sts)
    rolled["status"].update(observedGeneration=2, currentRevision="r2", updateRevision="r2")
    assert workload_ready(rolled, 1)
    rolled["status"]["currentRevision"] = "r1"
    assert not workload_ready(rolled, 1)
    assert replica_counts(rolled, 1) == {"replicas": 1, "readyReplicas": 1}
