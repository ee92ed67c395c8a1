"""An emulated cluster with the CRD registered and the real operator running in-process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kopf
import pytest
from kubernetes import client

from glm_operator import handlers  # noqa: F401  (importing registers the kopf handlers)
from glm_operator.api.crd import build_crd
from glm_operator.api.spec import API_GROUP, API_VERSION, PLURAL
from glm_operator.cluster.apiclient import make_api_client
from glm_operator.cluster.kinds import CHILD_KINDS
from glm_operator.cluster.reconcile import child_selector, read_deployment
from glm_operator.devcluster.emulator import Emulator, EmulatorServer, write_kubeconfig

T = TypeVar("T")


@dataclass
class Cluster:
    """Handles for a test: the emulator, an API client and helpers that wait for conditions."""

    server: EmulatorServer
    api: client.ApiClient
    kubeconfig: Path

    @property
    def emulator(self) -> Emulator:
        return self.server.emulator

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def create(self, cr: dict[str, Any]) -> dict[str, Any]:
        ns = cr["metadata"].get("namespace", "default")
        await self.call(client.CustomObjectsApi(self.api).create_namespaced_custom_object,
                        API_GROUP, API_VERSION, ns, PLURAL, cr)
        return await self.cr(cr["metadata"]["name"], ns)

    async def patch_spec(self, name: str, spec_patch: dict[str, Any], ns: str = "default") -> None:
        await self.call(client.CustomObjectsApi(self.api).patch_namespaced_custom_object,
                        API_GROUP, API_VERSION, ns, PLURAL, name, {"spec": spec_patch},
                        _content_type="application/merge-patch+json")

    async def cr(self, name: str, ns: str = "default") -> dict[str, Any]:
        found = await self.call(read_deployment, self.api, ns, name)
        assert found is not None, f"GLMDeployment {ns}/{name} not found"
        return found

    async def children(self, name: str, ns: str = "default") -> dict[tuple[str, str], dict[str, Any]]:
        def _all() -> dict[tuple[str, str], dict[str, Any]]:
            out = {}
            for kind in CHILD_KINDS:
                for obj in kind.list(self.api, ns, child_selector(name)):
                    out[(obj["kind"], obj["metadata"]["name"])] = obj
            return out

        return await self.call(_all)

    async def wait_for(self, predicate: Callable[[], Awaitable[bool]], what: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await predicate():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    async def wait_reconciled(self, name: str, generation: int, ns: str = "default") -> dict[str, Any]:
        async def done() -> bool:
            status = (await self.cr(name, ns)).get("status") or {}
            return status.get("observedGeneration") == generation

        await self.wait_for(done, f"observedGeneration {generation}")
        return await self.cr(name, ns)

    async def settle(self, seconds: float = 0.5, timeout: float = 15.0) -> None:
        """Wait until the emulator saw no write for ``seconds`` (the operator is idle; the 1 s resync
        keeps reading, which is fine). Fails after ``timeout`` instead of hanging on a write loop."""
        deadline = time.monotonic() + timeout
        last = -1
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < seconds:
            if time.monotonic() > deadline:
                recent = self.emulator.write_requests()[-5:]
                raise AssertionError(f"the operator kept writing for {timeout} s: {recent}")
            count = len(self.emulator.write_requests())
            if count != last:
                last, quiet_since = count, time.monotonic()
            await asyncio.sleep(0.05)


#: kopf's log line when a handler raised kopf.TemporaryError (the retry test provokes it on purpose).
EXPECTED_ERRORS = ("failed temporarily",)


@pytest.fixture
async def cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Cluster]:
    """Emulator + CRD + the operator in-process; fails the test if the operator logged an unexpected error."""
    with EmulatorServer() as server:
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, server.url)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        api = make_api_client()
        await asyncio.to_thread(client.ApiextensionsV1Api(api).create_custom_resource_definition, build_crd())
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(kopf.operator(standalone=True, clusterwide=True, stop_flag=stop, ready_flag=ready))
        try:
            await asyncio.wait_for(ready.wait(), timeout=15)
            yield Cluster(server=server, api=api, kubeconfig=kubeconfig)
        finally:
            stop.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, timeout=10)
    errors = [
        r.getMessage() for r in caplog.records
        if r.levelno >= logging.ERROR and not any(text in r.getMessage() for text in EXPECTED_ERRORS)
    ]
    assert not errors, f"the operator logged errors: {errors}"
