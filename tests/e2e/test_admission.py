"""Admission by the real kube-apiserver: what `kubectl apply` refuses, what the operator reports, and whether our
local model of the CRD (tests/test_cel_rules.py: defaulting + CEL; the openAPIV3Schema with jsonschema) agrees.

Every ``examples/invalid/*.yaml`` is either refused at ``kubectl apply --server-side`` with a message naming its
``# expected-field:``, or accepted and then refused by the operator in status (Planned=False, the field and the
``# expected-message:`` in the Degraded condition). The set the API server refuses equals the set the local model
refuses.

What the real API server does with an unknown field (``spec.prefil``), measured here:

- ``kubectl apply --server-side`` refuses it with every ``--validate`` mode (strict, warn, ignore): server-side apply
  builds a typed patch from the schema first (``.spec.prefil: field not declared in schema``);
- ``kubectl create`` (client-side, ``--validate=strict``, kubectl's default) refuses it: ``strict decoding error:
  unknown field "spec.prefil"``;
- ``kubectl create --validate=false`` (field validation Ignore) stores the CR with the field pruned, silently.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from glm_localcluster.stack import Stack
from glm_operator.api.crd import build_crd
from tests.conftest import INVALID_EXAMPLES, expectations, load_cr, seed
from tests.e2e.conftest import Cluster, make_namespace
from tests.test_cel_rules import apply_defaults, violations


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _strict(node: Any) -> Any:
    """The schema with unknown fields refused wherever the API server refuses them (every object with
    ``properties`` and without ``x-kubernetes-preserve-unknown-fields``), as strict field validation does."""
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items()}
        if "properties" in node and "additionalProperties" not in node \
                and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


def _locally_refused(cr: dict[str, Any]) -> list[str]:
    """Why our local model of the CRD refuses ``cr``: strict schema errors, then CEL rules after defaulting."""
    schema = _schema()
    errors = [e.message for e in jsonschema.Draft202012Validator(_strict(schema)).iter_errors(cr)]
    defaulted = apply_defaults(schema, copy.deepcopy(cr))
    return errors + [f"{path}: {message}" for path, message in violations(schema, defaulted)]


def _apply(stack: Stack, namespace: str, doc: dict[str, Any], *args: str) -> tuple[bool, str]:
    doc = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
    proc = stack.run("kubectl", ["apply", "--server-side", "-n", namespace, *args, "-f", "-"],
                     stdin=yaml.safe_dump(doc, sort_keys=False), check=False)
    return proc.returncode == 0, proc.stderr.strip()


def _named(path: Path) -> dict[str, Any]:
    cr = load_cr(path)
    cr["metadata"]["name"] = path.stem
    return cr


async def test_every_invalid_example_is_refused_at_apply_or_reported_in_status(cluster: Cluster) -> None:
    stack, ns = cluster.stack, cluster.namespace
    refused: dict[str, str] = {}
    accepted: list[Path] = []
    for path in INVALID_EXAMPLES:
        ok, stderr = await cluster.call(_apply, stack, ns, _named(path))
        if ok:
            accepted.append(path)
        else:
            refused[path.stem] = stderr
    # the real API server and our local model of the CRD refuse the same examples
    local = {p.stem: _locally_refused(load_cr(p)) for p in INVALID_EXAMPLES}
    assert set(refused) == {name for name, why in local.items() if why}, (refused, local)
    for name, stderr in refused.items():
        field = expectations(next(p for p in INVALID_EXAMPLES if p.stem == name))["expected-field"]
        assert field in stderr, f"{name}: the API server's refusal does not name {field}: {stderr}"
    # schema bounds, patterns and every CEL rule are enforced by the API server itself
    assert {"zero-replicas", "negative-replicas", "bad-memory-quantity", "unknown-field", "pcp-with-dp",
            "aggregated-with-decode-fields"} <= set(refused)
    assert accepted, "no example reached the operator"
    for path in accepted:
        want = expectations(path)
        cr = await cluster.wait_reconciled(path.stem, 1)
        conditions = {c["type"]: c for c in cr["status"]["conditions"]}
        assert conditions["Planned"]["status"] == "False", (path.stem, conditions["Planned"])
        assert conditions["Degraded"]["status"] == "True"
        message = conditions["Degraded"]["message"]
        assert want["expected-field"] in message and want["expected-message"] in message, (path.stem, message)
    # refused in status, not by creating children
    await cluster.settle()
    for path in accepted:
        assert await cluster.children(path.stem) == {}, path.stem


def test_a_string_for_an_integer_is_refused_at_apply(stack: Stack) -> None:
    namespace = make_namespace(stack, cr_claims=())
    try:
        cr = seed()
        cr["metadata"]["name"] = "two"
        cr["spec"]["prefill"]["replicas"] = "two"
        ok, stderr = _apply(stack, namespace, cr)
        assert not ok
        assert ".spec.prefill.replicas: expected numeric (int or float), got string" in stderr
        assert _locally_refused(cr)
    finally:
        stack.run("kubectl", ["delete", "namespace", namespace, "--wait=false"], check=False)


def test_an_unknown_field_is_refused_by_apply_and_pruned_only_by_a_lax_create(stack: Stack) -> None:
    namespace = make_namespace(stack, cr_claims=())
    example = next(p for p in INVALID_EXAMPLES if p.name == "unknown-field.yaml")
    try:
        for mode in ("strict", "warn", "ignore"):
            ok, stderr = _apply(stack, namespace, _named(example), f"--validate={mode}")
            assert not ok, mode
            assert ".spec.prefil: field not declared in schema" in stderr, (mode, stderr)
        doc = yaml.safe_dump(_named(example), sort_keys=False)
        strict = stack.run("kubectl", ["create", "-n", namespace, "-f", "-"], stdin=doc, check=False)
        assert strict.returncode != 0
        assert 'strict decoding error: unknown field "spec.prefil"' in strict.stderr
        lax = stack.run("kubectl", ["create", "--validate=false", "-n", namespace, "-f", "-"], stdin=doc, check=False)
        assert lax.returncode == 0, lax.stderr
        got = stack.run("kubectl", ["get", "glmd", example.stem, "-n", namespace, "-o", "yaml"])
        stored = yaml.safe_load(got.stdout)
        assert "prefil" not in stored["spec"] and stored["spec"]["model"]["name"] == "zai-org/GLM-5.3-FP8"
    finally:
        stack.run("kubectl", ["delete", "namespace", namespace, "--wait=false"], check=False)

