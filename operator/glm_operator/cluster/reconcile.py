"""One reconcile of a GLMDeployment: parse → render → apply drifted children → prune → status.

Synchronous; talks to the cluster only through a :class:`~glm_operator.cluster.port.ClusterPort`
(the scheduler runs it in a worker thread). No kopf imports here.

Guarantees:
- never raises for a failure of the cluster: every exception is classified
  (:func:`glm_operator.cluster.errors.classify`) into :attr:`Outcome.failure`, recorded in the
  ``Degraded`` condition when status can still be written; the caller retries transient ones;
- an invalid spec changes no existing child: parsing and every rule run before the first write.
  Children of the **last valid spec** (kept in the :data:`LAST_APPLIED_ANNOTATION` annotation of
  the CR) that are missing are re-created, so a child deleted by hand comes back even while the
  current spec is refused;
- a child is written only when it is missing or differs from the rendered object
  (:func:`~glm_operator.cluster.drift.is_subset`), and status only when it changed, so a
  reconcile of an unchanged world makes zero write requests; with ``live`` given (the watch
  index) it makes zero requests at all;
- children that the spec no longer wants are deleted, but only if this CR owns them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from kubernetes import client

from glm_operator.api import reasons
from glm_operator.api.findings import Finding, SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.api.spec import API_GROUP
from glm_operator.cluster.drift import is_subset, object_key
from glm_operator.cluster.errors import Failure, classify, describe_apply
from glm_operator.cluster.kube import KubeCluster, child_selector, read_deployment
from glm_operator.cluster.port import ClusterPort
from glm_operator.observe import status as observe
from glm_operator.render.manifests import Rendered, render

__all__ = [
    "LAST_APPLIED_ANNOTATION",
    "Outcome",
    "child_selector",
    "plain",
    "read_deployment",
    "reconcile",
    "report",
]

log = logging.getLogger(__name__)

#: Annotation on the CR holding ``{"generation": N, "spec": {...}}`` of the last spec whose children
#: were all applied; written once per applied generation (one metadata PATCH).
LAST_APPLIED_ANNOTATION: Final = f"{API_GROUP}/last-applied-spec"

#: ``(apiVersion, kind, name)`` of a child.
ChildKey = tuple[str, str, str]


@dataclass
class Outcome:
    """What one reconcile did.

    Attributes:
        status: the status the CR has afterwards (as written, or as it would have been).
        status_written: whether a status PATCH was sent (and succeeded).
        applied: ``Kind/name`` of children that were (re)applied.
        pruned: ``Kind/name`` of children that were deleted.
        restored: ``Kind/name`` of missing children of the last valid spec re-created while the
            current spec is invalid.
        invalid: the error findings when the spec was refused.
        failure: the first failure talking to the cluster, classified, else ``None``.
        seen_versions: ``resourceVersion`` of every child as this reconcile left it, keyed by
            ``(apiVersion, kind, namespace, name)``; watch events carrying these versions are the
            echo of our own writes (or of objects already checked) and need no reconcile.
        written: the CR as the API server returned it after this reconcile's last write to it (status or
            annotation), else ``None``. Newer than what the watch shows for a while: the scheduler reconciles
            from it until the watch catches up, so a lagging watch never makes the operator write the same
            status twice.
    """

    status: dict[str, Any]
    status_written: bool = False
    applied: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    invalid: list[Finding] = field(default_factory=list)
    failure: Failure | None = None
    seen_versions: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    written: dict[str, Any] | None = None

    @property
    def error(self) -> str | None:
        """The failure's message, or ``None`` (kept for callers of the old API)."""
        return None if self.failure is None else self.failure.message

    @property
    def changed(self) -> bool:
        """Whether any child was written."""
        return bool(self.applied or self.pruned or self.restored)


def plain(value: Any) -> Any:
    """Deep-copy kopf bodies/views (Mappings, Sequences) into plain dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(v) for v in value]
    return value


def now_rfc3339() -> str:
    """Current UTC time in the RFC 3339 form Kubernetes uses for conditions."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def last_applied(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """``(generation, spec)`` from :data:`LAST_APPLIED_ANNOTATION`, or ``None`` (absent or unreadable)."""
    raw = ((body.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED_ANNOTATION)
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
        if not isinstance(value, dict):
            return None
        return int(value["generation"]), dict(value["spec"])
    except (ValueError, KeyError, TypeError):
        return None


def _annotation_value(generation: int, spec: Any) -> str:
    return json.dumps({"generation": generation, "spec": spec}, sort_keys=True, separators=(",", ":"))


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


def _name(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _live(
    cluster: ClusterPort, namespace: str, name: str, live: Mapping[ChildKey, dict[str, Any]] | None
) -> dict[ChildKey, dict[str, Any]]:
    if live is not None:
        return dict(live)
    return {object_key(obj): obj for obj in cluster.list_children(namespace, name)}


def _workloads(
    rendered: Rendered, cr_name: str, live: Mapping[ChildKey, dict[str, Any]]
) -> dict[str, tuple[dict[str, Any] | None, int]]:
    return {
        role: (live.get(("apps/v1", kind, name)), replicas)
        for role, (kind, name, replicas) in observe.workload_roles(rendered.objects, cr_name).items()
    }


def _finish(cluster: ClusterPort, body: dict[str, Any], outcome: Outcome) -> Outcome:
    """Write ``outcome.status`` if it changed; a failure to write becomes the outcome's failure (if none yet)."""
    patch = observe.status_patch(body.get("status") or {}, outcome.status)
    if patch is None:
        return outcome
    meta = body["metadata"]
    try:
        outcome.written = cluster.patch_status(meta["namespace"], meta["name"], patch)
        outcome.status_written = True
    except Exception as exc:
        if outcome.failure is None:
            outcome.failure = classify(exc, what="write status")
    return outcome


def reconcile(
    cluster: ClusterPort | client.ApiClient,
    body: dict[str, Any],
    *,
    live: Mapping[ChildKey, dict[str, Any]] | None = None,
    pods: Sequence[dict[str, Any]] | None = None,
) -> Outcome:
    """Drive the children of one GLMDeployment to its spec and write its status.

    Args:
        cluster: the cluster port (a ``kubernetes.client.ApiClient`` is wrapped in
            :class:`~glm_operator.cluster.kube.KubeCluster`).
        body: the CR as a plain dict (``metadata.uid``, ``generation``, ``annotations``, ``spec``,
            ``status``).
        live: the CR's children as the watch index holds them, keyed by ``(apiVersion, kind, name)``;
            ``None`` lists them from the API server (one LIST per child kind).
        pods: the CR's pods as the watch index holds them (stripped, :func:`glm_operator.cluster.index.index_pod`);
            status names the first problem of each role that is not ready. ``None`` (index cold): no pod details,
            no request.

    Returns:
        An :class:`Outcome`; failures are in :attr:`Outcome.failure`, never raised.
    """
    port: ClusterPort = KubeCluster(cluster) if isinstance(cluster, client.ApiClient) else cluster
    try:
        deployment = parse(body)
        rendered = render(deployment)
    except SpecInvalidError as exc:
        return _reconcile_invalid(port, body, exc.findings, live)
    meta = body["metadata"]
    previous = body.get("status") or {}
    generation = int(meta.get("generation") or 0)
    now = now_rfc3339()
    outcome = Outcome(status=previous)
    try:
        current = _live(port, deployment.namespace, deployment.name, live)
    except Exception as exc:
        outcome.failure = classify(exc, what="list children")
        outcome.status = observe.failed_status(
            previous=previous, generation=generation, reason=outcome.failure.reason,
            message=outcome.failure.message, now=now,
        )
        return _finish(port, body, outcome)

    desired = {object_key(obj): obj for obj in rendered.objects}
    for key, obj in desired.items():
        existing = current.get(key)
        if existing is not None and is_subset(obj, existing):
            continue
        try:
            current[key] = port.apply(obj)
        except Exception as exc:
            outcome.failure = describe_apply(exc, obj)
            break
        outcome.applied.append(_name(obj))
    if outcome.failure is None:
        for key, obj in list(current.items()):
            if key in desired or not _owned_by(obj, deployment.uid):
                continue
            try:
                port.delete(obj["apiVersion"], obj["kind"], deployment.namespace, obj["metadata"]["name"])
            except Exception as exc:
                if getattr(exc, "status", None) != 404:
                    outcome.failure = classify(exc, what=f"delete {_name(obj)}")
                    break
            del current[key]
            outcome.pruned.append(_name(obj))
    if outcome.failure is None:
        value = _annotation_value(generation, body.get("spec"))
        if (meta.get("annotations") or {}).get(LAST_APPLIED_ANNOTATION) != value:
            try:
                outcome.written = port.annotate(deployment.namespace, deployment.name, {LAST_APPLIED_ANNOTATION: value})
            except Exception as exc:
                outcome.failure = classify(exc, what="record the applied spec")

    outcome.status = observe.healthy_status(
        previous=previous,
        generation=generation,
        workloads=_workloads(rendered, deployment.name, current),
        endpoint=rendered.endpoint,
        plan=rendered.plan,
        warnings=rendered.warnings,
        now=now,
        apply_error=None if outcome.failure is None else outcome.failure.message,
        apply_reason=reasons.APPLY_FAILED if outcome.failure is None else outcome.failure.reason,
        pods=pods,
    )
    outcome.seen_versions = {
        (api_version, kind, deployment.namespace, name): str(obj["metadata"].get("resourceVersion", ""))
        for (api_version, kind, name), obj in current.items()
    }
    return _finish(port, body, outcome)


def _reconcile_invalid(
    port: ClusterPort,
    body: dict[str, Any],
    findings: list[Finding],
    live: Mapping[ChildKey, dict[str, Any]] | None,
) -> Outcome:
    """The current spec is refused: leave existing children alone, re-create missing children of the
    last valid spec, and say so in status."""
    meta = body["metadata"]
    previous = body.get("status") or {}
    generation = int(meta.get("generation") or 0)
    outcome = Outcome(status=previous, invalid=findings)
    running: dict[str, tuple[dict[str, Any] | None, int]] | None = None
    last = last_applied(body)
    rendered_last: Rendered | None = None
    if last is not None:
        try:
            rendered_last = render(parse({**body, "spec": last[1]}))
        except SpecInvalidError:  # the rules got stricter since: nothing to restore from
            rendered_last = None
    if rendered_last is not None:
        namespace, name = meta["namespace"], meta["name"]
        try:
            current = _live(port, namespace, name, live)
        except Exception as exc:
            outcome.failure = classify(exc, what="list children")
            current = None
        if current is not None:
            for obj in rendered_last.objects:
                key = object_key(obj)
                if key in current:
                    continue  # an invalid update leaves every existing workload untouched
                try:
                    current[key] = port.apply(obj)
                except Exception as exc:
                    outcome.failure = describe_apply(exc, obj)
                    break
                outcome.restored.append(_name(obj))
            running = _workloads(rendered_last, name, current)
            outcome.seen_versions = {
                (api_version, kind, namespace, child): str(obj["metadata"].get("resourceVersion", ""))
                for (api_version, kind, child), obj in current.items()
            }
    outcome.status = observe.invalid_status(
        previous=previous, generation=generation, findings=findings, now=now_rfc3339(), running=running,
        running_generation=None if last is None else last[0],
        restore_error=None if outcome.failure is None else outcome.failure.message,
        restore_reason=reasons.APPLY_FAILED if outcome.failure is None else outcome.failure.reason,
    )
    return _finish(port, body, outcome)


def report(cluster: ClusterPort, body: dict[str, Any], outcome: Outcome, *, retry_in: float | None = None) -> None:
    """Log one line and post Events for what a reconcile did.

    A failure is logged as one line per attempt (warning; error for an unexpected one), without a
    traceback. Events (best effort) are posted for a rejected spec and for a failure when their
    status was written (once per distinct message: an unchanged invalid CR makes no writes on
    resync) or, for a failure, when status could not be written either (the API server is down).
    Never raises; a failed Event post is logged at debug level.

    Args:
        retry_in: seconds until the scheduler retries, for the log line (``None``: no retry planned).
    """
    where = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
    if outcome.changed:
        log.info("%s: applied %s; pruned %s%s", where, outcome.applied or "nothing", outcome.pruned or "nothing",
                 f"; restored {outcome.restored} of the last valid spec" if outcome.restored else "")
    if outcome.invalid and outcome.status_written:
        message = "; ".join(str(f) for f in outcome.invalid)
        log.warning("%s: spec rejected, children keep the last valid spec: %s", where, message)
        _post(cluster, body, reasons.INVALID_SPEC, message)
    failure = outcome.failure
    if failure is not None:
        retry = f"; retrying in {retry_in:.1f} s" if retry_in is not None else "; retried on the next change"
        log.log(logging.WARNING if failure.expected else logging.ERROR,
                "%s: %s: %s%s", where, failure.reason, failure.message, retry)
        if outcome.status_written or not _status_reachable(outcome):
            _post(cluster, body, failure.reason, failure.message)


def _status_reachable(outcome: Outcome) -> bool:
    """False when the failure is that status itself could not be written (or children listed)."""
    failure = outcome.failure
    return failure is None or not failure.message.startswith(("cannot write status", "cannot list children"))


def _post(cluster: ClusterPort, body: dict[str, Any], reason: str, message: str) -> None:
    try:
        cluster.post_event(body, type_="Warning", reason=reason, message=message)
    except Exception as exc:
        log.debug("could not post %s Event for %s: %s", reason, body["metadata"].get("name"), classify(exc).message)
