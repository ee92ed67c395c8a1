"""The running operator serves its metrics on GLM_METRICS_PORT: reconciles, errors, managed
deployments and the capacity gauge of each GLMDeployment, which disappears with the CR."""

from __future__ import annotations

import asyncio
import socket
import urllib.request

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from glm_operator.api.spec import API_GROUP, API_VERSION, PLURAL
from tests.conftest import seed
from tests.e2e.conftest import Cluster

NAME = "glm-5-3"


@pytest.fixture
def metrics_port(monkeypatch: pytest.MonkeyPatch) -> int:
    """A free port for the operator's metrics server (set before the `cluster` fixture starts it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    monkeypatch.setenv("GLM_METRICS_PORT", str(port))
    monkeypatch.setenv("GLM_METRICS_ADDRESS", "127.0.0.1")
    return port


async def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    def fetch() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    text = await asyncio.to_thread(fetch)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text) for sample in family.samples
    }


async def test_operator_serves_reconcile_and_capacity_metrics(metrics_port: int, cluster: Cluster) -> None:
    capacity_key = ("glm_operator_capacity_max_context_tokens", (("name", NAME), ("namespace", cluster.namespace)))
    await cluster.create(seed())
    await cluster.wait_reconciled(NAME, 1)
    samples = await _scrape(metrics_port)
    assert samples[capacity_key] == 1048576
    assert samples[("glm_operator_managed_deployments", ())] == 1
    assert samples[("glm_operator_reconcile_duration_seconds_count", (("result", "changed"),))] >= 1

    invalid_before = samples[("glm_operator_reconcile_errors_total", (("reason", "InvalidSpec"),))]
    # refused by the operator, not by the CRD: --kv-offloading-size would replace the NIXL connector
    await cluster.patch_spec(NAME, {"prefill": {"extraArgs": ["--kv-offloading-size", "512"]}})
    await cluster.wait_reconciled(NAME, 2)
    samples = await _scrape(metrics_port)
    assert samples[("glm_operator_reconcile_errors_total", (("reason", "InvalidSpec"),))] > invalid_before
    assert samples[capacity_key] == 1048576  # the last good generation still runs with that capacity

    await cluster.call(client.CustomObjectsApi(cluster.api).delete_namespaced_custom_object,
                       API_GROUP, API_VERSION, cluster.namespace, PLURAL, NAME)

    async def forgotten() -> bool:
        now = await _scrape(metrics_port)
        return capacity_key not in now and now[("glm_operator_managed_deployments", ())] == 0

    await cluster.wait_for(forgotten, "the deleted CR's series to go")
