"""Reconcile benchmark on the local API emulator (``make bench``).

Measures, for the seed CR (examples/glm-5.3-pd.yaml):
1. the API requests of one reconcile of a new CR (calling the reconcile core directly), by method;
2. the requests one *unchanged* resync makes (must include zero writes);
3. with the real kopf operator running in-process: the time from the CR's create response to the
   last child applied, median over several CRs, and every request the operator made for one CR
   until it was idle (kopf bookkeeping, Events and child-watch re-reconciles included).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import kopf
import yaml
from glm_operator.devcluster.emulator import EmulatorServer, write_kubeconfig
from kubernetes import client

from glm_operator import handlers  # noqa: F401  (importing registers the kopf handlers)
from glm_operator.api.crd import build_crd
from glm_operator.api.spec import API_GROUP, API_VERSION, PLURAL
from glm_operator.cluster.apiclient import make_api_client
from glm_operator.cluster.reconcile import read_deployment, reconcile

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_RUNS", "7"))


def _seed(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "glm-5.3-pd.yaml").read_text())
    doc["metadata"]["name"] = name
    return doc


def _summary(records: list[Any]) -> str:
    counts = Counter(r.method for r in records)
    return f"{len(records)} ({', '.join(f'{m} {n}' for m, n in sorted(counts.items()))})"


def _child_applies(records: list[Any], name: str) -> int:
    return sum(1 for r in records if r.method == "PATCH" and r.content_type == "application/apply-patch+yaml"
               and f"/{name}" in r.path)


async def _quiet(server: EmulatorServer, seconds: float = 0.5, timeout: float = 30.0) -> None:
    """Wait until no request arrived for ``seconds`` (at most ``timeout``)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() - since < seconds and time.monotonic() < deadline:
        if len(server.emulator.request_log) != last:
            last, since = len(server.emulator.request_log), time.monotonic()
        await asyncio.sleep(0.02)


async def main() -> int:
    """Run the benchmark and print its table; returns the exit code."""
    os.environ.setdefault("GLM_KOPF_SCANNING", "off")
    with EmulatorServer() as server:
        kubeconfig = Path(tempfile.mkdtemp(prefix="glm-bench-")) / "kubeconfig"
        write_kubeconfig(kubeconfig, server.url)
        os.environ["KUBECONFIG"] = str(kubeconfig)
        api = make_api_client()
        crd: Any = build_crd()
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        custom = client.CustomObjectsApi(api)

        # 1 + 2: the reconcile core alone
        custom.create_namespaced_custom_object(API_GROUP, API_VERSION, "default", PLURAL, _seed("core"))
        body = read_deployment(api, "default", "core")
        assert body is not None
        mark = len(server.emulator.request_log)
        started = time.perf_counter()
        outcome = reconcile(api, body)
        core_ms = (time.perf_counter() - started) * 1000
        first = server.emulator.request_log[mark:]
        body = read_deployment(api, "default", "core")
        assert body is not None
        mark = len(server.emulator.request_log)
        reconcile(api, body)
        resync = server.emulator.request_log[mark:]
        print(f"reconcile core, new seed CR: {_summary(first)} requests, {len(outcome.applied)} children, "
              f"{core_ms:.0f} ms")
        print(f"reconcile core, unchanged resync: {_summary(resync)} requests, "
              f"{len(server.emulator.write_requests(mark))} writes")

        # 3: the operator
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(kopf.operator(standalone=True, clusterwide=True, stop_flag=stop, ready_flag=ready))
        await asyncio.wait_for(ready.wait(), 15)
        await _quiet(server)
        latencies, totals = [], []
        for i in range(RUNS):
            name = f"bench-{i}"
            mark = len(server.emulator.request_log)
            await asyncio.to_thread(custom.create_namespaced_custom_object, API_GROUP, API_VERSION, "default",
                                    PLURAL, _seed(name))
            created = time.perf_counter()
            while _child_applies(server.emulator.request_log[mark:], name) < 11:
                await asyncio.sleep(0.002)
            latencies.append((time.perf_counter() - created) * 1000)
            await _quiet(server)
            totals.append(server.emulator.request_log[mark:])
        print(f"operator, create → all 11 children applied: median {statistics.median(latencies):.0f} ms "
              f"(min {min(latencies):.0f}, max {max(latencies):.0f}, n={RUNS})")
        print(f"operator, all requests for one new CR until idle: {_summary(totals[-1])}")
        if os.environ.get("BENCH_TRACE"):
            t0 = totals[-1][0].received
            for r in totals[-1]:
                offset = (r.received - t0) * 1000
                print(f"  {offset:7.1f} ms {r.method:6} {r.path}?{r.query[:40]} {r.content_type or ''}")
        stop.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
