"""Faults on the real local cluster: the API server stopped and restarted, the operator killed mid-reconcile, a fifth
of the writes failing, liveness while the API server is down, and requests the RBAC refuses.

Each test runs the operator as users do (``glmctl run -n <namespace>`` as a subprocess holding a ServiceAccount
token, :func:`glm_localcluster.operator_process.start_operator`) so that it can be killed, stopped or pointed at a
proxy, and checks its log for tracebacks. Waits are bounded; nothing asserts how long something took.

Every process is forked by the supervisor's one long-lived spawner thread (``PR_SET_PDEATHSIG`` fires when the
*thread* that started a child exits), so a test may start or stop them from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from glm_localcluster.kubeconfig import write_token_kubeconfig
from glm_localcluster.operator_process import OperatorProcess, start_operator
from glm_localcluster.stack import Stack, operator_token
from glm_operator.api.load import parse
from glm_operator.api.spec import API_GROUP
from glm_operator.cluster.kinds import CHILD_KINDS
from glm_operator.render.manifests import render
from tests.conftest import seed
from tests.e2e.conftest import WRITE_VERBS, Cluster, forbidden_requests, make_namespace
from tests.e2e.faultproxy import FaultProxy

pytestmark = pytest.mark.slow
log = logging.getLogger("e2e.faults")
NAME = "glm-5-3"


@pytest.fixture
def namespace(stack: Stack) -> Iterator[str]:
    """A fresh namespace (with the weights claim), deleted afterwards."""
    name = make_namespace(stack)
    yield name
    stack.run("kubectl", ["delete", "namespace", name, "--wait=false"], check=False)


@pytest.fixture
def admin(stack: Stack, namespace: str) -> Cluster:
    """The ``Cluster`` helpers (as admin) for ``namespace``, without the in-process operator."""
    mark = stack.plane.audit_offset()
    return Cluster(stack=stack, api=stack.plane.api_client(), namespace=namespace, audit_mark=mark)


#: kopf does not retry a 409 on its own PATCH of the CR (its progress annotations): it logs "Throttling for 1 seconds
#: due to an unexpected error" with the traceback and processes the CR again a second later.
KOPF_THROTTLED_409 = "kopf._cogs.clients.errors.APIConflictError: ('injected by the fault proxy (409)'"


_CHAINED = ("The above exception was the direct cause of the following exception:",
            "During handling of the above exception, another exception occurred:")


def unexpected_tracebacks(log_text: str, allowed: tuple[str, ...] = ()) -> list[str]:
    """Tracebacks in an operator log, except those of a failing liveness probe (kopf answers ``/healthz`` with 500
    by letting the probe's exception, ``api-reachable``, escape its aiohttp handler, which logs it) and those whose
    chained chunks contain one of ``allowed``."""
    blocks: list[str] = []
    for chunk in log_text.split("Traceback (most recent call last):")[1:]:
        if blocks and blocks[-1].rstrip().endswith(_CHAINED):
            blocks[-1] += chunk  # a chained exception: one traceback
        else:
            blocks.append(chunk)
    found = []
    for block in blocks:
        if "in api_reachable" in block or "in get_health" in block or any(text in block for text in allowed):
            continue
        found.append(block[-3000:])
    return found


@contextlib.asynccontextmanager
async def operator(stack: Stack, name: str, namespace: str, env: dict[str, str] | None = None,
                   allowed_tracebacks: tuple[str, ...] = ()) -> AsyncIterator[OperatorProcess]:
    """``glmctl run -n namespace`` as a subprocess (started from this thread, blocking the loop while it starts);
    stopped with SIGTERM afterwards unless the test killed it. Its log must hold no traceback (but
    that of a failing liveness probe)."""
    proc = start_operator(stack, name, env, ("-n", namespace))
    try:
        yield proc
    finally:
        if proc.managed in stack.plane.supervisor.started:
            await asyncio.to_thread(stack.plane.supervisor.stop, name)
    found = unexpected_tracebacks(proc.managed.log.read_text(errors="replace"), allowed_tracebacks)
    assert not found, f"{name} logged a traceback ({proc.managed.log}):\n{found[0]}"


def kill(stack: Stack, proc: OperatorProcess) -> None:
    """SIGKILL the operator's process group (no cleanup handler runs) and forget it."""
    os.killpg(proc.managed.popen.pid, signal.SIGKILL)
    proc.managed.popen.wait()
    stack.plane.supervisor.started.remove(proc.managed)


def expected_children(namespace: str, cr: dict[str, Any]) -> set[tuple[str, str]]:
    cr = {**cr, "metadata": {**cr["metadata"], "namespace": namespace}}
    return {(o["kind"], o["metadata"]["name"]) for o in render(parse(cr)).objects}


def conditions(cr: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (cr.get("status") or {}).get("conditions") or []}


async def has_all(admin: Cluster, name: str, wanted: set[tuple[str, str]]) -> bool:
    return wanted <= set(await admin.children(name))


async def create_seed(admin: Cluster) -> set[tuple[str, str]]:
    cr = seed()
    wanted = expected_children(admin.namespace, cr)
    await admin.create(cr)
    await admin.wait_reconciled(NAME, 1)
    await admin.wait_for(lambda: has_all(admin, NAME, wanted), "all children")
    return wanted


# -- 2. the API server stopped for 20 s ----------------------------------------------------------------------------
async def test_operator_recovers_from_a_20_s_api_server_outage_without_a_restart(
    stack: Stack, namespace: str, admin: Cluster
) -> None:
    async with operator(stack, "op-outage", namespace) as op:
        await create_seed(admin)
        old = (await admin.children(NAME))[("StatefulSet", "glm-5-3-decode")]
        await asyncio.to_thread(stack.plane.stop_apiserver)
        try:
            for _ in range(20):
                await asyncio.sleep(1)
                op.managed.check()  # raises ProcessExited if the operator died during the outage
        finally:
            stack.plane.start_apiserver()
        # the same process: a child deleted by hand is restored, a spec change is reconciled
        apps = client.AppsV1Api(admin.api)
        await admin.call(apps.delete_namespaced_stateful_set, "glm-5-3-decode", namespace)

        async def recreated() -> bool:
            sts = (await admin.children(NAME)).get(("StatefulSet", "glm-5-3-decode"))
            return sts is not None and sts["metadata"]["uid"] != old["metadata"]["uid"]

        await admin.wait_for(recreated, "the deleted decode StatefulSet restored after the outage", timeout=90)
        await admin.patch_spec(NAME, {"router": {"endpointPicker": {"scorers": {"queue": 3}}}})
        cr = await admin.wait_reconciled(NAME, 2, timeout=60)
        assert conditions(cr)["Degraded"]["status"] == "False"
        assert conditions(cr)["Planned"]["status"] == "True"
        op.managed.check()
    # the shared cluster is healthy for the tests after this one
    assert stack.run("kubectl", ["get", "--raw", "/readyz"]).stdout.strip() == "ok"


# -- 3. the operator killed mid-reconcile ---------------------------------------------------------------------------
async def test_operator_killed_mid_reconcile_converges_after_a_restart_without_duplicates(
    stack: Stack, namespace: str, admin: Cluster
) -> None:
    wanted = expected_children(namespace, seed())
    first = start_operator(stack, "op-killed", None, ("-n", namespace))
    mark = admin.mark()
    await admin.create(seed())

    def child_writes() -> list[dict[str, Any]]:
        return [e for e in stack.plane.audit_events(stack.operator_user, mark) if e.get("verb") in WRITE_VERBS
                and (e.get("objectRef") or {}).get("resource") not in {"events", "glmdeployments"}]

    deadline = time.monotonic() + 60
    while not child_writes():
        assert time.monotonic() < deadline, "the operator wrote no child within 60 s"
        first.managed.check()
        await asyncio.sleep(0.02)
    os.killpg(first.managed.popen.pid, signal.SIGSTOP)  # freeze it where it is, look, then kill it
    at_kill = set(await admin.children(NAME))
    status_at_kill = (await admin.cr(NAME)).get("status") or {}
    kill(stack, first)
    log.info("killed after %d child writes; %d of %d children existed; observedGeneration %s",
             len(child_writes()), len(at_kill), len(wanted), status_at_kill.get("observedGeneration"))
    print(f"\nkilled mid-reconcile: {len(at_kill)} of {len(wanted)} children existed, "
          f"status.observedGeneration={status_at_kill.get('observedGeneration')}")
    assert at_kill < wanted and "observedGeneration" not in status_at_kill, "the kill came after the reconcile"

    async with operator(stack, "op-restarted", namespace):
        await admin.wait_condition(NAME, "Ready", "True", timeout=120)
        await admin.settle()
        assert set(await admin.children(NAME)) == wanted
        core, apps = client.CoreV1Api(admin.api), client.AppsV1Api(admin.api)
        for role in ("prefill", "decode"):
            pods = await admin.call(core.list_namespaced_pod, namespace,
                                    label_selector=f"serving.glm.dev/deployment={NAME},serving.glm.dev/role={role}")
            assert len(pods.items) == 1, [p.metadata.name for p in pods.items]
        replica_sets = (await admin.call(apps.list_namespaced_replica_set, namespace)).items
        owned = [rs.metadata.name for rs in replica_sets
                 if any(ref.name == f"{NAME}-epp" for ref in rs.metadata.owner_references or [])]
        assert len(owned) == 1, owned
        every_object = {(kind.kind, o["metadata"]["name"]) for kind in CHILD_KINDS
                        for o in await admin.call(_list_all, admin.api, kind, namespace)}
        assert every_object == wanted, "an object the operator does not want survived (a duplicate?)"


def _list_all(api: client.ApiClient, kind: Any, namespace: str) -> list[dict[str, Any]]:
    """Every object of a child kind in ``namespace`` whatever its labels (ignoring the namespace's own defaults)."""
    try:
        items: list[dict[str, Any]] = kind.list(api, namespace, "")
    except client.ApiException as exc:
        if exc.status == 404:  # a kind whose CRD the local cluster does not install
            return []
        raise
    defaults = {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")}
    return [o for o in items if (o["kind"], o["metadata"]["name"]) not in defaults]


# -- 4. a fifth of the writes failing while 50 CRs are created -----------------------------------------------------
CRS = 50


def _small_crs(count: int) -> list[dict[str, Any]]:
    crs = []
    for i in range(count):
        cr = seed()
        cr["metadata"]["name"] = f"glm-{i:02d}"
        crs.append(cr)
    return crs


def _proxy_kubeconfig(stack: Stack, url: str, path: Path) -> Path:
    token = yaml.safe_load(stack.operator_kubeconfig.read_text())["users"][0]["user"]["token"]
    return write_token_kubeconfig(path, url, stack.plane.pki.ca.cert, token=token, name="glm-operator")


async def test_50_crs_converge_once_injected_write_errors_stop(
    stack: Stack, namespace: str, admin: Cluster, tmp_path: Path
) -> None:
    """50 copies of the seed CR while 20 % of the operator's writes fail with 409/429/500 (a proxy answers them).

    Two fake 8-GPU nodes hold one seed CR's engines, not 50: a ResourceQuota of 0 pods keeps the controllers from
    creating 150 pods that could never be scheduled (and the shared CPUs free). So Ready stays False
    (ReplicasNotReady) and convergence means: every child applied, Planned=True, Degraded=False,
    observedGeneration == generation.
    """
    stack.kubectl_apply([{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods", "namespace":
                          namespace}, "spec": {"hard": {"pods": "0"}}}])
    proxy = FaultProxy(stack.plane.server, stack.plane.pki.ca.cert, fraction=0.2, seed=7)
    url = proxy.start_in_thread()  # its own loop: starting the operator below blocks this one
    try:
        kubeconfig = _proxy_kubeconfig(stack, url, tmp_path / "proxy.kubeconfig")
        crs = _small_crs(CRS)
        names = [cr["metadata"]["name"] for cr in crs]
        wanted = {name: expected_children(namespace, cr) for name, cr in zip(names, crs, strict=True)}
        async with operator(stack, "op-faults", namespace, env={"KUBECONFIG": str(kubeconfig)},
                            allowed_tracebacks=(KOPF_THROTTLED_409,)) as op:
            await asyncio.to_thread(stack.kubectl_apply, [admin.with_namespace(cr) for cr in crs])
            # faults on until the operator has tried every CR at least once (each has a status) and failed often
            await admin.wait_for(lambda: _all_have_status(admin, names), "a status on every CR", timeout=120)
            await admin.wait_for(_at_least(proxy, 2 * CRS), f"{2 * CRS} injected errors", timeout=60)
            proxy.fraction = 0.0
            injected, stopped = dict(proxy.injected), time.monotonic()
            await admin.wait_for(lambda: _converged(admin, wanted), "every CR converged", timeout=120)
            seconds = time.monotonic() - stopped
            total = sum(injected.values())
            print(f"\ninjected {total} errors {injected} into {proxy.writes_forwarded + total} writes; "
                  f"{CRS} CRs converged {seconds:.1f} s after the errors stopped; kopf throttled "
                  f"{op.managed.log.read_text(errors='replace').count('Throttling for')} times on a 409")
            await admin.settle()
            final = await _crs(admin)
            for name in names:
                cond = conditions(final[name])
                assert cond["Ready"]["status"] == "False" and cond["Ready"]["reason"] == "ReplicasNotReady", cond
                annotations = final[name]["metadata"].get("annotations") or {}
                kopf_failures = {k: v for k, v in annotations.items()
                                 if k.startswith(f"{API_GROUP}/") and '"failure":true' in v.replace(" ", "")}
                assert not kopf_failures, (name, kopf_failures)
        assert set(injected) == {409, 429, 500}
    finally:
        proxy.stop_thread()


def _at_least(proxy: FaultProxy, count: int) -> Any:
    async def enough() -> bool:
        return sum(proxy.injected.values()) >= count
    return enough


async def _crs(admin: Cluster) -> dict[str, dict[str, Any]]:
    listed = await admin.call(client.CustomObjectsApi(admin.api).list_namespaced_custom_object,
                              "serving.glm.dev", "v1alpha1", admin.namespace, "glmdeployments")
    return {item["metadata"]["name"]: item for item in listed["items"]}


async def _all_have_status(admin: Cluster, names: list[str]) -> bool:
    crs = await _crs(admin)
    return all((crs.get(name) or {}).get("status") for name in names)


async def _converged(admin: Cluster, wanted: dict[str, set[tuple[str, str]]]) -> bool:
    crs = await _crs(admin)
    for name in wanted:
        cr = crs.get(name)
        if cr is None or (cr.get("status") or {}).get("observedGeneration") != cr["metadata"]["generation"]:
            return False
        cond = conditions(cr)
        if cond.get("Degraded", {}).get("status") != "False" or cond.get("Planned", {}).get("status") != "True":
            return False
    children: dict[str, set[tuple[str, str]]] = {}
    for kind in CHILD_KINDS:
        for obj in await admin.call(_list_all, admin.api, kind, admin.namespace):
            owner = (obj["metadata"].get("labels") or {}).get("serving.glm.dev/deployment", "")
            children.setdefault(owner, set()).add((obj["kind"], obj["metadata"]["name"]))
    return all(children.get(name, set()) == want for name, want in wanted.items())


# -- 5. liveness while the API server is down ------------------------------------------------------------------------
async def test_liveness_fails_while_the_api_server_is_down_and_recovers(stack: Stack, namespace: str) -> None:
    bound = 5
    async with operator(stack, "op-liveness", namespace, env={"GLM_LIVENESS_BOUND_SECONDS": str(bound)}) as op:
        # an idle operator with a reachable API server stays alive past the bound and kopf's 10 s probe cache
        await asyncio.sleep(bound + 11)
        assert await asyncio.to_thread(op.healthy), "an idle operator failed liveness with the API server up"
        await asyncio.to_thread(stack.plane.stop_apiserver)
        try:
            await _wait_health(op, healthy=False, what="/healthz to fail with the API server down", timeout=60)
            op.managed.check()
        finally:
            stack.plane.start_apiserver()
        await _wait_health(op, healthy=True, what="/healthz to answer 200 again", timeout=60)
        body = await asyncio.to_thread(_health_body, op)
        assert set(body) == {"api-reachable"}


async def _wait_health(op: OperatorProcess, *, healthy: bool, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while await asyncio.to_thread(op.healthy) != healthy:
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        op.managed.check()
        await asyncio.sleep(0.5)


def _health_body(op: OperatorProcess) -> dict[str, Any]:
    import urllib.request  # noqa: PLC0415

    with urllib.request.urlopen(op.liveness_url, timeout=5) as resp:
        body: dict[str, Any] = json.loads(resp.read())
        return body


# -- 6. the 403 check can fail ---------------------------------------------------------------------------------------
async def test_requests_refused_by_rbac_show_in_the_audit_log(stack: Stack, namespace: str, tmp_path: Path) -> None:
    """The ``cluster`` fixture fails a test on any 403 of the operator; this proves the check sees them: an operator
    holding the token of a ServiceAccount bound to nothing is refused, and the audit log says so."""
    stack.kubectl_apply([{"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": "nobody", "namespace": namespace}}])
    user = f"system:serviceaccount:{namespace}:nobody"
    token = operator_token(stack.plane.api_client(), namespace, "nobody", seconds=600)
    kubeconfig = write_token_kubeconfig(tmp_path / "nobody.kubeconfig", stack.plane.server, stack.plane.pki.ca.cert,
                                        token=token, name="nobody")
    mark = stack.plane.audit_offset()
    async with operator(stack, "op-nobody", namespace, env={"KUBECONFIG": str(kubeconfig)}):
        async def refused() -> bool:
            return bool(forbidden_requests(stack, user, mark))

        admin = Cluster(stack=stack, api=stack.plane.api_client(), namespace=namespace, audit_mark=mark)
        await admin.wait_for(refused, "a 403 in the audit log", timeout=60)
    forbidden = forbidden_requests(stack, user, mark)
    assert any(verb in {"list", "watch"} and "/glmdeployments" in uri for verb, uri in forbidden), forbidden
    assert forbidden_requests(stack, stack.operator_user, mark) == []  # the chart's operator was not involved
