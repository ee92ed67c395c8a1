"""The kopf shell: thin handlers with explicit ids around
:class:`glm_operator.cluster.scheduler.ReconcileScheduler` and
:func:`glm_operator.cluster.reconcile.reconcile`.

- ``glm_children_<plural>`` / ``glm_deployments`` (``@kopf.index``) keep every labelled child and
  every GLMDeployment in memory from the watches (:mod:`glm_operator.cluster.index`): reconciles
  list nothing and an idle resync makes no API request; kopf runs no other handler before every
  initial listing is indexed;
- ``resume``/``create``/``update`` hand the CR that changed to the scheduler;
- ``track`` (an event handler) keeps the set of known CRs; a background task re-reconciles each of
  them every ``GLM_RESYNC_SECONDS`` from the index (zero requests when nothing changed). A kopf
  timer would do the same but puts a finalizer on every CR, so deleting a CR would hang whenever the
  operator is not running;
- ``child-<plural>`` event handlers re-reconcile the owner when a child is changed or deleted by
  hand, or when a workload's readiness changes; events that only echo the operator's own writes
  (same ``resourceVersion``) are ignored;
- ``glm_pods`` (``@kopf.index``) keeps the workloads' pods, stripped to what status reads, and ``pod-events``
  re-reconciles the owner when such a pod's scheduling/readiness/waiting state changes, so status names why pods
  do not start (``Unschedulable``, ``ImagePullBackOff``, ...);
- ``api-reachable`` (``@kopf.on.probe``) makes ``/healthz`` fail when the API server was unreachable
  for longer than ``GLM_LIVENESS_BOUND_SECONDS`` (:mod:`glm_operator.cluster.health`).

Retries: the scheduler is the one retry path (exponential back-off, ``GLM_RETRY_DELAY_SECONDS``
base, ``GLM_RETRY_MAX_DELAY_SECONDS`` cap). The kopf handlers therefore never raise
``kopf.TemporaryError`` for a transient failure (kopf would retry a second time in parallel); they
raise ``kopf.PermanentError`` (via :func:`glm_operator.cluster.errors.to_kopf`) for a permanent one,
so kopf records it.

kopf's own bookkeeping lives in ``serving.glm.dev/*`` annotations, not in ``status`` (the CRD's
structural status schema would prune ``status.kopf``).

Environment: ``GLM_RESYNC_SECONDS`` (default 300), ``GLM_RETRY_DELAY_SECONDS`` (5),
``GLM_RETRY_MAX_DELAY_SECONDS`` (300), ``GLM_KOPF_SCANNING`` (``off`` disables CRD/namespace
scanning), ``GLM_WATCH_SERVER_TIMEOUT_SECONDS`` (300: the API server ends each watch after this,
kopf re-opens it), ``GLM_LIVENESS_BOUND_SECONDS`` (120), ``GLM_METRICS_PORT``,
``GLM_API_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from kubernetes import client

from glm_operator.api.spec import API_GROUP, API_VERSION, KIND, PLURAL
from glm_operator.cluster import errors
from glm_operator.cluster.apiclient import make_api_client
from glm_operator.cluster.drift import object_key
from glm_operator.cluster.env import env_seconds
from glm_operator.cluster.health import BOUND_ENV, ApiHealth, ApiUnreachableError
from glm_operator.cluster.index import (
    CHILD_INDEX_IDS,
    DEPLOYMENT_INDEX_ID,
    POD_INDEX_ID,
    ChildKey,
    ClusterIndex,
    index_child,
    index_deployment,
    index_pod,
    pod_state,
)
from glm_operator.cluster.kinds import CHILD_KINDS
from glm_operator.cluster.kube import KubeCluster
from glm_operator.cluster.reconcile import Outcome, plain, reconcile, report
from glm_operator.cluster.scheduler import Backoff, ReconcileScheduler, resync_seconds_from_env
from glm_operator.observe import metrics
from glm_operator.render import names

log = logging.getLogger(__name__)

#: Seconds between full resyncs of every CR (env ``GLM_RESYNC_SECONDS``), read at import.
RESYNC_SECONDS = resync_seconds_from_env()
#: First retry delay of a failed reconcile (env ``GLM_RETRY_DELAY_SECONDS``), read at import.
RETRY_DELAY_SECONDS = Backoff.from_env().base


@dataclass
class _State:
    """Per-process state, rebuilt by the startup handler."""

    api: client.ApiClient | None = None
    cluster: KubeCluster | None = None
    index: ClusterIndex = field(default_factory=ClusterIndex)
    scheduler: ReconcileScheduler | None = None
    health: ApiHealth = field(default_factory=ApiHealth)
    resync_task: asyncio.Task[None] | None = None


STATE = _State()


def _api() -> client.ApiClient:
    if STATE.api is None:  # handlers called without the startup handler (e.g. embedded use)
        STATE.api = make_api_client()
    return STATE.api


def _cluster() -> KubeCluster:
    if STATE.cluster is None:
        STATE.cluster = KubeCluster(_api())
    return STATE.cluster


def _live_children(namespace: str, name: str) -> dict[ChildKey, dict[str, Any]] | None:
    """The CR's children from the index; after a listing event, from one LIST that also finds the index's ghosts
    (``None``: the index is cold or the LIST failed, the reconcile lists and reports a failure itself)."""
    index = STATE.index
    indexed = index.children(namespace, name)
    if indexed is None or not index.needs_verification(namespace, name):
        return indexed
    started = index.clock()
    try:
        listed = {object_key(obj): obj for obj in _cluster().list_children(namespace, name)}
    except Exception:
        return None
    index.verified(namespace, name, started, indexed=indexed, listed=listed)
    return listed


def _reconcile_measured(body: dict[str, Any]) -> Outcome:
    """One reconcile in a worker thread, children from the index (or a LIST while it is cold or unverified)."""
    meta, started = body["metadata"], time.perf_counter()
    namespace, name = meta["namespace"], meta["name"]
    outcome = reconcile(_cluster(), body, live=_live_children(namespace, name), pods=STATE.index.pods(namespace, name))
    seconds = time.perf_counter() - started
    if outcome.failure is not None and not outcome.failure.expected:
        metrics.record_exception(seconds, RuntimeError(outcome.failure.message))  # a bug: "Unexpected"
    else:
        metrics.record_reconcile(
            meta["namespace"], meta["name"], seconds, changed=outcome.changed, invalid=bool(outcome.invalid),
            apply_error=outcome.failure is not None, status=outcome.status,
        )
    return outcome


async def _run(body: dict[str, Any]) -> Outcome:
    return await asyncio.to_thread(_reconcile_measured, body)


async def _read(namespace: str, name: str) -> dict[str, Any] | None:
    """The newest CR body: from the index when warm, else (or after a listing event) one GET."""
    indexed = STATE.index.deployment(namespace, name)
    if indexed is not False and not STATE.index.needs_verification(namespace, name):
        return indexed if isinstance(indexed, dict) else None
    body = await asyncio.to_thread(_cluster().read_deployment, namespace, name)
    if isinstance(indexed, dict) and (body is None or body["metadata"].get("uid") != indexed["metadata"].get("uid")):
        STATE.index.ghost(str(indexed["metadata"].get("uid") or ""))  # deleted while the watch was down
    return body


def _report(body: dict[str, Any], outcome: Outcome, retry_in: float | None) -> None:
    report(_cluster(), body, outcome, retry_in=retry_in)


def _scheduler() -> ReconcileScheduler:
    if STATE.scheduler is None:
        STATE.scheduler = ReconcileScheduler(run=_run, read=_read, report=_report, backoff=Backoff.from_env())
    return STATE.scheduler


def watch_timeouts() -> tuple[int, int, int]:
    """``(server, client, connect)`` timeouts of kopf's watches, in whole seconds.

    server: ``?timeoutSeconds=`` the API server ends each watch after (``GLM_WATCH_SERVER_TIMEOUT_SECONDS``, 300);
    kube-apiserver parses it as an integer and answers 400 to ``300.0``. client: server + 30, so a silent
    connection is dropped instead of waited on. connect: 10.
    """
    server = max(1, int(env_seconds("GLM_WATCH_SERVER_TIMEOUT_SECONDS", 300.0)))
    return server, server + 30, 10


@kopf.on.startup(id="configure")
async def configure(settings: kopf.OperatorSettings, **kwargs: Any) -> None:
    """Keep kopf state in our annotations, post only warnings as Events, bound the watches, build the
    API client, bind the indices, start the periodic resync."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=API_GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=API_GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{API_GROUP}/finalizer"
    settings.posting.level = logging.WARNING
    (settings.watching.server_timeout, settings.watching.client_timeout,
     settings.watching.connect_timeout) = watch_timeouts()
    # Scanning watches CRDs/namespaces for new resources (GLM_KOPF_SCANNING=off: tests, which install CRDs first).
    settings.scanning.disabled = os.environ.get("GLM_KOPF_SCANNING", "on") == "off"
    STATE.api = make_api_client()  # kopf runs startup handlers before it logs in
    STATE.cluster = KubeCluster(STATE.api)
    STATE.index.bind(kwargs)
    if STATE.scheduler is not None:
        await STATE.scheduler.close()
    STATE.scheduler = None
    STATE.health = ApiHealth(bound_seconds=env_seconds(BOUND_ENV, 120.0))
    STATE.resync_task = asyncio.create_task(_scheduler().resync_forever(RESYNC_SECONDS), name="glm-resync")
    metrics.start_from_env()  # GLM_METRICS_PORT, default 8080; 0 = off


@kopf.on.cleanup(id="stop-metrics")
def stop_metrics(**_: Any) -> None:
    """Stop the metrics server with the operator."""
    metrics.SERVER.stop()


@kopf.on.cleanup(id="stop-resync")
async def stop_resync(**_: Any) -> None:
    """Stop the periodic resync and pending retries with the operator."""
    task, STATE.resync_task = STATE.resync_task, None
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if STATE.scheduler is not None:
        await STATE.scheduler.close()


@kopf.on.probe(id="api-reachable")
async def api_reachable(**_: Any) -> float:
    """Liveness: seconds since the last watch event or successful request.

    Raises:
        kopf.PermanentError: the API server was unreachable for more than ``GLM_LIVENESS_BOUND_SECONDS``
            (``/healthz`` then answers 500 and the kubelet restarts the pod).
    """

    async def ping() -> object:
        return await asyncio.to_thread(client.VersionApi(_api()).get_code, _request_timeout=5)

    try:
        return await STATE.health.check(ping)
    except ApiUnreachableError as exc:
        log.warning("liveness: %s", exc)
        raise kopf.PermanentError(str(exc)) from exc


@kopf.on.login(id="login")
def login(**_: Any) -> kopf.ConnectionInfo:
    """Log kopf in with the same configuration as our API client (in-cluster or ``$KUBECONFIG`` read
    now, not at import time), so kopf's watches and our writes always reach the same server."""
    api = _api()
    cfg = api.configuration
    if cfg.refresh_api_key_hook is not None:  # in-cluster: re-read the rotated service-account token
        cfg.refresh_api_key_hook(cfg)
    keys = cfg.api_key or {}
    token = str(keys.get("authorization") or keys.get("BearerToken") or "")
    scheme, token_value = token.split(" ", 1) if " " in token else ("Bearer", token)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        username=cfg.username or None,
        password=cfg.password or None,
        scheme=scheme or None,
        token=token_value or None,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        default_namespace=None,
    )


@kopf.index(API_GROUP, API_VERSION, PLURAL, id=DEPLOYMENT_INDEX_ID)
def index_deployments(body: kopf.Body, **_: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Index every GLMDeployment by ``(namespace, name)``."""
    STATE.health.touch()
    return index_deployment(body)


def _child_indexer(api_version: str, kind: str) -> Any:
    def index_children(body: kopf.Body, **_: Any) -> dict[tuple[str, str], dict[str, Any]]:
        STATE.health.touch()
        return index_child(body, api_version, kind)

    return index_children


@kopf.on.resume(API_GROUP, API_VERSION, PLURAL, id="resume")
@kopf.on.create(API_GROUP, API_VERSION, PLURAL, id="create")
@kopf.on.update(API_GROUP, API_VERSION, PLURAL, id="update")
async def reconcile_handler(body: kopf.Body, **_: Any) -> None:
    """Reconcile on operator start, creation and every spec/metadata change.

    Transient failures are retried by the scheduler (not by kopf). A queued request (a reconcile of
    this CR was running) returns at once; the running one reconciles again and its failures are
    retried too.

    Raises:
        kopf.PermanentError: the cluster refused a request for a configuration reason (RBAC, a
            missing CRD); status and an Event say which. The next change or resync tries again.
    """
    STATE.index.mark_warm()
    outcome = await _scheduler().request(plain(body))
    if outcome is not None and outcome.failure is not None and not outcome.failure.transient:
        raise errors.to_kopf(outcome.failure, delay=RETRY_DELAY_SECONDS)


@kopf.on.event(API_GROUP, API_VERSION, PLURAL, id="track")
def track(event: kopf.RawEvent, uid: str, namespace: str | None, name: str, **_: Any) -> None:
    """Remember which GLMDeployments exist, for the periodic resync."""
    STATE.index.mark_warm()
    STATE.index.note_event(uid, listing=event.get("type") is None)  # a re-list: verify before trusting the index
    if event.get("type") == "DELETED":
        metrics.deployment_gone(namespace or "", name)
        _scheduler().forget(uid)
    elif namespace is not None:
        _scheduler().known[uid] = (namespace, name)
        metrics.deployment_seen(namespace, name)


async def child_event(body: kopf.Body, event: kopf.RawEvent, **_: Any) -> None:
    """A managed child changed or vanished: reconcile its owning GLMDeployment.

    A re-list (a listing event of a child seen before: kopf listed the kind again after a broken watch) reconciles
    the owner too, echo or not: a sibling may have been deleted while the watch was down (no event says so), and the
    reconcile verifies the children with a LIST (:mod:`glm_operator.cluster.index`)."""
    STATE.index.mark_warm()
    listing = STATE.index.note_event(body.metadata.uid or "", listing=event.get("type") is None)
    namespace = body.metadata.namespace
    owner = next(
        (ref for ref in body.metadata.get("ownerReferences") or []
         if ref.get("kind") == KIND and ref.get("apiVersion") == f"{API_GROUP}/{API_VERSION}"),
        None,
    )
    if owner is None or namespace is None:
        return
    key = (body.get("apiVersion", ""), body.get("kind", ""), namespace, body.metadata.name or "")
    version = None if event.get("type") == "DELETED" or listing else body.metadata.get("resourceVersion")
    await _scheduler().child_changed((owner.get("uid", ""), namespace, owner.get("name", "")), key, version)


for _kind in CHILD_KINDS:
    _resource = (_kind.group, _kind.version, _kind.plural) if _kind.group else (_kind.version, _kind.plural)
    _labels = {names.LABEL_MANAGED_BY: names.MANAGED_BY}
    kopf.index(*_resource, labels=_labels, id=CHILD_INDEX_IDS[_kind.plural])(
        _child_indexer(_kind.api_version, _kind.kind)
    )
    kopf.on.event(*_resource, labels=_labels, id=f"child-{_kind.plural}")(child_event)


_POD_LABELS: Mapping[str, Any] = {names.LABEL_MANAGED_BY: names.MANAGED_BY, names.LABEL_DEPLOYMENT: kopf.PRESENT}


@kopf.index("v1", "pods", labels=_POD_LABELS, id=POD_INDEX_ID)
def index_pods(body: kopf.Body, **_: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Index the pods of every CR's workloads by ``(namespace, CR name)``, stripped to what status reads."""
    STATE.health.touch()
    return index_pod(body)


@kopf.on.event("v1", "pods", labels=_POD_LABELS, id="pod-events")
async def pod_event(body: kopf.Body, event: kopf.RawEvent, **_: Any) -> None:
    """A workload pod changed: reconcile its owning GLMDeployment when what status reads of it changed (scheduling,
    readiness, a waiting container) or it was deleted. Pods are never written by the operator: no echo."""
    STATE.index.mark_warm()
    entry = index_pod(body)
    uid = body.metadata.uid or ""
    if not entry or not uid:
        return
    ((namespace, owner_name), slim), = entry.items()
    deleted = event.get("type") == "DELETED"
    if not STATE.index.pod_changed(uid, pod_state(slim), listing=event.get("type") is None, deleted=deleted):
        return
    owner = STATE.index.deployment(namespace, owner_name)
    if not isinstance(owner, dict):
        return  # no such CR (or a cold index: the start-up reconcile reads the pods anyway)
    key = ("v1", "Pod", namespace, body.metadata.name or "")
    # a pod's resourceVersion is never in the scheduler's seen versions (we write no pods): never an echo
    version = str(body.metadata.get("resourceVersion") or "deleted")
    await _scheduler().child_changed((str(owner["metadata"].get("uid") or ""), namespace, owner_name), key, version)
