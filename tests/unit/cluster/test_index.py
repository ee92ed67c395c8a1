"""ClusterIndex: children and CRs come from kopf's watch-fed indices; nothing before they are warm."""

from __future__ import annotations

from typing import Any

from glm_operator.cluster.index import (
    CHILD_INDEX_IDS,
    DEPLOYMENT_INDEX_ID,
    POD_INDEX_ID,
    ClusterIndex,
    index_child,
    index_deployment,
    index_pod,
    pod_state,
)
from glm_operator.render import names


def _sts(name: str, owner: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "managedFields": [{"big": 1}],
                         "labels": {names.LABEL_DEPLOYMENT: owner, names.LABEL_MANAGED_BY: names.MANAGED_BY}}}


def _kopf_like(entries: list[dict[tuple[str, str], dict[str, Any]]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """What a kopf Index looks like to a reader: key → collection of values."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        for key, value in entry.items():
            out.setdefault(key, []).append(value)
    return out


def test_index_entries_fill_in_kind_and_drop_managed_fields() -> None:
    entry = index_child(_sts("a-decode", "a"), "apps/v1", "StatefulSet")
    obj = entry[("ns", "a")]
    assert obj["kind"] == "StatefulSet" and obj["apiVersion"] == "apps/v1"
    assert "managedFields" not in obj["metadata"]
    assert index_child({"metadata": {"name": "x", "namespace": "ns"}}, "v1", "Service") == {}


def test_children_only_once_warm_and_per_cr() -> None:
    index = ClusterIndex()
    sts = _kopf_like([index_child(_sts("a-decode", "a"), "apps/v1", "StatefulSet"),
                      index_child(_sts("b-decode", "b"), "apps/v1", "StatefulSet")])
    crs = _kopf_like([index_deployment({"metadata": {"name": "a", "namespace": "ns", "uid": "u"}})])
    index.bind({CHILD_INDEX_IDS["statefulsets"]: sts, DEPLOYMENT_INDEX_ID: crs, "unrelated": {}})
    assert index.children("ns", "a") is None  # initial listings not done: the caller LISTs
    assert index.deployment("ns", "a") is False
    index.mark_warm()
    assert list(index.children("ns", "a") or {}) == [("apps/v1", "StatefulSet", "a-decode")]
    assert index.children("ns", "missing") == {}
    found = index.deployment("ns", "a")
    assert isinstance(found, dict) and found["metadata"]["uid"] == "u"
    assert index.deployment("ns", "b") is None


def _with_uid(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    return obj


def test_a_child_deleted_while_the_watch_was_down_is_no_ghost_after_a_relist() -> None:
    """kopf re-lists after a broken watch (API server restarted: 410 Gone) but never drops the index entries of
    objects that vanished meanwhile. After a listing event, a CR's children need one LIST to verify them; indexed
    objects the LIST did not return are ghosts from then on."""
    clock = iter(range(100, 1000))
    index = ClusterIndex(clock=lambda: float(next(clock)))
    sts = _kopf_like([index_child(_with_uid(_sts("a-decode", "a"), "old"), "apps/v1", "StatefulSet"),
                      index_child(_with_uid(_sts("a-prefill", "a"), "p"), "apps/v1", "StatefulSet")])
    crs = _kopf_like([index_deployment({"metadata": {"name": "a", "namespace": "ns", "uid": "u"}})])
    index.bind({CHILD_INDEX_IDS["statefulsets"]: sts, DEPLOYMENT_INDEX_ID: crs})
    index.mark_warm()
    assert not index.needs_verification("ns", "a")
    # the initial listing at start-up: every object is seen for the first time, the index is authoritative
    assert not index.note_event("p", listing=True) and not index.note_event("old", listing=True)
    assert not index.needs_verification("ns", "a")
    assert not index.note_event("p", listing=False)  # a watch event (MODIFIED) of a known object
    assert not index.needs_verification("ns", "a")
    assert index.note_event("p", listing=True)  # a listing event of a known object: kopf re-listed the kind
    assert index.needs_verification("ns", "a")
    started = index.clock()
    indexed = index.children("ns", "a") or {}
    listed = {k: v for k, v in indexed.items() if v["metadata"]["uid"] != "old"}  # a-decode was deleted
    index.verified("ns", "a", started, indexed=indexed, listed=listed)
    assert not index.needs_verification("ns", "a")
    assert list(index.children("ns", "a") or {}) == [("apps/v1", "StatefulSet", "a-prefill")]
    # the re-created StatefulSet (a new uid) is indexed normally
    sts[("ns", "a")].append(index_child(_with_uid(_sts("a-decode", "a"), "new"), "apps/v1", "StatefulSet")[("ns", "a")])
    found = index.children("ns", "a") or {}
    assert found[("apps/v1", "StatefulSet", "a-decode")]["metadata"]["uid"] == "new"
    index.ghost("u")  # a CR deleted while the watch was down
    assert index.deployment("ns", "a") is None


def _pod(name: str, owner: str, *, uid: str = "pu", version: str = "7", scheduled: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": version,
                     "managedFields": [{"big": 1}], "annotations": {"a": "b"},
                     "labels": {names.LABEL_DEPLOYMENT: owner, names.LABEL_MANAGED_BY: names.MANAGED_BY,
                                names.LABEL_COMPONENT: "decode", names.LABEL_ROLE: "decode", "other": "x"}},
        "spec": {"containers": [{"name": "vllm", "image": "i", "args": ["--a"] * 50}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "True" if scheduled else "False",
                 "reason": "" if scheduled else "Unschedulable", "message": "" if scheduled else "0/4 nodes",
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "lastProbeTime": None},
                {"type": "Initialized", "status": "True"},
            ],
            "containerStatuses": [{"name": "vllm", "image": "i", "restartCount": 3,
                                   "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                                   "lastState": {"terminated": {"exitCode": 1}}},
                                  {"name": "sidecar", "state": {"running": {"startedAt": "t"}}}],
        },
    }


def test_pod_entries_keep_only_what_status_reads() -> None:
    entry = index_pod(_pod("a-decode-0", "a", scheduled=False))
    assert entry == {("ns", "a"): {
        "metadata": {"name": "a-decode-0", "namespace": "ns", "uid": "pu", "resourceVersion": "7",
                     "labels": {names.LABEL_DEPLOYMENT: "a", names.LABEL_COMPONENT: "decode",
                                names.LABEL_ROLE: "decode"}},
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                   "message": "0/4 nodes"}],
                   "containerStatuses": [{"name": "vllm", "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                                                  "message": "back-off"}}}]},
    }}
    assert index_pod({"metadata": {"name": "x", "namespace": "ns", "labels": {}}}) == {}


def test_a_pod_event_reconciles_only_when_what_status_reads_changed() -> None:
    index = ClusterIndex()
    pending = pod_state(index_pod(_pod("a-decode-0", "a", scheduled=False))[("ns", "a")])
    assert not index.pod_changed("pu", pending, listing=True, deleted=False)  # initial listing: the index has it
    assert not index.pod_changed("pu", pending, listing=False, deleted=False)  # e.g. lastProbeTime or annotations
    moved = _pod("a-decode-0", "a", version="8", scheduled=False)
    moved["metadata"]["annotations"] = {"new": "x"}
    moved["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-02T00:00:00Z"
    assert not index.pod_changed("pu", pod_state(index_pod(moved)[("ns", "a")]), listing=False, deleted=False)
    scheduled = pod_state(index_pod(_pod("a-decode-0", "a", version="9"))[("ns", "a")])
    assert index.pod_changed("pu", scheduled, listing=False, deleted=False)
    assert index.pod_changed("pu", scheduled, listing=False, deleted=True)
    assert index.pod_changed("new", scheduled, listing=False, deleted=False)  # a new pod after start-up


def test_pods_once_warm_newest_entry_per_name() -> None:
    index = ClusterIndex()
    pods = _kopf_like([index_pod(_pod("a-decode-0", "a", uid="old", version="5", scheduled=False)),
                       index_pod(_pod("a-decode-0", "a", uid="new", version="12")),
                       index_pod(_pod("b-decode-0", "b", uid="b"))])
    index.bind({POD_INDEX_ID: pods})
    assert index.pods("ns", "a") is None
    index.mark_warm()
    assert [p["metadata"]["uid"] for p in index.pods("ns", "a") or []] == ["new"]
    assert index.pods("ns", "missing") == []
