"""The kopf shell: thin handlers with explicit ids around :func:`glm_operator.cluster.reconcile.reconcile`.

- ``resume``/``create``/``update`` reconcile the CR that changed;
- ``track`` (an event handler) keeps the set of known CRs; a background task started at start-up
  re-reconciles each of them every :data:`RESYNC_SECONDS` (zero writes when nothing changed). A
  kopf timer would do the same but puts a finalizer on every CR, so deleting a CR would hang
  whenever the operator is not running;
- ``child-<plural>`` event handlers watch the children the operator labels and re-reconcile the
  owner when one is changed or deleted by hand, or when a workload's readiness changes; events
  that only echo the operator's own writes (same ``resourceVersion``) are ignored.

kopf's own bookkeeping lives in ``serving.glm.dev/*`` annotations, not in ``status`` (the CRD's
structural status schema would prune ``status.kopf``). Reconciles of one CR are serialised;
requests that arrive while one runs are queued and cause at most one more run, and none when
they were only the echo of that run's own writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import kopf
from kubernetes import client

from glm_operator.api.spec import API_GROUP, API_VERSION, KIND, PLURAL
from glm_operator.cluster.apiclient import make_api_client
from glm_operator.cluster.events import post_event
from glm_operator.cluster.kinds import CHILD_KINDS
from glm_operator.cluster.reconcile import Outcome, plain, read_deployment, reconcile
from glm_operator.observe import metrics
from glm_operator.render import names

log = logging.getLogger(__name__)

#: Seconds between full resyncs of every CR (env ``GLM_RESYNC_SECONDS``).
RESYNC_SECONDS = float(os.environ.get("GLM_RESYNC_SECONDS", "300"))
#: Back-off before kopf retries a reconcile that hit a transient API error.
RETRY_DELAY_SECONDS = float(os.environ.get("GLM_RETRY_DELAY_SECONDS", "15"))


#: A child watch event: ((apiVersion, kind, namespace, name), resourceVersion or None when deleted).
Trigger = tuple[tuple[str, str, str, str], str | None]


@dataclass
class _State:
    """Per-process state, rebuilt by the startup handler (one API client, per-CR locks)."""

    api: client.ApiClient | None = None
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    #: uid → requests that arrived while a reconcile of that CR was running.
    pending: dict[str, list[Trigger | None]] = field(default_factory=dict)
    #: uid → (namespace, name) of every GLMDeployment the watch has shown.
    known: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: (apiVersion, kind, namespace, name) → resourceVersion the last reconcile left.
    seen_versions: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    resync_task: asyncio.Task[None] | None = None


STATE = _State()


@kopf.on.startup(id="configure")
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Keep kopf state in our annotations, post only warnings as Events, build the API client,
    start the periodic resync."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=API_GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=API_GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{API_GROUP}/finalizer"
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    # Scanning watches CRDs/namespaces for new resources; off for the local emulator and tests.
    settings.scanning.disabled = os.environ.get("GLM_KOPF_SCANNING", "on") == "off"
    STATE.api = make_api_client()  # kopf runs startup handlers before it logs in
    STATE.locks.clear()
    STATE.pending.clear()
    STATE.known.clear()
    STATE.seen_versions.clear()
    STATE.resync_task = asyncio.create_task(_resync_forever(), name="glm-resync")
    metrics.start_from_env()  # GLM_METRICS_PORT, default 8080; 0 = off


@kopf.on.cleanup(id="stop-metrics")
def stop_metrics(**_: Any) -> None:
    """Stop the metrics server with the operator."""
    metrics.SERVER.stop()


@kopf.on.cleanup(id="stop-resync")
async def stop_resync(**_: Any) -> None:
    """Stop the periodic resync with the operator."""
    task, STATE.resync_task = STATE.resync_task, None
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _resync_forever() -> None:
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        for namespace, name in list(STATE.known.values()):
            try:
                body = await asyncio.to_thread(read_deployment, _api(), namespace, name)
                if body is not None and not body["metadata"].get("deletionTimestamp"):
                    await run_reconcile(body)
            except Exception:  # one failing CR must not stop the resync of the others
                log.exception("resync of %s/%s failed", namespace, name)


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


def _api() -> client.ApiClient:
    if STATE.api is None:  # handlers called without the startup handler (e.g. embedded use)
        STATE.api = make_api_client()
    return STATE.api


def _report(body: dict[str, Any], outcome: Outcome) -> None:
    """Log and post Events for what a reconcile did (runs in a worker thread).

    A rejected spec is reported once per generation (when its status was written), so an unchanged
    invalid CR makes no writes on resync. Events are posted with the API client because
    ``kopf.event`` only works inside kopf's handler context, not in the resync task.
    """
    where = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
    if outcome.invalid:
        if outcome.status_written:
            message = "; ".join(str(f) for f in outcome.invalid)
            log.warning("%s: spec rejected, children unchanged: %s", where, message)
            post_event(_api(), body, type_="Warning", reason="InvalidSpec", message=message)
        return
    if outcome.applied or outcome.pruned:
        log.info("%s: applied %s; pruned %s", where, outcome.applied or "nothing", outcome.pruned or "nothing")
    if outcome.error and outcome.status_written:  # once per distinct failure, not on every retry
        log.warning("%s: %s", where, outcome.error)
        post_event(_api(), body, type_="Warning", reason="ApplyFailed", message=outcome.error)


def _reconcile_and_report(body: dict[str, Any]) -> Outcome:
    meta, started = body["metadata"], time.perf_counter()
    try:
        outcome = reconcile(_api(), body)
    except Exception as exc:
        metrics.record_exception(time.perf_counter() - started, exc)
        raise
    metrics.record_reconcile(
        meta["namespace"], meta["name"], time.perf_counter() - started, changed=bool(outcome.applied or outcome.pruned),
        invalid=bool(outcome.invalid), apply_error=outcome.error is not None, status=outcome.status,
    )
    _report(body, outcome)
    return outcome


def _record(outcome: Outcome) -> None:
    STATE.seen_versions.update(outcome.seen_versions)


async def run_reconcile(
    body: dict[str, Any],
    trigger: Trigger | None = None,
) -> Outcome | None:
    """Reconcile one CR, serialised per CR.

    When a reconcile of the same CR is already running, the request is queued and ``None`` is
    returned; the running one then reconciles once more, unless every queued ``trigger`` (a child
    watch event) turns out to be the echo of its own writes.
    """
    uid = body["metadata"]["uid"]
    STATE.known[uid] = (body["metadata"]["namespace"], body["metadata"]["name"])
    lock = STATE.locks.setdefault(uid, asyncio.Lock())
    if lock.locked():
        STATE.pending.setdefault(uid, []).append(trigger)
        return None
    async with lock:
        outcome = await asyncio.to_thread(_reconcile_and_report, body)
        _record(outcome)
        while _needs_rerun(STATE.pending.pop(uid, [])):
            meta = body["metadata"]
            fresh = await asyncio.to_thread(read_deployment, _api(), meta["namespace"], meta["name"])
            if fresh is None:
                break
            body = fresh
            outcome = await asyncio.to_thread(_reconcile_and_report, body)
            _record(outcome)
    return outcome


def _needs_rerun(triggers: list[Trigger | None]) -> bool:
    """Whether queued requests need another reconcile: any non-event request, or any child event
    whose resourceVersion is not the one the last reconcile left."""
    return any(t is None or STATE.seen_versions.get(t[0]) != t[1] for t in triggers)


@kopf.on.resume(API_GROUP, API_VERSION, PLURAL, id="resume")
@kopf.on.create(API_GROUP, API_VERSION, PLURAL, id="create")
@kopf.on.update(API_GROUP, API_VERSION, PLURAL, id="update")
async def reconcile_handler(body: kopf.Body, **_: Any) -> None:
    """Reconcile on operator start, creation and every spec/metadata change.

    Raises:
        kopf.TemporaryError: when the API server failed transiently; kopf retries after
            :data:`RETRY_DELAY_SECONDS` and records the attempt in our annotations.
    """
    outcome = await run_reconcile(plain(body))
    if outcome is not None and outcome.error:
        raise kopf.TemporaryError(outcome.error, delay=RETRY_DELAY_SECONDS)


@kopf.on.event(API_GROUP, API_VERSION, PLURAL, id="track")
def track(event: kopf.RawEvent, uid: str, namespace: str | None, name: str, **_: Any) -> None:
    """Remember which GLMDeployments exist, for the periodic resync."""
    if event.get("type") == "DELETED":
        metrics.deployment_gone(namespace or "", name)
        STATE.known.pop(uid, None)
        STATE.locks.pop(uid, None)
        STATE.pending.pop(uid, None)
    elif namespace is not None:
        STATE.known[uid] = (namespace, name)
        metrics.deployment_seen(namespace, name)


async def child_event(body: kopf.Body, event: kopf.RawEvent, **_: Any) -> None:
    """A managed child changed or vanished: reconcile its owning GLMDeployment."""
    key = (body.get("apiVersion", ""), body.get("kind", ""), body.metadata.namespace or "", body.metadata.name or "")
    version = None if event.get("type") == "DELETED" else body.metadata.get("resourceVersion")
    if version is None:
        STATE.seen_versions.pop(key, None)
    elif STATE.seen_versions.get(key) == version:
        return  # the echo of our own apply, or an object the last reconcile already checked
    owner = next(
        (ref for ref in body.metadata.get("ownerReferences") or []
         if ref.get("kind") == KIND and ref.get("apiVersion") == f"{API_GROUP}/{API_VERSION}"),
        None,
    )
    if owner is None or body.metadata.namespace is None:
        return
    lock = STATE.locks.get(owner.get("uid", ""))
    if lock is not None and lock.locked():
        # decided after the running reconcile: most such events are the echo of its own writes
        STATE.pending.setdefault(owner["uid"], []).append((key, version))
        return
    fresh = await asyncio.to_thread(read_deployment, _api(), body.metadata.namespace, owner["name"])
    if fresh is None or fresh["metadata"].get("uid") != owner.get("uid"):
        return  # the owner is gone; the garbage collector removes the child
    if fresh["metadata"].get("deletionTimestamp"):
        return
    await run_reconcile(fresh, (key, version))


for _kind in CHILD_KINDS:
    _resource = (_kind.group, _kind.version, _kind.plural) if _kind.group else (_kind.version, _kind.plural)
    kopf.on.event(
        *_resource, labels={names.LABEL_MANAGED_BY: names.MANAGED_BY}, id=f"child-{_kind.plural}"
    )(child_event)
