"""The operator's in-memory view of the cluster, fed by its watches: reads come from here.

kopf keeps one index per watched kind (``@kopf.index`` handlers registered in
:mod:`glm_operator.handlers` with the ids :data:`CHILD_INDEX_IDS` and :data:`DEPLOYMENT_INDEX_ID`):
every child the operator labels, keyed by ``(namespace, owning CR name)``, and every
GLMDeployment keyed by ``(namespace, name)``. kopf adds, replaces and removes entries on every
watch event (deletions included), so a reconcile lists nothing and an idle resync makes no request.

**Start-up.** kopf does not call any non-indexing handler (resume, create, update, event) before
the initial LIST of *every* indexed resource is indexed (``operator_indexed`` toggles in
``kopf/_core/reactor/processing.py``). :class:`ClusterIndex` is marked warm by the first such
handler call (:meth:`ClusterIndex.mark_warm`); before that :meth:`ClusterIndex.children` returns
``None`` and the caller falls back to one LIST per kind for that CR, so a reconcile that runs early
(e.g. the resync task) never prunes or re-creates children it has not seen yet.

**Re-lists.** When a watch breaks for good (the API server restarted: ``410 Gone``), kopf LISTs the kind again
and delivers every object as a listing event (``type`` ``None``), but it never removes the index
entries of objects deleted while the watch was down: they would stay in the index for ever, and a
reconcile would never re-create a child deleted during an API server outage. So a listing event of an object the
operator has already seen — a re-list, not the initial listing at start-up, whose index is authoritative
(:meth:`ClusterIndex.note_event`) — makes each CR's next reconcile verify its children with one LIST
(:meth:`ClusterIndex.needs_verification`); indexed objects that LIST did not return are *ghosts*
(:meth:`ClusterIndex.verified`), never returned again (uids are unique). The CR itself is read with a
GET then too, and a CR that is gone becomes a ghost (:meth:`ClusterIndex.ghost`).

**Pods.** The pods of a CR's workloads (labelled ``app.kubernetes.io/managed-by: glm-operator``, keyed by
``(namespace, CR name)`` like children, :data:`POD_INDEX_ID`) are indexed too, stripped to what status reads
(:func:`index_pod`): status names why they do not start. The operator never writes pods, so there is no echo to
suppress; instead a pod event re-reconciles the owner only when the stripped state changed
(:meth:`ClusterIndex.pod_changed`), never for the initial listing (the start-up reconcile reads the index).
Pods are not verified after a re-list: a pod deleted while the watch was down may stay indexed, and
:meth:`ClusterIndex.pods` keeps only the newest entry per pod name (a StatefulSet re-creates a pod under its
name); status reads pods only for roles that are not ready.

A freshly applied child may reach the index a moment after the reconcile that wrote it; a
reconcile in that window sees the older object and at worst sends an idempotent server-side apply
again (no prune: pruning only deletes objects the index shows and the spec does not want, and a
404 on delete counts as done).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from glm_operator.cluster.drift import object_key
from glm_operator.cluster.kinds import CHILD_KINDS
from glm_operator.render import names

#: kopf index id (also its handler kwarg name) of each child kind, by plural.
CHILD_INDEX_IDS: Final = {kind.plural: f"glm_children_{kind.plural}" for kind in CHILD_KINDS}
DEPLOYMENT_INDEX_ID: Final = "glm_deployments"
POD_INDEX_ID: Final = "glm_pods"

#: Pod labels kept in the index (owner, role).
_POD_LABELS: Final = (names.LABEL_DEPLOYMENT, names.LABEL_ROLE, names.LABEL_COMPONENT)
#: Pod conditions kept in the index: scheduling (status names its problem) and readiness.
_POD_CONDITIONS: Final = ("PodScheduled", "Ready")

#: ``(apiVersion, kind, name)`` of a child.
ChildKey = tuple[str, str, str]


def _slim(body: Mapping[str, Any]) -> dict[str, Any]:
    """A plain-dict copy without ``metadata.managedFields`` (large, never read)."""
    from glm_operator.cluster.reconcile import plain  # noqa: PLC0415  (avoid an import cycle)

    obj: dict[str, Any] = plain(body)
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


def index_child(body: Mapping[str, Any], api_version: str, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The index entry of one child: ``{(namespace, CR name): object}`` (``{}`` when it has no CR label).

    ``apiVersion``/``kind`` are filled in (kopf's initial LIST omits them on items)."""
    meta = body.get("metadata") or {}
    owner = (meta.get("labels") or {}).get(names.LABEL_DEPLOYMENT)
    if not owner or not meta.get("namespace"):
        return {}
    obj = _slim(body)
    obj.setdefault("apiVersion", api_version)
    obj.setdefault("kind", kind)
    return {(meta["namespace"], owner): obj}


def index_deployment(body: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The index entry of one GLMDeployment: ``{(namespace, name): body}``."""
    meta = body.get("metadata") or {}
    return {(meta.get("namespace") or "", meta.get("name") or ""): _slim(body)}


def _waiting(statuses: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for container in statuses or ():
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            out.append({"name": container.get("name"),
                        "state": {"waiting": {k: waiting[k] for k in ("reason", "message") if waiting.get(k)}}})
    return out


def index_pod(body: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The index entry of one pod of a CR's workload: ``{(namespace, CR name): slim pod}`` (``{}`` without a CR
    label).

    Only what status reads is kept: ``metadata`` name/namespace/uid/resourceVersion and the owner and role labels,
    the ``PodScheduled``/``Ready`` conditions without timestamps, and the waiting state of each (init) container
    that waits."""
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    owner = labels.get(names.LABEL_DEPLOYMENT)
    if not owner or not meta.get("namespace"):
        return {}
    status = body.get("status") or {}
    slim_status: dict[str, Any] = {"conditions": [
        {k: c[k] for k in ("type", "status", "reason", "message") if c.get(k)}
        for c in status.get("conditions") or () if c.get("type") in _POD_CONDITIONS
    ]}
    for key in ("initContainerStatuses", "containerStatuses"):
        waiting = _waiting(status.get(key))
        if waiting:
            slim_status[key] = waiting
    slim = {
        "metadata": {
            **{k: str(meta[k]) for k in ("name", "namespace", "uid", "resourceVersion") if meta.get(k)},
            "labels": {k: str(labels[k]) for k in _POD_LABELS if k in labels},
        },
        "status": slim_status,
    }
    return {(str(meta["namespace"]), str(owner)): slim}


def pod_state(slim: Mapping[str, Any]) -> str:
    """What status may read of an indexed pod, as one comparable string."""
    return json.dumps(slim.get("status") or {}, sort_keys=True, separators=(",", ":"))


class ClusterIndex:
    """Read access to kopf's indices (live mappings ``key → collection of values``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._indices: Mapping[str, Mapping[Any, Iterable[dict[str, Any]]]] = {}
        self.warm = False
        self.clock = clock
        #: When the last listing event arrived (``-inf``: none since the operator started).
        self.listed_at = float("-inf")
        #: ``(namespace, CR name)`` → when its children were last verified with a LIST.
        self.verified_at: dict[tuple[str, str], float] = {}
        #: uids of indexed objects that no longer exist.
        self.ghosts: set[str] = set()
        #: uids of every object an event handler has seen (a listing event of one of them is a re-list).
        self.seen: set[str] = set()
        #: uid → :func:`pod_state` of every pod an event handler has seen (what a pod event is compared with).
        self.pod_states: dict[str, str] = {}

    def bind(self, indices: Mapping[str, Any]) -> None:
        """Keep the kopf indices of a new operator run (the startup handler's kwargs); not warm yet."""
        self._indices = {key: value for key, value in indices.items()
                         if key in CHILD_INDEX_IDS.values() or key in {DEPLOYMENT_INDEX_ID, POD_INDEX_ID}}
        self.warm = False
        self.listed_at, self.verified_at, self.seen, self.pod_states = float("-inf"), {}, set(), {}

    def mark_warm(self) -> None:
        """Every initial listing is indexed (called from kopf's non-indexing handlers)."""
        self.warm = bool(self._indices)

    def note_event(self, uid: str, *, listing: bool) -> bool:
        """An event handler got an event of object ``uid``; ``listing``: kopf listed its kind (``type`` ``None``).

        Returns whether it is a re-list (a listing event of an object seen before, after a broken watch), which
        makes every CR's next reconcile verify its children. The initial listing at start-up sees each object for
        the first time and costs nothing: an operator restart makes only the initial LISTs.
        """
        relist = listing and uid in self.seen
        if uid:
            self.seen.add(uid)
        if relist:
            self.listed_at = self.clock()
        return relist

    def pod_changed(self, uid: str, state: str, *, listing: bool, deleted: bool) -> bool:
        """A pod event: whether its owner must be reconciled (status may read something new).

        ``True`` when the pod was deleted or its :func:`pod_state` differs from the last event's; ``False`` for
        an unchanged state (kubelet/scheduler updates of fields status does not read) and for the first listing of
        a pod (the start-up reconcile reads the index, which holds it already)."""
        old = self.pod_states.pop(uid, None) if deleted else self.pod_states.get(uid)
        if deleted:
            return True
        self.pod_states[uid] = state
        if old is None:
            return not listing
        return old != state

    def pods(self, namespace: str, cr_name: str) -> list[dict[str, Any]] | None:
        """The indexed pods of CR ``cr_name`` (the newest entry per pod name), or ``None`` while not warm."""
        if not self.warm:
            return None
        index = self._indices.get(POD_INDEX_ID)
        newest: dict[str, dict[str, Any]] = {}
        for pod in (index.get((namespace, cr_name)) if index is not None else None) or ():
            name = str((pod.get("metadata") or {}).get("name") or "")
            if name not in newest or _version(pod) > _version(newest[name]):
                newest[name] = pod
        return [newest[name] for name in sorted(newest)]

    def needs_verification(self, namespace: str, cr_name: str) -> bool:
        """Whether the CR and its children must be read from the API server once (a listing happened since)."""
        return self.warm and self.verified_at.get((namespace, cr_name), float("-inf")) < self.listed_at

    def verified(self, namespace: str, cr_name: str, started: float, *, indexed: Mapping[ChildKey, dict[str, Any]],
                 listed: Mapping[ChildKey, dict[str, Any]]) -> None:
        """The CR's children were LISTed (the LIST started at ``started``, after ``indexed`` was read from the
        index): indexed objects the LIST did not return are ghosts."""
        alive = {_uid(obj) for obj in listed.values()}
        self.ghosts |= {_uid(obj) for obj in indexed.values()} - alive - {""}
        self.verified_at[(namespace, cr_name)] = started

    def ghost(self, uid: str) -> None:
        """An indexed object (e.g. a GLMDeployment) that a GET found gone."""
        if uid:
            self.ghosts.add(uid)

    def children(self, namespace: str, cr_name: str) -> dict[ChildKey, dict[str, Any]] | None:
        """Children of CR ``cr_name`` keyed by ``(apiVersion, kind, name)``, or ``None`` while not warm
        (the caller lists them from the API server)."""
        if not self.warm:
            return None
        found: dict[ChildKey, dict[str, Any]] = {}
        for index_id in CHILD_INDEX_IDS.values():
            index = self._indices.get(index_id)
            for obj in (index.get((namespace, cr_name)) if index is not None else None) or ():
                if _uid(obj) not in self.ghosts:
                    found[object_key(obj)] = obj
        return found

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | bool | None:
        """The indexed GLMDeployment, ``None`` when the index has none, ``False`` while not warm."""
        if not self.warm:
            return False
        index = self._indices.get(DEPLOYMENT_INDEX_ID)
        values = [v for v in (index.get((namespace, name)) if index is not None else None) or ()
                  if _uid(v) not in self.ghosts]
        return values[-1] if values else None


def _version(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:  # resourceVersions are opaque to clients; etcd's are integers
        return 0


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")
