"""reconcile() on the in-memory fake cluster: no exception escapes, status says what happened."""

from __future__ import annotations

from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from glm_operator.api import reasons
from glm_operator.cluster.drift import object_key
from glm_operator.cluster.reconcile import LAST_APPLIED_ANNOTATION, last_applied, reconcile
from glm_operator.render import names
from tests.conftest import seed
from tests.unit.cluster.fake_cluster import FakeCluster

NAME = "glm-5-3"
WRITES = ("apply", "delete", "patch_status", "annotate")
POOL = urllib3.HTTPConnectionPool("api.example", 6443)


def _condition(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == ctype)


def _created(fake: FakeCluster) -> dict[str, Any]:
    cr = seed()
    cr["metadata"]["namespace"] = "default"
    fake.add_cr(cr)
    outcome = reconcile(fake, fake.cr("default", NAME))
    assert outcome.failure is None, outcome.failure
    return fake.cr("default", NAME)


def _update_spec(fake: FakeCluster, path: list[str], value: Any) -> dict[str, Any]:
    key = ("serving.glm.dev/v1alpha1", "GLMDeployment", "default", NAME)
    body = fake.objects[key]
    target = body["spec"]
    for part in path[:-1]:
        target = target.setdefault(part, {})
    if value is None:
        target.pop(path[-1], None)  # as a JSON merge patch with null
    else:
        target[path[-1]] = value
    body["metadata"]["generation"] += 1
    return fake.cr("default", NAME)


def _live(fake: FakeCluster) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {object_key(obj): obj for obj in fake.objects.values() if obj["kind"] != "GLMDeployment"}


def test_first_reconcile_applies_every_child_and_records_the_applied_spec() -> None:
    fake = FakeCluster()
    cr = _created(fake)
    assert ("StatefulSet", "glm-5-3-decode") in fake.children()
    assert cr["status"]["observedGeneration"] == 1
    assert _condition(cr["status"], "Degraded")["status"] == "False"
    assert last_applied(cr) == (1, cr["spec"])


def test_unchanged_world_with_children_from_the_index_makes_no_request() -> None:
    fake = FakeCluster()
    cr = _created(fake)
    before = fake.count()
    outcome = reconcile(fake, cr, live=_live(fake))
    assert fake.count() == before, fake.calls[before:]
    assert not outcome.changed and not outcome.status_written


def test_connection_error_while_listing_is_degraded_not_raised() -> None:
    fake = FakeCluster()
    cr = seed()
    cr["metadata"]["namespace"] = "default"
    fake.add_cr(cr)
    refused = urllib3.exceptions.MaxRetryError(POOL, "/apis", urllib3.exceptions.NewConnectionError(POOL, "refused"))
    fake.fail("list_children", refused)
    outcome = reconcile(fake, fake.cr("default", NAME))  # raised MaxRetryError before
    assert outcome.failure is not None and outcome.failure.transient
    status = fake.cr("default", NAME)["status"]
    degraded = _condition(status, "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == reasons.API_UNAVAILABLE
    assert "observedGeneration" not in status  # nothing of generation 1 was applied


def test_timeout_while_writing_status_is_a_transient_failure() -> None:
    fake = FakeCluster()
    cr = seed()
    cr["metadata"]["namespace"] = "default"
    fake.add_cr(cr)
    fake.fail("patch_status", urllib3.exceptions.ReadTimeoutError(POOL, "/apis", "read timed out"))
    outcome = reconcile(fake, fake.cr("default", NAME))
    assert outcome.failure is not None and outcome.failure.transient
    assert not outcome.status_written


def test_failed_apply_keeps_observed_generation_at_the_last_applied_one() -> None:
    fake = FakeCluster()
    _created(fake)
    cr = _update_spec(fake, ["decode", "replicas"], 2)
    fake.fail("apply", ApiException(status=500, reason="Internal Server Error"), match="StatefulSet/glm-5-3-decode")
    outcome = reconcile(fake, cr)
    assert outcome.failure is not None and outcome.failure.reason == reasons.APPLY_FAILED
    status = fake.cr("default", NAME)["status"]
    assert status["observedGeneration"] == 1  # was 2 before: written while the child was not applied
    assert _condition(status, "Degraded")["status"] == "True"
    assert _condition(status, "Ready")["status"] == "False"
    assert _condition(status, "Progressing")["reason"] == reasons.BLOCKED
    assert last_applied(fake.cr("default", NAME)) is not None
    assert last_applied(fake.cr("default", NAME))[0] == 1  # type: ignore[index]
    outcome = reconcile(fake, fake.cr("default", NAME))
    assert outcome.failure is None
    assert fake.cr("default", NAME)["status"]["observedGeneration"] == 2


def test_child_deleted_while_the_spec_is_invalid_is_restored_from_the_last_valid_spec() -> None:
    fake = FakeCluster()
    _created(fake)
    cr = _update_spec(fake, ["prefill", "parallelism", "decodeContext"], 4)
    fake.remove("StatefulSet", "glm-5-3-decode")
    before = {k: v["metadata"]["resourceVersion"] for k, v in fake.children().items()}
    outcome = reconcile(fake, cr)
    assert outcome.invalid
    assert outcome.restored == ["StatefulSet/glm-5-3-decode"]
    after = fake.children()
    assert ("StatefulSet", "glm-5-3-decode") in after
    assert {k: after[k]["metadata"]["resourceVersion"] for k in before} == before  # the rest untouched
    status = fake.cr("default", NAME)["status"]
    assert _condition(status, "Planned")["status"] == "False"
    assert _condition(status, "Planned")["reason"] == reasons.INVALID_SPEC
    assert "generation 1" in _condition(status, "Progressing")["message"]
    assert status["observedGeneration"] == 2
    assert fake.cr("default", NAME)["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] == \
        cr["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]


def test_invalid_spec_without_a_missing_child_writes_no_child() -> None:
    fake = FakeCluster()
    _created(fake)
    cr = _update_spec(fake, ["prefill", "parallelism", "decodeContext"], 4)
    outcome = reconcile(fake, cr, live=_live(fake))
    assert outcome.invalid and not outcome.changed
    writes = [c for c in fake.calls if c[0] in WRITES]
    assert writes[-1] == ("patch_status", f"default/{NAME}")
    before = fake.count(*WRITES)
    reconcile(fake, fake.cr("default", NAME), live=_live(fake))
    assert fake.count(*WRITES) == before  # unchanged invalid CR: no write


def test_prune_ignores_a_child_that_is_already_gone() -> None:
    fake = FakeCluster()
    cr = seed()
    cr["metadata"]["namespace"] = "default"
    cr["spec"]["router"]["gateway"] = {"name": "inference-gateway"}
    fake.add_cr(cr)
    reconcile(fake, fake.cr("default", NAME))
    assert ("HTTPRoute", NAME) in fake.children()
    cr = _update_spec(fake, ["router", "gateway"], None)
    live = _live(fake)
    fake.remove("HTTPRoute", NAME)  # the index still shows it
    outcome = reconcile(fake, cr, live=live)
    assert outcome.failure is None
    assert outcome.pruned == [f"HTTPRoute/{NAME}"]


def _engine_pod(role: str, ordinal: int, *, unschedulable: str | None = None) -> dict[str, Any]:
    pod_name = f"{NAME}-{role}-{ordinal}"
    scheduled = ({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}
                 if unschedulable else {"type": "PodScheduled", "status": "True"})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "labels": names.engine_pod_labels(NAME, role)},
            "status": {"phase": "Pending", "conditions": [scheduled]}}


def test_status_names_an_unschedulable_pod_from_the_index_without_a_request() -> None:
    fake = FakeCluster()
    cr = _created(fake)
    message = '0/4 nodes are available: persistentvolumeclaim "hf-cache" not found.'
    fake.set_pod(_engine_pod("prefill", 0))
    fake.set_pod(_engine_pod("decode", 0, unschedulable=message))
    before = fake.count()
    outcome = reconcile(fake, cr, live=_live(fake), pods=fake.indexed_pods("default", NAME))
    assert fake.calls[before:] == [("patch_status", f"default/{NAME}")]  # no pod is read from the API server
    ready = _condition(outcome.status, "Ready")
    assert ready["status"] == "False" and ready["reason"] == reasons.REPLICAS_NOT_READY
    assert ready["message"] == (
        f"waiting for prefill 0/1, decode 0/1 (pod {NAME}-decode-0 Unschedulable: {message}), router 0/1")
    assert _condition(outcome.status, "Progressing")["message"].endswith(f"; pod {NAME}-decode-0 Unschedulable")
    assert _condition(outcome.status, "Degraded")["status"] == "False"
    assert not any(key[1] == "Pod" for key in outcome.seen_versions)  # pods are no children: no echo versions

    fake.set_pod(_engine_pod("decode", 0))  # the claim was created: the pod is scheduled
    outcome = reconcile(fake, fake.cr("default", NAME), live=_live(fake), pods=fake.indexed_pods("default", NAME))
    assert _condition(outcome.status, "Ready")["message"] == "waiting for prefill 0/1, decode 0/1, router 0/1"
    before = fake.count()
    outcome = reconcile(fake, fake.cr("default", NAME), live=_live(fake), pods=fake.indexed_pods("default", NAME))
    assert fake.count() == before and not outcome.status_written  # unchanged pods: nothing to write
