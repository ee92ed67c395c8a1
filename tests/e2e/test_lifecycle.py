"""The operator end to end against the API emulator, in-process: create, change, refuse, restore, delete."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes import client

from glm_operator.api.load import parse
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr
from tests.e2e.conftest import Cluster

NAME = "glm-5-3"


def _seed() -> dict[str, Any]:
    return load_cr(EXAMPLES / "glm-5.3-pd.yaml")


def _expected_children(cr: dict[str, Any]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in render(parse(cr)).objects}


def _versions(children: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {key: obj["metadata"]["resourceVersion"] for key, obj in children.items()}


def _condition(cr: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in cr["status"]["conditions"] if c["type"] == ctype)


async def _create_seed(cluster: Cluster) -> dict[str, Any]:
    created = await cluster.create(_seed())
    cr = await cluster.wait_reconciled(NAME, 1)
    await cluster.wait_for(
        lambda: _has_all(cluster, _expected_children(_seed())), "all children", timeout=15
    )
    assert created["metadata"]["uid"] == cr["metadata"]["uid"]
    return cr


async def _has_all(cluster: Cluster, wanted: set[tuple[str, str]]) -> bool:
    return wanted <= set(await cluster.children(NAME))


async def test_create_applies_every_child_with_an_owner_reference(cluster: Cluster) -> None:
    cr = await _create_seed(cluster)
    children = await cluster.children(NAME)
    assert set(children) == _expected_children(_seed())
    for obj in children.values():
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref["uid"] == cr["metadata"]["uid"] and ref["controller"] is True
    status = cr["status"]
    assert status["endpoint"] == "http://glm-5-3-epp.default.svc:80"
    capacity = status["capacity"]
    assert capacity["maxContextTokens"] == 1048576 and capacity["maxContextSource"] == "spec"
    assert capacity["kvBytesPerToken"] == 54_728 and capacity["kvPerGpu"] == "15.0Gi"
    assert capacity["decode"]["maxConcurrentAtMaxContext"] == 8 == capacity["maxConcurrentAtMaxContext"]
    assert capacity["prefill"]["maxRequestTokens"] > 1048576
    planned = _condition(cr, "Planned")
    assert planned["status"] == "True" and planned["reason"] == "Planned"
    assert "max context 1,048,576 tokens" in planned["message"]
    assert status["prefill"] == {"replicas": 1, "readyReplicas": 0}
    assert _condition(cr, "Ready")["status"] == "False"
    assert _condition(cr, "Progressing")["reason"] == "RollingOut"
    assert "kopf" not in status, "kopf bookkeeping must live in annotations"
    # no finalizer: deleting a CR never waits for the operator (children go by garbage collection)
    assert not cr["metadata"].get("finalizers")


async def test_ready_when_workloads_report_ready(cluster: Cluster) -> None:
    await _create_seed(cluster)
    apps = client.AppsV1Api(cluster.api)
    rolled_out = {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1}
    # the decode engine is ready but still on an old template: not Ready yet
    for name in ("glm-5-3-prefill", "glm-5-3-decode"):
        status = {**rolled_out, "currentRevision": "r1", "updateRevision": "r2" if "decode" in name else "r1"}
        await cluster.call(apps.patch_namespaced_stateful_set_status, name, "default", {"status": status})
    await cluster.call(apps.patch_namespaced_deployment_status, "glm-5-3-epp", "default", {"status": rolled_out})

    async def rolling() -> bool:
        ready = _condition(await cluster.cr(NAME), "Ready")
        return "decode 1/1 (rolling out)" in ready["message"]

    await cluster.wait_for(rolling, "decode reported as rolling out")
    assert _condition(await cluster.cr(NAME), "Ready")["status"] == "False"
    await cluster.call(apps.patch_namespaced_stateful_set_status, "glm-5-3-decode", "default",
                       {"status": {"currentRevision": "r2"}})

    async def ready() -> bool:
        cr = await cluster.cr(NAME)
        return _condition(cr, "Ready")["status"] == "True"

    await cluster.wait_for(ready, "Ready=True")
    cr = await cluster.cr(NAME)
    assert _condition(cr, "Progressing") ["reason"] == "Complete"
    assert cr["status"]["decode"] == {"replicas": 1, "readyReplicas": 1}


async def test_changing_one_field_changes_only_the_affected_child(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.settle()
    before = _versions(await cluster.children(NAME))
    await cluster.patch_spec(NAME, {"decode": {"replicas": 2}})
    await cluster.wait_reconciled(NAME, 2)
    await cluster.settle()
    after = await cluster.children(NAME)
    changed = {key for key, rv in _versions(after).items() if before[key] != rv}
    assert changed == {("StatefulSet", "glm-5-3-decode")}
    assert after[("StatefulSet", "glm-5-3-decode")]["spec"]["replicas"] == 2


async def test_removing_a_field_reapplies_the_affected_children(cluster: Cluster) -> None:
    cr = _seed()
    cr["spec"]["scheduling"] = {"priorityClassName": "gpu-high"}
    await cluster.create(cr)
    await cluster.wait_reconciled(NAME, 1)
    await cluster.wait_for(lambda: _has_all(cluster, _expected_children(_seed())), "all children")
    await cluster.settle()
    before = await cluster.children(NAME)
    await cluster.patch_spec(NAME, {"scheduling": None})
    await cluster.wait_reconciled(NAME, 2)
    await cluster.settle()
    after = await cluster.children(NAME)
    changed = {key for key, obj in after.items()
               if obj["metadata"]["resourceVersion"] != before[key]["metadata"]["resourceVersion"]}
    assert changed == {("StatefulSet", "glm-5-3-prefill"), ("StatefulSet", "glm-5-3-decode")}
    annotation = "serving.glm.dev/applied-hash"
    for key in changed:
        assert after[key]["metadata"]["annotations"][annotation] != before[key]["metadata"]["annotations"][annotation]


async def test_router_change_touches_only_router_objects(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.settle()
    before = _versions(await cluster.children(NAME))
    await cluster.patch_spec(NAME, {"router": {"endpointPicker": {"scorers": {"queue": 3}}}})
    await cluster.wait_reconciled(NAME, 2)
    await cluster.settle()
    changed = {key for key, rv in _versions(await cluster.children(NAME)).items() if before[key] != rv}
    # the config changes, and the EPP Deployment rolls because its pod template carries the config hash
    assert changed == {("ConfigMap", "glm-5-3-epp"), ("Deployment", "glm-5-3-epp")}


async def test_invalid_update_changes_no_child_and_says_why(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.settle()
    before = _versions(await cluster.children(NAME))
    writes_before = len(cluster.emulator.request_log)
    await cluster.patch_spec(NAME, {"prefill": {"parallelism": {"decodeContext": 4}}})
    cr = await cluster.wait_reconciled(NAME, 2)
    ready = _condition(cr, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert "spec.prefill.parallelism.decodeContext" in ready["message"]
    assert "Fix:" in ready["message"]
    assert _condition(cr, "Degraded")["status"] == "True"
    await cluster.settle()
    assert _versions(await cluster.children(NAME)) == before
    child_writes = [r for r in cluster.emulator.write_requests(writes_before)
                    if not r.path.endswith("/status") and "/glmdeployments/" not in r.path and "/events" not in r.path]
    assert child_writes == []

    async def has_event() -> bool:
        events = await cluster.call(client.CoreV1Api(cluster.api).list_namespaced_event, "default")
        return any(e.reason == "InvalidSpec" and e.involved_object.name == NAME for e in events.items)

    await cluster.wait_for(has_event, "an InvalidSpec Event")

    # an unchanged invalid CR is not re-reported: resyncs make no writes and post no Events
    await cluster.settle()
    mark = len(cluster.emulator.request_log)
    await asyncio.sleep(2.5)
    assert cluster.emulator.write_requests(mark) == []

    # fixing the spec recovers without touching anything else
    await cluster.patch_spec(NAME, {"prefill": {"parallelism": {"decodeContext": 8}}})
    cr = await cluster.wait_reconciled(NAME, 3)
    assert _condition(cr, "Ready")["reason"] == "ReplicasNotReady"
    assert _condition(cr, "Degraded")["status"] == "False"


async def test_child_deleted_or_edited_by_hand_is_restored(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.settle()
    apps = client.AppsV1Api(cluster.api)
    old = (await cluster.children(NAME))[("StatefulSet", "glm-5-3-prefill")]
    await cluster.call(apps.delete_namespaced_stateful_set, "glm-5-3-prefill", "default")

    async def recreated() -> bool:
        sts = (await cluster.children(NAME)).get(("StatefulSet", "glm-5-3-prefill"))
        return sts is not None and sts["metadata"]["uid"] != old["metadata"]["uid"]

    await cluster.wait_for(recreated, "the deleted StatefulSet to come back")

    await cluster.call(apps.patch_namespaced_stateful_set, "glm-5-3-decode", "default", {"spec": {"replicas": 5}})

    async def reverted() -> bool:
        sts = (await cluster.children(NAME))[("StatefulSet", "glm-5-3-decode")]
        return bool(sts["spec"]["replicas"] == 1)

    await cluster.wait_for(reverted, "the hand-edited StatefulSet to be restored")


async def test_unchanged_resync_makes_no_writes(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.settle()
    mark = len(cluster.emulator.request_log)
    # GLM_RESYNC_SECONDS=1 in tests: this window spans at least two resync timer runs
    await asyncio.sleep(2.5)
    reads = cluster.emulator.request_log[mark:]
    assert any(r.method == "GET" and "statefulsets" in r.path for r in reads), "the resync did not run"
    assert cluster.emulator.write_requests(mark) == []


async def test_removing_a_gateway_prunes_the_httproute(cluster: Cluster) -> None:
    cr = _seed()
    cr["spec"]["router"]["gateway"] = {"name": "inference-gateway"}
    await cluster.create(cr)
    await cluster.wait_reconciled(NAME, 1)
    await cluster.wait_for(lambda: _has_all(cluster, {("HTTPRoute", NAME)}), "the HTTPRoute")
    await cluster.patch_spec(NAME, {"router": {"gateway": None}})
    await cluster.wait_reconciled(NAME, 2)

    async def pruned() -> bool:
        return ("HTTPRoute", NAME) not in await cluster.children(NAME)

    await cluster.wait_for(pruned, "the HTTPRoute to be pruned")


async def test_deleting_the_cr_cleans_up_its_children(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.call(client.CustomObjectsApi(cluster.api).delete_namespaced_custom_object,
                       "serving.glm.dev", "v1alpha1", "default", "glmdeployments", NAME)

    async def gone() -> bool:
        return not await cluster.children(NAME)

    await cluster.wait_for(gone, "garbage collection of the children")


async def test_temporary_api_error_is_retried_and_kopf_state_lives_in_annotations(cluster: Cluster) -> None:
    cluster.emulator.inject_failure("PATCH", "statefulsets", status=500, times=2)
    await cluster.create(_seed())
    seen_progress: list[dict[str, Any]] = []

    async def retried() -> bool:
        cr = await cluster.cr(NAME)
        annotations = cr["metadata"].get("annotations") or {}
        progress = {k: v for k, v in annotations.items() if k.startswith("serving.glm.dev/") and "retries" in v}
        if progress:
            seen_progress.append(progress)
        return bool(seen_progress) and ("StatefulSet", "glm-5-3-decode") in await cluster.children(NAME)

    await cluster.wait_for(retried, "a retried reconcile", timeout=20)
    assert any('"retries": 1' in v or '"retries":1' in v for p in seen_progress for v in p.values()), seen_progress
    cr = await cluster.wait_reconciled(NAME, 1)
    await cluster.wait_for(lambda: _has_all(cluster, _expected_children(_seed())), "all children after retry")
    assert "kopf" not in (await cluster.cr(NAME))["status"]
    assert cr["status"]["observedGeneration"] == 1
