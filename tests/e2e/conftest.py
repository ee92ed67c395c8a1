"""End-to-end fixtures on a real local Kubernetes cluster (``glm_localcluster``), started once per test session.

- ``stack`` (session): etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok with fake H200 nodes,
  the CRDs and our chart installed with Helm. Built from pinned Go modules on first use (see tools/cluster/README.md).
- ``cluster`` (per test): a fresh namespace and the real kopf operator (every handler of
  :mod:`glm_operator.handlers`) running in the test's event loop with a kubeconfig holding only the chart
  ServiceAccount's token, watching that namespace. The test fails if the operator logged an unexpected error or
  if the API server answered any of its requests with 403 (the chart's RBAC must cover every call).
Tests act as the cluster admin (``admin`` in ``system:masters``), like a user with kubectl.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kopf
import pytest
from kubernetes import client

from glm_localcluster.stack import Stack, bring_up
from glm_localcluster.weights import weights_volume
from glm_operator import handlers  # noqa: F401  (importing registers the kopf handlers)
from glm_operator.api.spec import API_GROUP, API_VERSION, PLURAL
from glm_operator.cluster.kinds import CHILD_KINDS
from glm_operator.cluster.reconcile import child_selector, read_deployment

T = TypeVar("T")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
_namespaces = itertools.count()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The local cluster for the whole session (stopped at the end, every process with it)."""
    started = bring_up(tmp_path_factory.mktemp("cluster"), progress=lambda line: logging.getLogger("e2e").info(line))
    try:
        yield started
    finally:
        started.stop()


@dataclass
class Cluster:
    """Handles for one test: the stack, an admin API client, the test's namespace and waiting helpers."""

    stack: Stack
    api: client.ApiClient
    namespace: str
    audit_mark: int

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    def with_namespace(self, cr: dict[str, Any]) -> dict[str, Any]:
        cr["metadata"]["namespace"] = self.namespace
        return cr

    async def create(self, cr: dict[str, Any]) -> dict[str, Any]:
        cr = self.with_namespace(cr)
        await self.call(client.CustomObjectsApi(self.api).create_namespaced_custom_object,
                        API_GROUP, API_VERSION, self.namespace, PLURAL, cr)
        return await self.cr(cr["metadata"]["name"])

    async def patch_spec(self, name: str, spec_patch: dict[str, Any]) -> None:
        await self.call(client.CustomObjectsApi(self.api).patch_namespaced_custom_object,
                        API_GROUP, API_VERSION, self.namespace, PLURAL, name, {"spec": spec_patch},
                        _content_type="application/merge-patch+json")

    async def cr(self, name: str) -> dict[str, Any]:
        found = await self.call(read_deployment, self.api, self.namespace, name)
        assert found is not None, f"GLMDeployment {self.namespace}/{name} not found"
        return found

    async def children(self, name: str) -> dict[tuple[str, str], dict[str, Any]]:
        def _all() -> dict[tuple[str, str], dict[str, Any]]:
            out = {}
            for kind in CHILD_KINDS:
                try:
                    items = kind.list(self.api, self.namespace, child_selector(name))
                except client.ApiException as exc:
                    if exc.status == 404:  # a CRD the local cluster does not install (HTTPRoute, PodMonitor)
                        continue
                    raise
                for obj in items:
                    out[(obj["kind"], obj["metadata"]["name"])] = obj
            return out

        return await self.call(_all)

    async def wait_for(self, predicate: Callable[[], Awaitable[bool]], what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await predicate():
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    async def condition(self, name: str, type_: str) -> dict[str, Any]:
        status = (await self.cr(name)).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c.get("type") == type_), {})

    async def wait_condition(self, name: str, type_: str, status: str, reason: str | None = None,
                             timeout: float = 60.0) -> dict[str, Any]:
        async def done() -> bool:
            cond = await self.condition(name, type_)
            return cond.get("status") == status and (reason is None or cond.get("reason") == reason)

        await self.wait_for(done, f"{type_}={status}" + (f" ({reason})" if reason else ""), timeout)
        return await self.cr(name)

    async def wait_reconciled(self, name: str, generation: int, timeout: float = 60.0) -> dict[str, Any]:
        async def done() -> bool:
            status = (await self.cr(name)).get("status") or {}
            return status.get("observedGeneration") == generation

        await self.wait_for(done, f"observedGeneration {generation}", timeout)
        return await self.cr(name)

    # -- the operator's requests, from the API server's audit log ------------------------------------------------
    def requests(self, since: int | None = None) -> list[dict[str, Any]]:
        """Audit events of the operator's requests since byte offset ``since`` (default: this test's start)."""
        return self.stack.plane.audit_events(self.stack.operator_user, self.audit_mark if since is None else since)

    def writes(self, since: int | None = None) -> list[dict[str, Any]]:
        """The operator's write requests (create/update/patch/delete), excluding Events."""
        return [e for e in self.requests(since) if e.get("verb") in WRITE_VERBS
                and (e.get("objectRef") or {}).get("resource") != "events"]

    def mark(self) -> int:
        """An audit-log offset: pass it to :meth:`requests`/:meth:`writes` to see only later requests."""
        return self.stack.plane.audit_offset()

    async def settle(self, seconds: float = 1.5, timeout: float = 60.0) -> None:
        """Wait until the operator made no write for ``seconds``; fails after ``timeout`` instead of hanging."""
        deadline = time.monotonic() + timeout
        last, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < seconds:
            if time.monotonic() > deadline:
                recent = [(e["verb"], e["requestURI"]) for e in self.writes()[-5:]]
                raise AssertionError(f"the operator kept writing for {timeout} s: {recent}")
            count = len(self.writes())
            if count != last:
                last, quiet_since = count, time.monotonic()
            await asyncio.sleep(0.1)


#: kopf's/our log lines that tests provoke on purpose (fault injection).
EXPECTED_ERRORS = ("failed temporarily",)


def make_namespace(stack: Stack, cr_claims: tuple[str, ...] = ("glm-weights",)) -> str:
    """A new namespace with the weights claim examples mount, pre-bound (pods need it to be scheduled)."""
    name = f"e2e-{os.getpid() % 10000}-{next(_namespaces)}"
    stack.kubectl_apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}])
    for claim in cr_claims:
        stack.kubectl_apply(weights_volume(name, claim))
    return name


@contextlib.asynccontextmanager
async def operator_in_process(stack: Stack, namespace: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """The real operator in this event loop, as the chart's ServiceAccount, watching ``namespace``."""
    monkeypatch.setenv("KUBECONFIG", str(stack.operator_kubeconfig))
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(kopf.operator(
        standalone=True, clusterwide=False, namespaces=[namespace], stop_flag=stop, ready_flag=ready,
    ))
    try:
        await asyncio.wait_for(ready.wait(), timeout=30)
        yield
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(task, timeout=15)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def forbidden_requests(stack: Stack, user: str, since: int) -> list[tuple[str, str]]:
    """``(verb, requestURI)`` of every request of ``user`` since audit offset ``since`` that the API server refused
    with 403 (what the ``cluster`` fixture fails a test on, for the operator's ServiceAccount)."""
    return [(e["verb"], e["requestURI"]) for e in stack.plane.audit_events(user, since)
            if (e.get("responseStatus") or {}).get("code") == 403]


@pytest.fixture
async def cluster(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Cluster]:
    """A namespace of the session's cluster and the operator watching it (see the module docstring)."""
    namespace = await asyncio.to_thread(make_namespace, stack)
    mark = stack.plane.audit_offset()
    admin = stack.plane.api_client()
    async with operator_in_process(stack, namespace, monkeypatch):
        yield Cluster(stack=stack, api=admin, namespace=namespace, audit_mark=mark)
    forbidden = forbidden_requests(stack, stack.operator_user, mark)
    assert not forbidden, f"the chart's RBAC refused the operator: {forbidden}"
    errors = [
        r.getMessage() for r in caplog.records
        if r.levelno >= logging.ERROR and not any(text in r.getMessage() for text in EXPECTED_ERRORS)
    ]
    assert not errors, f"the operator logged errors: {errors}"
    stack.run("kubectl", ["delete", "namespace", namespace, "--wait=false"], check=False)


def example_path(name: str) -> Path:
    """A file of ``examples/``."""
    return Path(__file__).resolve().parents[2] / "examples" / name
