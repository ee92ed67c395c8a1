"""The chart's RBAC grants exactly what the operator's code calls (tests/chart/rbac.py), no wildcard;
the traffic-based half runs in tests/e2e/test_chart_rbac.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chart import rbac
from tests.chart.conftest import CI_VALUES, template

MODES = {"cluster-wide": ([], False), "namespaced": (["-f", str(CI_VALUES)], True)}


@pytest.mark.parametrize(("args", "namespaced"), MODES.values(), ids=list(MODES))
def test_chart_rbac_is_exactly_what_the_code_calls(helm: Path, args: list[str], namespaced: bool) -> None:
    granted, rules = rbac.granted_permissions(template(helm, *args))
    needed = rbac.required_permissions(namespaced=namespaced)
    assert not needed - granted, f"missing in charts/glm-operator/templates/rbac.yaml: {sorted(needed - granted)}"
    assert not granted - needed, f"granted but never used: {sorted(granted - needed)}"
    for rule in rules:
        assert "*" not in rule.get("apiGroups", []) + rule.get("resources", []) + rule["verbs"], rule
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule


def test_required_permissions_follow_the_code() -> None:
    needed = rbac.required_permissions(namespaced=False)
    # kopf's child watches and server-side apply of a child kind the operator gained (PodMonitor)
    verbs = ("list", "watch", "create", "patch", "delete")
    assert {("monitoring.coreos.com", "podmonitors", v) for v in verbs} <= needed
    # the endpoint picker's leader-election Role forces leases onto the operator
    assert ("coordination.k8s.io", "leases", "update") in needed
    assert ("", "namespaces", "list") not in needed
    assert ("", "namespaces", "watch") in rbac.required_permissions(namespaced=True)


def _event(verb: str, group: str, resource: str, code: int = 200, subresource: str | None = None) -> dict[str, object]:
    ref = {"apiGroup": group, "resource": resource, "namespace": "default", "name": "x"}
    if subresource:
        ref["subresource"] = subresource
    return {"verb": verb, "objectRef": ref, "responseStatus": {"code": code}}


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (_event("list", "apps", "statefulsets"), {("apps", "statefulsets", "list")}),
        (_event("watch", "apps", "statefulsets"), {("apps", "statefulsets", "watch")}),
        (_event("patch", "serving.glm.dev", "glmdeployments", subresource="status"),
         {("serving.glm.dev", "glmdeployments/status", "patch")}),
        (_event("patch", "", "services", code=201), {("", "services", "patch"), ("", "services", "create")}),
        (_event("patch", "", "services", code=200), {("", "services", "patch")}),
        (_event("create", "", "events", code=201), {("", "events", "create")}),
        ({"verb": "get", "requestURI": "/version", "responseStatus": {"code": 200}}, set()),
    ],
)
def test_audit_permission(event: dict[str, object], expected: set[rbac.Permission]) -> None:
    assert rbac.audit_permission(event) == expected
