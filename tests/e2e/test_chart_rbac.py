"""Every API request the running operator sends is allowed by the chart's RBAC, as the real API server decides.

The operator runs with a token of the chart's ServiceAccount, through create (with PodMonitors and a Gateway), prune
(both switched off), a refused update and a child deleted by hand; the API server's audit log records the
authorization attributes of each request. The ``cluster`` fixture already fails on any 403; here the permissions used
are also compared with what the chart grants and what the code derives (tests/chart/rbac.py).
"""

from __future__ import annotations

from kubernetes import client

from tests.chart import rbac
from tests.chart.conftest import helm_binary, template
from tests.conftest import seed
from tests.e2e.conftest import Cluster

NAME = "glm-5-3"


async def test_operator_traffic_is_covered_by_the_chart_rbac(cluster: Cluster) -> None:
    cr = seed()
    cr["spec"]["monitoring"] = {"podMonitors": True}
    cr["spec"].setdefault("router", {})["gateway"] = {"name": "inference-gateway"}
    await cluster.create(cr)
    await cluster.wait_reconciled(NAME, 1)

    async def has(kind: str) -> bool:
        return any(k == kind for k, _ in await cluster.children(NAME))

    await cluster.wait_for(lambda: has("PodMonitor"), "PodMonitors")
    await cluster.call(client.AppsV1Api(cluster.api).delete_namespaced_stateful_set, "glm-5-3-decode",
                       cluster.namespace)
    await cluster.patch_spec(NAME, {"monitoring": {"podMonitors": False}, "router": {"gateway": None}})
    await cluster.wait_reconciled(NAME, 2)

    async def pruned() -> bool:
        return not (await has("PodMonitor") or await has("HTTPRoute")) and await has("StatefulSet")

    await cluster.wait_for(pruned, "PodMonitors and HTTPRoute pruned, the StatefulSet restored")
    await cluster.patch_spec(NAME, {"decode": {"hiSparse": {"enabled": False}}})  # refused: KV does not fit
    await cluster.wait_reconciled(NAME, 3)
    await cluster.settle()

    events = cluster.requests()
    used = set().union(*(rbac.audit_permission(e) for e in events))
    assert {("", "events", "create"), ("monitoring.coreos.com", "podmonitors", "delete"),
            ("gateway.networking.k8s.io", "httproutes", "create"), ("apps", "statefulsets", "create"),
            ("serving.glm.dev", "glmdeployments/status", "patch")} <= used, "the scenario did not run"
    helm = helm_binary()
    for values, namespaced in (([], False), (["--set", "watch.namespaces={default}"], True)):
        granted, _ = rbac.granted_permissions(template(helm, *values))
        assert not used - granted, f"the operator called {sorted(used - granted)}, which the chart does not grant"
        # and the code-derived set (the chart's exact contents) covers what was really sent
        assert not used - rbac.required_permissions(namespaced=namespaced)
