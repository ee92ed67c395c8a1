"""One reconcile of a GLMDeployment: parse → render → apply drifted children → prune → status.

Synchronous (the official client is blocking); the kopf shell runs it in a worker thread. No kopf
imports here, so the same function serves the handlers, the resync timer and child events.

Guarantees:
- an invalid spec changes no child: parsing and every rule run before the first write;
- a child is written only when it is missing or differs from the rendered object
  (:func:`~glm_operator.cluster.drift.is_subset`), and status only when it changed, so an
  unchanged resync makes zero write requests;
- children that the spec no longer wants are deleted, but only if this CR owns them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from glm_operator.api.findings import Finding, SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.api.spec import API_GROUP, API_VERSION, PLURAL
from glm_operator.cluster.drift import is_subset, object_key
from glm_operator.cluster.kinds import CHILD_KINDS, ChildKind, decode, kind_of
from glm_operator.observe import status as observe
from glm_operator.render import names
from glm_operator.render.manifests import render

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What one reconcile did.

    Attributes:
        status: the status the CR has afterwards.
        status_written: whether a status PATCH was sent.
        applied: ``Kind/name`` of children that were (re)applied.
        pruned: ``Kind/name`` of children that were deleted.
        invalid: the error findings when the spec was refused (children untouched).
        error: a transient API failure message (the caller retries), else ``None``.
        seen_versions: ``resourceVersion`` of every child as this reconcile left it, keyed by
            ``(apiVersion, kind, namespace, name)``; watch events carrying these versions are the
            echo of our own writes (or of objects already checked) and need no reconcile.
    """

    status: dict[str, Any]
    status_written: bool = False
    applied: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    invalid: list[Finding] = field(default_factory=list)
    error: str | None = None
    seen_versions: dict[tuple[str, str, str, str], str] = field(default_factory=dict)


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


def child_selector(cr_name: str) -> str:
    """Label selector of every child of one CR."""
    return f"{names.LABEL_DEPLOYMENT}={cr_name},{names.LABEL_MANAGED_BY}={names.MANAGED_BY}"


def read_deployment(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """GET one GLMDeployment as a dict, or ``None`` when it no longer exists."""
    try:
        resp = client.CustomObjectsApi(api).get_namespaced_custom_object(
            API_GROUP, API_VERSION, namespace, PLURAL, name, _preload_content=False
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return decode(resp)


def write_status(api: client.ApiClient, body: dict[str, Any], new: dict[str, Any]) -> bool:
    """Merge-patch the status subresource if ``new`` differs from the body's status. Returns whether it wrote."""
    patch = observe.status_patch(body.get("status") or {}, new)
    if patch is None:
        return False
    meta = body["metadata"]
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        API_GROUP, API_VERSION, meta["namespace"], PLURAL, meta["name"], {"status": patch},
        _content_type="application/merge-patch+json", _preload_content=False,
    )
    return True


#: The child LISTs of one reconcile run concurrently (one round trip instead of nine).
_LIST_POOL = ThreadPoolExecutor(max_workers=len(CHILD_KINDS), thread_name_prefix="glm-list")


def _list_kind(api: client.ApiClient, kind: ChildKind, namespace: str, selector: str) -> list[dict[str, Any]]:
    try:
        return kind.list(api, namespace, selector)
    except ApiException as exc:
        # A CRD (Gateway API's HTTPRoute, GAIE's InferencePool) may not be installed; that only
        # matters when the spec wants an object of that kind, and then its apply fails with
        # Degraded/ApplyFailed naming the missing CRD.
        if exc.status == 404:
            return []
        raise


def _list_children(api: client.ApiClient, namespace: str, cr_name: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    selector = child_selector(cr_name)
    batches = _LIST_POOL.map(lambda kind: _list_kind(api, kind, namespace, selector), CHILD_KINDS)
    return {object_key(item): item for batch in batches for item in batch}


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


def _describe(exc: ApiException, obj: dict[str, Any]) -> str:
    what = f"{obj['kind']}/{obj['metadata']['name']}"
    if exc.status == 404 and obj["kind"] in {"InferencePool", "HTTPRoute"}:
        return (f"cannot apply {what}: the {obj['apiVersion']} {obj['kind']} CRD is not installed; install the "
                "Gateway API Inference Extension (and Gateway API for HTTPRoute) CRDs")
    if exc.status == 404 and obj["kind"] == "PodMonitor":
        return (f"cannot apply {what}: the {obj['apiVersion']} PodMonitor CRD is not installed; install the "
                "Prometheus Operator CRDs or set spec.monitoring.podMonitors: false")
    return f"cannot apply {what}: HTTP {exc.status} {exc.reason}: {(exc.body or '')[:300]}"


def reconcile(api: client.ApiClient, body: dict[str, Any]) -> Outcome:
    """Drive the children of one GLMDeployment to its spec and write its status.

    Args:
        api: an API client for the cluster.
        body: the CR as a plain dict (``metadata.uid``, ``generation``, ``spec``, ``status``).

    Returns:
        An :class:`Outcome`. Transient API failures are reported in ``Outcome.error`` (after
        recording them in the ``Degraded`` condition), never raised, except failures to write
        status or list children, which propagate as :class:`ApiException`.
    """
    previous = body.get("status") or {}
    generation = int(body["metadata"].get("generation") or 0)
    now = now_rfc3339()
    try:
        deployment = parse(body)
        rendered = render(deployment)
    except SpecInvalidError as exc:
        new_status = observe.invalid_status(previous=previous, generation=generation, findings=exc.findings, now=now)
        written = write_status(api, body, new_status)
        return Outcome(status=new_status, status_written=written, invalid=exc.findings)

    desired = {object_key(obj): obj for obj in rendered.objects}
    live = _list_children(api, deployment.namespace, deployment.name)
    outcome = Outcome(status=previous)
    for key, obj in desired.items():
        current = live.get(key)
        if current is not None and is_subset(obj, current):
            continue
        try:
            live[key] = kind_of(obj).apply(api, obj)
        except ApiException as exc:
            outcome.error = _describe(exc, obj)
            break
        outcome.applied.append(f"{obj['kind']}/{obj['metadata']['name']}")
    if outcome.error is None:
        for key, obj in list(live.items()):
            if key in desired or not _owned_by(obj, deployment.uid):
                continue
            try:
                kind_of(obj).delete(api, deployment.namespace, obj["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 404:
                    outcome.error = f"cannot delete {obj['kind']}/{obj['metadata']['name']}: HTTP {exc.status}"
                    break
            del live[key]
            outcome.pruned.append(f"{obj['kind']}/{obj['metadata']['name']}")

    workloads = {
        role: (live.get(("apps/v1", kind, name)), replicas)
        for role, (kind, name, replicas) in observe.workload_roles(rendered.objects, deployment.name).items()
    }
    new_status = observe.healthy_status(
        previous=previous,
        generation=generation,
        workloads=workloads,
        endpoint=rendered.endpoint,
        plan=rendered.plan,
        warnings=rendered.warnings,
        now=now,
        apply_error=outcome.error,
    )
    outcome.status = new_status
    outcome.seen_versions = {
        (api_version, kind, deployment.namespace, name): str(obj["metadata"].get("resourceVersion", ""))
        for (api_version, kind, name), obj in live.items()
    }
    outcome.status_written = write_status(api, body, new_status)
    return outcome
