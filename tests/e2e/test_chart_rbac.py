"""Every API request the running operator sends is allowed by the chart's RBAC.

The real operator (kopf + handlers) runs against the emulator through create (with PodMonitors and
a Gateway), prune (both switched off), a refused update (an InvalidSpec Event) and a child deleted
by hand (re-created by server-side apply); each request it sent (User-Agent ``glm-operator/…`` or
``kopf/…``) is mapped to the permission an API server would check.
"""

from __future__ import annotations

from glm_operator.cluster.apiclient import USER_AGENT
from tests.chart import rbac
from tests.chart.conftest import helm_binary, template
from tests.conftest import seed
from tests.e2e.conftest import Cluster

NAME = "glm-5-3"
OPERATOR_AGENTS = (USER_AGENT, "kopf/")


async def test_operator_traffic_is_covered_by_the_chart_rbac(cluster: Cluster) -> None:
    cluster.api.user_agent = "glm-rbac-test"  # this test's own requests are not the operator's
    cr = seed()
    cr["spec"]["monitoring"] = {"podMonitors": True}
    cr["spec"].setdefault("router", {})["gateway"] = {"name": "inference-gateway"}
    await cluster.create(cr)
    await cluster.wait_reconciled(NAME, 1)

    async def has(kind: str) -> bool:
        return any(k == kind for k, _ in await cluster.children(NAME))

    await cluster.wait_for(lambda: has("PodMonitor"), "PodMonitors")
    await cluster.patch_spec(NAME, {"monitoring": {"podMonitors": False}, "router": {"gateway": None}})
    await cluster.wait_reconciled(NAME, 2)

    async def pruned() -> bool:
        return not (await has("PodMonitor") or await has("HTTPRoute"))

    await cluster.wait_for(pruned, "PodMonitors and HTTPRoute pruned")
    await cluster.patch_spec(NAME, {"prefill": {"parallelism": {"decodeContext": 4}}})  # refused
    await cluster.wait_reconciled(NAME, 3)
    await cluster.settle()

    operator = [r for r in cluster.emulator.request_log if r.user_agent.startswith(OPERATOR_AGENTS)]
    used = set().union(*(rbac.request_permission(r.method, r.path, r.query, r.status) for r in operator))
    # the fixture registered the CRD with an operator-like client before the operator started
    used.discard(("apiextensions.k8s.io", "customresourcedefinitions", "create"))
    assert {("", "events", "create"), ("monitoring.coreos.com", "podmonitors", "delete"),
            ("gateway.networking.k8s.io", "httproutes", "create"),
            ("serving.glm.dev", "glmdeployments/status", "patch")} <= used, "the scenario did not run"
    helm = helm_binary()
    for values, namespaced in (([], False), (["--set", "watch.namespaces={default}"], True)):
        granted, _ = rbac.granted_permissions(template(helm, *values))
        assert not used - granted, f"the operator called {sorted(used - granted)}, which the chart does not grant"
        # and the code-derived set (the chart's exact contents) covers what was really sent
        assert not used - rbac.required_permissions(namespaced=namespaced)
