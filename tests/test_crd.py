"""The CRD is generated from the pydantic models, structural, and accepts exactly what they accept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from glm_operator.api.crd import build_crd
from tests.conftest import INVALID_EXAMPLES, ROOT, VALID_EXAMPLES, expectations, load_cr

CRD_FILE = ROOT / "crds" / "glmdeployment.yaml"


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        if "type" in node or "properties" in node or "items" in node:
            found.append((path, node))
        for key, value in node.get("properties", {}).items():
            found += _walk(value, f"{path}.{key}")
        if isinstance(node.get("items"), dict):
            found += _walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            found += _walk(node["additionalProperties"], f"{path}{{}}")
    return found


def test_committed_crd_matches_the_models() -> None:
    assert yaml.safe_load(CRD_FILE.read_text()) == build_crd(), "crds/ drifted from the models: run `make crds`"


@pytest.mark.parametrize("k8s_version", ["1.31.0", "1.34.0"])
def test_crd_passes_the_apiextensions_schema(k8s_version: str) -> None:
    kubernetes_validate.validate(build_crd(), k8s_version, strict=True)


def test_crd_identity_and_printer_columns() -> None:
    crd = build_crd()
    assert crd["metadata"]["name"] == "glmdeployments.serving.glm.dev"
    assert crd["spec"]["names"]["shortNames"] == ["glmd"]
    assert crd["spec"]["scope"] == "Namespaced"
    version = crd["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Ready", "Mode", "Max-Context", "KV/GPU", "Endpoint", "Age"]


def test_schema_is_structural() -> None:
    text = yaml.safe_dump(build_crd())
    for keyword in ("$ref", "anyOf", "allOf", "oneOf", "patternProperties", "propertyNames", "const"):
        assert f"{keyword}:" not in text, f"CRDs reject or cannot use {keyword}"
    for path, node in _walk(_schema()):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path


def test_schema_has_enums_bounds_patterns_and_cel_rules() -> None:
    spec = _schema()["properties"]["spec"]
    assert spec["properties"]["mode"]["enum"] == ["disaggregated", "aggregated"]
    replicas = spec["properties"]["prefill"]["properties"]["replicas"]
    assert replicas["minimum"] == 1
    pool = spec["properties"]["decode"]["properties"]["hiSparse"]["properties"]["hostPoolPerRank"]
    assert "Gi" in pool["pattern"]
    rules = spec["properties"]["prefill"]["properties"]["parallelism"]["x-kubernetes-validations"]
    assert any(r["rule"] == "self.prefillContext == 1 || self.data == 1" for r in rules)
    assert any("aggregated" in r["message"] for r in spec["x-kubernetes-validations"])


@pytest.mark.parametrize("example", VALID_EXAMPLES, ids=lambda p: p.name)
def test_valid_examples_pass_the_crd_schema(example: Path) -> None:
    jsonschema.Draft202012Validator(_schema()).validate(load_cr(example))


def test_crd_rejects_the_schema_level_invalid_examples() -> None:
    """Examples whose error is a bound, enum or pattern are refused by the API server too."""
    schema_level = {"zero-replicas.yaml", "negative-replicas.yaml", "bad-memory-quantity.yaml"}
    validator = jsonschema.Draft202012Validator(_schema())
    for example in INVALID_EXAMPLES:
        if example.name in schema_level:
            errors = list(validator.iter_errors(load_cr(example)))
            field = expectations(example)["expected-field"].removeprefix("spec.")
            assert any(".".join(map(str, e.absolute_path)).endswith(field) for e in errors), example.name
