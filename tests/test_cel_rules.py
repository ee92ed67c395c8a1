"""The CRD's CEL rules (x-kubernetes-validations), evaluated as the API server would after defaulting.

A wrong rule is worse than none: the API server would refuse valid CRs at `kubectl apply`. So every
valid example must pass every rule, and the cross-field bad inputs must fail the rule meant for them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import cel
import pytest

from glm_operator.api.crd import build_crd
from tests.conftest import EXAMPLES, VALID_EXAMPLES, load_cr


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting: fill ``default`` of absent properties of every present object."""
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], v) for v in value]
    return value


def violations(schema: dict[str, Any], value: Any, path: str = "") -> list[tuple[str, str]]:
    """``(path, message)`` of every rule that evaluates to false; the path ends with the rule's ``fieldPath``, as in
    the API server's refusal."""
    found = []
    for rule in schema.get("x-kubernetes-validations", []):
        if not cel.evaluate(rule["rule"], {"self": value}):
            found.append((path + rule.get("fieldPath", ""), rule["message"]))
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                found += violations(sub, value[name], f"{path}.{name}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found += violations(schema["items"], item, f"{path}[{i}]")
    return found


def _check(cr: dict[str, Any]) -> list[tuple[str, str]]:
    schema = _schema()
    return violations(schema, apply_defaults(schema, copy.deepcopy(cr)))


def _rules(schema: dict[str, Any]) -> list[str]:
    found = [r["rule"] for r in schema.get("x-kubernetes-validations", [])]
    for sub in schema.get("properties", {}).values():
        found += _rules(sub)
    if isinstance(schema.get("items"), dict):
        found += _rules(schema["items"])
    return found


def test_every_rule_compiles() -> None:
    rules = _rules(_schema())
    assert len(rules) >= 10  # parallelism ×3 per role, mode/roles ×2, weights source, ports
    for rule in rules:
        cel.compile(rule)


@pytest.mark.parametrize("example", VALID_EXAMPLES, ids=lambda p: p.name)
def test_valid_examples_pass_every_rule(example: Path) -> None:
    assert _check(load_cr(example)) == []


@pytest.mark.parametrize(
    ("example", "path", "message"),
    [
        ("pcp-with-dp.yaml", ".spec.prefill.parallelism.data", "PCP > 1 with data parallelism is not supported"),
        ("pcp-dcp-not-allowed.yaml", ".spec.prefill.parallelism.decodeContext",
         "decodeContext must be 1, prefillContext or"),
        ("pcp1-tensor-not-multiple-of-dcp.yaml", ".spec.engine.parallelism.decodeContext", "tensor must be a multiple"),
        ("aggregated-with-decode-fields.yaml", ".spec.decode", "mode aggregated has one role"),
    ],
)
def test_cross_field_bad_input_fails_its_rule(example: str, path: str, message: str) -> None:
    found = _check(load_cr(EXAMPLES / "invalid" / example))
    assert any(p == path and message in m for p, m in found), found


def test_two_weight_sources_and_equal_ports_are_refused() -> None:
    cr = load_cr(EXAMPLES / "glm-5.3-pd.yaml")
    cr["spec"]["model"]["source"]["huggingFace"] = {}
    cr["spec"]["ports"] = {"serving": 8000, "engine": 8000}
    messages = {m for _, m in _check(cr)}
    assert messages == {"set only one of pvc or huggingFace", "serving and engine must differ"}
