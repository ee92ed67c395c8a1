"""Second new-user trial: bad input that slipped through, valid input that was refused."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from glm_operator.api.load import parse
from glm_operator.api.quantity import parse_bytes
from glm_operator.cli import app
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr, refusal, seed

runner = CliRunner()


_seed = seed


_findings = refusal


def _set(cr: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    cr = copy.deepcopy(cr)
    node = cr
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return cr


@pytest.mark.parametrize(
    "arg",
    [
        "--attention-config.sparse_mla_force_mqa=false",
        "--kv-transfer-config.kv_role=kv_both",
        "--speculative-config.model=foo",
        "-sc.num_speculative_tokens=9",
        "-ep",
        "-ac.sparse_mla_force_mqa=false",
        "--block-siz=16",
    ],
)
def test_dotted_short_and_abbreviated_flags_are_managed(arg: str) -> None:
    cr = _set(_seed(), "spec.prefill.extraArgs", [arg])
    assert any(f.field == "spec.prefill.extraArgs[0]" for f in _findings(cr))


def test_empty_extra_arg_is_refused() -> None:
    found = _findings(_set(_seed(), "spec.decode.extraArgs", [""]))
    assert any(f.field.startswith("spec.decode.extraArgs") for f in found)


def test_two_weight_sources_are_refused_like_the_crd_does() -> None:
    cr = _set(_seed(), "spec.model.source.huggingFace", {})
    assert any(f.field == "spec.model.source" for f in _findings(cr))


def test_equal_ports_are_refused_in_aggregated_mode_too() -> None:
    cr = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
    cr = _set(cr, "spec.ports", {"serving": 8000, "engine": 8000})
    assert any(f.field == "spec.ports" for f in _findings(cr))


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("spec.scheduling.tolerations", [{"key": "a", "operatr": "Exists"}], "spec.scheduling.tolerations[0].operatr"),
        ("spec.scheduling.affinity", {"nodeAffinty": {}}, "spec.scheduling.affinity"),
        ("spec.scheduling.nodeSelector", {"bad key!": "v"}, "spec.scheduling.nodeSelector"),
        ("spec.scheduling.nodeSelector", {"nvidia.com/gpu.product": "NVIDIA-H100"}, "spec.scheduling.nodeSelector"),
        ("spec.scheduling.priorityClassName", "Bad_Name", "spec.scheduling.priorityClassName"),
        ("spec.model.source.pvc.subPath", "../etc", "spec.model.source.pvc.subPath"),
        ("spec.router.gateway", {"name": "gw", "sectionName": "Bad Name!"}, "spec.router.gateway.sectionName"),
        ("spec.decode.resources", {"shm": "0"}, "spec.decode.resources.shm"),
        ("spec.decode.resources", {"memory": "0"}, "spec.decode.resources.memory"),
        ("spec.router.endpointPicker.scorers", {"prefixCache": 0, "queue": 0, "kvCacheUtilization": 0},
         "spec.router.endpointPicker.scorers"),
    ],
)
def test_pass_through_and_sanity_checks(path: str, value: Any, field: str) -> None:
    found = _findings(_set(_seed(), path, value))
    assert any(f.field.startswith(field) for f in found), found


def test_env_value_from_is_typed() -> None:
    cr = _set(_seed(), "spec.decode.env", [{"name": "A", "valueFrom": {"secretKeyRf": {"name": "s", "key": "k"}}}])
    assert any(f.field.startswith("spec.decode.env[0].valueFrom") for f in _findings(cr))
    cr = _set(_seed(), "spec.decode.env", [{"name": "A", "valueFrom": {}}])
    assert any(f.field.startswith("spec.decode.env[0]") for f in _findings(cr))


def test_metadata_labels_and_annotations_are_checked() -> None:
    cr = _set(_seed(), "metadata.labels", {"bad key!": "v"})
    assert any(f.field.startswith("metadata.labels") for f in _findings(cr))
    cr = _set(_seed(), "metadata.annotations", {"a": 1})
    assert any(f.field.startswith("metadata.annotations") for f in _findings(cr))


def test_a_null_field_is_reported_once() -> None:
    found = _findings(_set(_seed(), "spec.decode.replicas", None))
    assert [f.field for f in found] == ["spec.decode.replicas"]


def test_exponent_quantities_are_accepted() -> None:
    assert parse_bytes("1e3") == 1000
    assert parse_bytes("64e9") == 64 * 10**9


def test_yaml_merge_keys_are_accepted(tmp_path: Path) -> None:
    text = (EXAMPLES / "glm-5.3-pd.yaml").read_text().replace(
        "  prefill:\n    replicas: 1\n", "  prefill:\n    <<: {replicas: 1}\n"
    )
    assert "<<:" in text
    path = tmp_path / "merge.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output


def test_multi_document_errors_name_the_document_and_duplicates_are_refused(tmp_path: Path) -> None:
    seed, bad = _seed(), _set(_seed(), "spec.decode.replicas", 0)
    bad["metadata"]["name"] = "second"
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump_all([seed, bad]))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1 and "document 2" in result.output and "second" in result.output
    path.write_text(yaml.safe_dump_all([seed, seed]))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1 and "twice" in result.output


def test_user_toleration_equal_to_the_default_is_not_duplicated() -> None:
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    objects = render(parse(_set(_seed(), "spec.scheduling.tolerations", [toleration]))).objects
    sts = next(o for o in objects if o["kind"] == "StatefulSet")
    assert sts["spec"]["template"]["spec"]["tolerations"] == [toleration]


def test_disaggregated_without_rdma_warns_about_tcp() -> None:
    warnings = render(parse(_seed())).warnings
    assert any(w.field == "spec.kvTransfer.rdma" for w in warnings)
