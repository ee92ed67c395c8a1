"""ClusterIndex: children and CRs come from kopf's watch-fed indices; nothing before they are warm."""

from __future__ import annotations

from typing import Any

from glm_operator.cluster.index import CHILD_INDEX_IDS, DEPLOYMENT_INDEX_ID, ClusterIndex, index_child, index_deployment
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
