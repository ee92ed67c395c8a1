"""Small pure pieces: quantities, drift detection, conditions, ports, parse errors."""

from __future__ import annotations

from typing import Any

import pytest

from glm_operator.api.findings import SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.api.quantity import QuantityError, canonical_cpu, format_bytes, parse_bytes
from glm_operator.api.spec import GLMDeploymentSpec
from glm_operator.cluster.drift import is_subset
from glm_operator.observe.status import condition, status_patch
from glm_operator.plan.ports import collisions, role_ports


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512Gi", 512 * 2**30), ("64G", 64 * 10**9), ("1024", 1024), ("1.5Gi", 3 * 2**29), ("0", 0)],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["48GB", "-1Gi", "Gi", "1 Gi", "1e", "e3"])
def test_parse_bytes_rejects(text: str) -> None:
    with pytest.raises(QuantityError, match="memory quantity"):
        parse_bytes(text)


def test_format_bytes_round_trips_to_canonical_form() -> None:
    assert format_bytes(800 * 2**30) == "800Gi"
    assert format_bytes(2**40) == "1Ti"
    assert format_bytes(1000) == "1k"
    assert format_bytes(1001) == "1001"
    assert parse_bytes(format_bytes(123 * 2**20)) == 123 * 2**20


def test_is_subset_ignores_server_added_fields_but_not_changes() -> None:
    desired: dict[str, Any] = {"spec": {"replicas": 1, "ports": [{"port": 80}]}}
    live = {"spec": {"replicas": 1, "ports": [{"port": 80, "protocol": "TCP"}], "revisionHistoryLimit": 10}}
    assert is_subset(desired, live)
    assert not is_subset(desired, {"spec": {"replicas": 2, "ports": [{"port": 80}]}})
    assert not is_subset(desired, {"spec": {"replicas": 1, "ports": []}})
    assert not is_subset({"a": True}, {"a": 1})


def test_condition_keeps_transition_time_unless_status_flips() -> None:
    old = [{"type": "Ready", "status": "False", "lastTransitionTime": "T0"}]
    same = condition(old, "Ready", status=False, reason="R", message="m", generation=2, now="T1")
    flipped = condition(old, "Ready", status=True, reason="R", message="m", generation=2, now="T1")
    assert same["lastTransitionTime"] == "T0"
    assert flipped["lastTransitionTime"] == "T1"


def test_status_patch_is_none_when_nothing_changed() -> None:
    status = {"observedGeneration": 1, "endpoint": "x"}
    assert status_patch(status, dict(status)) is None
    assert status_patch(status, {"observedGeneration": 2}) == {"observedGeneration": 2, "endpoint": None}


def test_seed_port_plan_has_no_collisions() -> None:
    spec = GLMDeploymentSpec.model_validate({"model": {"name": "m"}, "image": "i"})
    for name, role in spec.roles().items():
        plan = role_ports(spec, name, role)
        assert collisions(plan) == []
        assert plan.nixl == tuple(range(5600, 5608))


def test_parse_reports_metadata_problems() -> None:
    with pytest.raises(SpecInvalidError) as info:
        parse({"apiVersion": "serving.glm.dev/v1", "kind": "GLMDeployment", "metadata": {"name": "Bad_Name"},
               "spec": {"model": {"name": "m"}, "image": "i"}})
    fields = {f.field for f in info.value.findings}
    assert fields == {"apiVersion", "metadata.name"}


def test_parse_requires_model_and_image() -> None:
    with pytest.raises(SpecInvalidError) as info:
        parse({"apiVersion": "serving.glm.dev/v1alpha1", "kind": "GLMDeployment", "metadata": {"name": "x"},
               "spec": {}})
    assert {f.field for f in info.value.findings} == {"spec.model", "spec.image"}
    assert all(f.message == "required field is missing" for f in info.value.findings)


@pytest.mark.parametrize(
    ("text", "expected"), [("32", "32"), ("0.5", "500m"), ("1500m", "1500m"), ("2000m", "2"), ("1.25", "1250m")]
)
def test_canonical_cpu_matches_what_the_api_server_stores(text: str, expected: str) -> None:
    assert canonical_cpu(text) == expected
