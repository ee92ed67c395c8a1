"""PodMonitors rendered for ``spec.monitoring.podMonitors``: each selects exactly the pods of its
workload and scrapes a port that pod really has, the vLLM port (not the decode P/D sidecar)."""

from __future__ import annotations

from typing import Any

import pytest

from glm_operator.api.findings import SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr, seed


def _with_monitoring(cr: dict[str, Any], **fields: Any) -> dict[str, Any]:
    cr["spec"]["monitoring"] = {"podMonitors": True, **fields}
    return cr


def _by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _scraped(monitor: dict[str, Any], workloads: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(workload name, container port) pairs the monitor scrapes among the workloads' pod templates."""
    selector = monitor["spec"]["selector"]["matchLabels"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    hits = []
    for workload in workloads:
        template = workload["spec"]["template"]
        if not selector.items() <= template["metadata"]["labels"].items():
            continue
        containers = template["spec"]["containers"] + template["spec"].get("initContainers", [])
        hits += [(workload["metadata"]["name"], port) for c in containers for port in c.get("ports", [])
                 if port["name"] == endpoint["port"]]
    return hits


def test_off_by_default_renders_no_pod_monitor_and_keeps_epp_metrics_auth() -> None:
    objects = render(parse(seed())).objects
    assert not _by_kind(objects, "PodMonitor")
    epp = _by_kind(objects, "Deployment")["glm-5-3-epp"]
    assert not any("metrics-endpoint-auth" in a for a in epp["spec"]["template"]["spec"]["containers"][0]["args"])


def test_disaggregated_pod_monitors_scrape_vllm_and_the_epp() -> None:
    objects = render(parse(_with_monitoring(seed(), scrapeIntervalSeconds=15))).objects
    monitors = _by_kind(objects, "PodMonitor")
    assert list(monitors) == ["glm-5-3-prefill", "glm-5-3-decode", "glm-5-3-epp"]
    workloads = [o for o in objects if o["kind"] in {"StatefulSet", "Deployment"}]
    expected = {"glm-5-3-prefill": 8000, "glm-5-3-decode": 8200, "glm-5-3-epp": 9090}
    for name, monitor in monitors.items():
        ((workload, port),) = _scraped(monitor, workloads)  # exactly one workload, one port
        assert workload == name and port["containerPort"] == expected[name]
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        assert endpoint["path"] == "/metrics" and endpoint["interval"] == "15s"
        assert monitor["spec"]["podTargetLabels"] == ["serving.glm.dev/deployment", "serving.glm.dev/role"]
        assert monitor["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "glm-operator"
    epp = _by_kind(objects, "Deployment")["glm-5-3-epp"]
    assert "--metrics-endpoint-auth=false" in epp["spec"]["template"]["spec"]["containers"][0]["args"]


def test_aggregated_engine_gets_one_engine_monitor() -> None:
    cr = _with_monitoring(load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml"))
    objects = render(parse(cr)).objects
    monitors = _by_kind(objects, "PodMonitor")
    name = cr["metadata"]["name"]
    assert list(monitors) == [f"{name}-engine", f"{name}-epp"]
    workloads = [o for o in objects if o["kind"] in {"StatefulSet", "Deployment"}]
    ((workload, port),) = _scraped(monitors[f"{name}-engine"], workloads)
    assert workload == f"{name}-engine" and port["name"] == "http"


@pytest.mark.parametrize("interval", [4, 601])
def test_scrape_interval_bounds(interval: int) -> None:
    from glm_operator.api.findings import SpecInvalidError  # noqa: PLC0415

    with pytest.raises(SpecInvalidError, match="scrapeIntervalSeconds"):
        parse(_with_monitoring(seed(), scrapeIntervalSeconds=interval))


def test_extra_labels_let_kube_prometheus_stack_select_the_monitors() -> None:
    cr = _with_monitoring(seed(), labels={"release": "kube-prometheus-stack", "app.kubernetes.io/managed-by": "x"})
    monitors = _by_kind(render(parse(cr)).objects, "PodMonitor")
    assert monitors and all(m["metadata"]["labels"]["release"] == "kube-prometheus-stack" for m in monitors.values())
    # the operator's own labels win: they select the children it prunes
    assert all(m["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "glm-operator" for m in monitors.values())
    bad = _with_monitoring(seed(), labels={"bad key!": "x"})
    with pytest.raises(SpecInvalidError, match=r"monitoring\.labels"):
        render(parse(bad))
