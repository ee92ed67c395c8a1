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


@pytest.mark.parametrize(
    ("method", "path", "query", "status", "expected"),
    [
        ("GET", "/apis/apps/v1/namespaces/default/statefulsets", "labelSelector=a%3Db", 200,
         {("apps", "statefulsets", "list")}),
        ("GET", "/apis/apps/v1/namespaces/default/statefulsets", "watch=true&resourceVersion=5", 200,
         {("apps", "statefulsets", "watch")}),
        ("GET", "/apis/serving.glm.dev/v1alpha1/namespaces/default/glmdeployments/x", "", 200,
         {("serving.glm.dev", "glmdeployments", "get")}),
        ("PATCH", "/apis/serving.glm.dev/v1alpha1/namespaces/default/glmdeployments/x/status", "", 200,
         {("serving.glm.dev", "glmdeployments/status", "patch")}),
        ("PATCH", "/api/v1/namespaces/default/services/x", "fieldManager=glm-operator", 201,
         {("", "services", "patch"), ("", "services", "create")}),
        ("POST", "/api/v1/namespaces/default/events", "", 201, {("", "events", "create")}),
        ("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "watch=true", 200,
         {("apiextensions.k8s.io", "customresourcedefinitions", "watch")}),
        ("GET", "/apis/apps/v1", "", 200, set()),
        ("GET", "/version", "", 200, set()),
    ],
)
def test_request_permission(method: str, path: str, query: str, status: int, expected: set[rbac.Permission]) -> None:
    assert rbac.request_permission(method, path, query, status) == expected
