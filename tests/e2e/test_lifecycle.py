"""The operator end to end on the real local cluster: create, roll out, change, refuse, restore, delete.

The API server, its controllers (StatefulSet, Deployment, garbage collector) and kwok's fake H200 nodes are real:
Ready comes from pods that were scheduled and started, deletion from the garbage collector.
"""

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


def _expected_children(cluster: Cluster, cr: dict[str, Any]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in render(parse(cluster.with_namespace(cr))).objects}


def _versions(children: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {key: obj["metadata"]["resourceVersion"] for key, obj in children.items()}


def _condition(cr: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in cr["status"]["conditions"] if c["type"] == ctype)


async def _has_all(cluster: Cluster, wanted: set[tuple[str, str]]) -> bool:
    return wanted <= set(await cluster.children(NAME))


async def _create_seed(cluster: Cluster, cr: dict[str, Any] | None = None) -> dict[str, Any]:
    cr = cr or _seed()
    wanted = _expected_children(cluster, cr)
    created = await cluster.create(cr)
    await cluster.wait_reconciled(NAME, 1)
    await cluster.wait_for(lambda: _has_all(cluster, wanted), "all children")
    assert created["metadata"]["uid"] == (await cluster.cr(NAME))["metadata"]["uid"]
    return await cluster.cr(NAME)


async def _pods(cluster: Cluster, role: str) -> list[Any]:
    pods = await cluster.call(client.CoreV1Api(cluster.api).list_namespaced_pod, cluster.namespace,
                              label_selector=f"serving.glm.dev/deployment={NAME},serving.glm.dev/role={role}")
    return list(pods.items)


async def test_seed_becomes_ready_with_pods_running_on_fake_h200_nodes(cluster: Cluster) -> None:
    cr = await _create_seed(cluster)
    children = await cluster.children(NAME)
    assert set(children) == _expected_children(cluster, _seed())
    for obj in children.values():
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref["uid"] == cr["metadata"]["uid"] and ref["controller"] is True
    cr = await cluster.wait_condition(NAME, "Ready", "True")
    status = cr["status"]
    assert status["endpoint"] == f"http://glm-5-3-epp.{cluster.namespace}.svc:80"
    assert status["prefill"] == {"replicas": 1, "readyReplicas": 1}
    assert status["decode"] == {"replicas": 1, "readyReplicas": 1}
    assert _condition(cr, "Progressing")["reason"] == "Complete"
    assert _condition(cr, "Degraded")["status"] == "False"
    capacity = status["capacity"]
    assert capacity["kvBytesPerToken"] == 54_728 and capacity["kvPerGpu"] == "15.0Gi"
    assert "kopf" not in status, "kopf bookkeeping must live in annotations"
    assert not cr["metadata"].get("finalizers"), "deleting a CR must never wait for the operator"
    nodes = {}
    for role in ("prefill", "decode"):
        (pod,) = await _pods(cluster, role)
        assert pod.status.phase == "Running"
        assert pod.status.pod_ip.startswith("127.0.100."), pod.status.pod_ip
        nodes[role] = pod.spec.node_name
    assert len(set(nodes.values())) == 2 and all(n.startswith("h200-") for n in nodes.values()), \
        "one 8-GPU engine per H200 node"


async def test_kubectl_get_shows_the_printer_columns(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.wait_condition(NAME, "Ready", "True")
    out = cluster.stack.run("kubectl", ["get", "glmd", "-n", cluster.namespace, "-o", "wide"]).stdout
    header, row = out.splitlines()
    assert header.split() == ["NAME", "READY", "MODE", "MAX-CONTEXT", "KV/GPU", "ENDPOINT", "AGE"]
    assert row.split()[:5] == [NAME, "True", "disaggregated", "1048576", "15.0Gi"]
    explained = cluster.stack.run("kubectl", ["explain", "glmd.spec.kvCache.blockSize"]).stdout
    assert "blockSize" in explained


async def test_changed_engine_flag_rolls_the_statefulset_and_ready_follows(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.wait_condition(NAME, "Ready", "True")
    (old_pod,) = await _pods(cluster, "decode")
    await cluster.patch_spec(NAME, {"model": {"maxModelLen": 524288}})
    await cluster.wait_reconciled(NAME, 2)

    async def rolled() -> bool:
        pods = await _pods(cluster, "decode")
        return len(pods) == 1 and pods[0].metadata.uid != old_pod.metadata.uid and pods[0].status.phase == "Running"

    await cluster.wait_for(rolled, "a new decode pod from the StatefulSet controller")
    cr = await cluster.wait_condition(NAME, "Ready", "True")
    sts = (await cluster.children(NAME))[("StatefulSet", "glm-5-3-decode")]
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"]
    (new_pod,) = await _pods(cluster, "decode")
    assert new_pod.metadata.labels["controller-revision-hash"] == sts["status"]["updateRevision"]
    assert "--max-model-len 524288" in " ".join(new_pod.spec.containers[0].args or [])
    assert cr["status"]["capacity"]["maxContextTokens"] == 524288


async def test_changing_one_field_changes_only_the_affected_child(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.settle()
    before = _versions(await cluster.children(NAME))
    await cluster.patch_spec(NAME, {"router": {"endpointPicker": {"scorers": {"queue": 3}}}})
    await cluster.wait_reconciled(NAME, 2)
    await cluster.settle()
    after = _versions(await cluster.children(NAME))
    changed = {key for key, rv in after.items() if before[key] != rv and key[0] != "StatefulSet"}
    # the config changes, and the EPP Deployment rolls because its pod template carries the config hash
    assert changed == {("ConfigMap", "glm-5-3-epp"), ("Deployment", "glm-5-3-epp")}


async def test_server_side_apply_removes_fields_the_operator_stops_setting(cluster: Cluster) -> None:
    cr = _seed()
    cr["spec"]["scheduling"] = {"nodeSelector": {"topology.kubernetes.io/zone": "zone-a"}}
    await cluster.create(cr)
    await cluster.wait_reconciled(NAME, 1)

    def node_selector(children: dict[tuple[str, str], dict[str, Any]]) -> dict[str, str]:
        sts = children[("StatefulSet", "glm-5-3-prefill")]
        return dict(sts["spec"]["template"]["spec"].get("nodeSelector") or {})

    async def has_zone() -> bool:
        children = await cluster.children(NAME)
        return ("StatefulSet", "glm-5-3-prefill") in children and "topology.kubernetes.io/zone" in node_selector(
            children)

    await cluster.wait_for(has_zone, "the zone selector on the prefill StatefulSet")
    await cluster.patch_spec(NAME, {"scheduling": None})
    await cluster.wait_reconciled(NAME, 2)

    async def removed() -> bool:
        return "topology.kubernetes.io/zone" not in node_selector(await cluster.children(NAME))

    await cluster.wait_for(removed, "server-side apply to drop the selector the operator no longer sets")
    assert node_selector(await cluster.children(NAME)) == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    await cluster.wait_condition(NAME, "Ready", "True")


async def test_invalid_update_leaves_workloads_untouched_and_says_why(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.wait_condition(NAME, "Ready", "True")
    await cluster.settle()
    before = _versions(await cluster.children(NAME))
    mark = cluster.mark()
    # a change the CRD's CEL rules cannot judge (the KV of a 1M-token request no longer fits): the operator refuses it
    await cluster.patch_spec(NAME, {"decode": {"hiSparse": {"enabled": False}}})
    cr = await cluster.wait_reconciled(NAME, 2)
    planned = _condition(cr, "Planned")
    assert planned["status"] == "False" and planned["reason"] == "CapacityExceeded", planned
    assert "spec.model.maxModelLen" in planned["message"]
    assert cr["status"]["capacity"]["maxContextTokens"] == 1_048_576  # the plan the workloads run with
    await cluster.settle()
    assert _versions(await cluster.children(NAME)) == before
    child_writes = [e for e in cluster.writes(mark) if (e.get("objectRef") or {}).get("resource") != "glmdeployments"]
    assert child_writes == []

    async def has_event() -> bool:
        events = await cluster.call(client.CoreV1Api(cluster.api).list_namespaced_event, cluster.namespace)
        return any(e.reason in {"InvalidSpec", "CapacityExceeded"} and e.involved_object.name == NAME
                   for e in events.items)

    await cluster.wait_for(has_event, "a CapacityExceeded Event")
    # the pods of the last valid spec keep serving
    assert [p.status.phase for p in await _pods(cluster, "decode")] == ["Running"]

    await cluster.patch_spec(NAME, {"decode": {"hiSparse": {"enabled": True}}})
    cr = await cluster.wait_reconciled(NAME, 3)
    assert _condition(cr, "Planned")["status"] == "True"
    await cluster.wait_condition(NAME, "Ready", "True")


async def test_child_deleted_by_hand_is_restored_also_while_the_spec_is_invalid(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.settle()
    apps = client.AppsV1Api(cluster.api)
    old = (await cluster.children(NAME))[("StatefulSet", "glm-5-3-decode")]
    await cluster.patch_spec(NAME, {"decode": {"hiSparse": {"enabled": False}}})
    await cluster.wait_reconciled(NAME, 2)
    await cluster.call(apps.delete_namespaced_stateful_set, "glm-5-3-decode", cluster.namespace)

    async def recreated() -> bool:
        sts = (await cluster.children(NAME)).get(("StatefulSet", "glm-5-3-decode"))
        return sts is not None and sts["metadata"]["uid"] != old["metadata"]["uid"]

    await cluster.wait_for(recreated, "the deleted decode StatefulSet to come back from the last valid spec")
    restored = (await cluster.children(NAME))[("StatefulSet", "glm-5-3-decode")]
    assert restored["spec"]["template"]["spec"]["containers"][0]["args"] == \
        old["spec"]["template"]["spec"]["containers"][0]["args"]
    assert _condition(await cluster.cr(NAME), "Planned")["status"] == "False"


async def test_child_edited_by_hand_is_restored(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.settle()
    apps = client.AppsV1Api(cluster.api)
    await cluster.call(apps.patch_namespaced_stateful_set, "glm-5-3-decode", cluster.namespace,
                       {"spec": {"replicas": 5}})

    async def reverted() -> bool:
        sts = (await cluster.children(NAME))[("StatefulSet", "glm-5-3-decode")]
        return bool(sts["spec"]["replicas"] == 1)

    await cluster.wait_for(reverted, "the hand-edited StatefulSet to be restored")


async def test_idle_resync_makes_no_request(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.wait_condition(NAME, "Ready", "True")
    await cluster.settle()
    mark = cluster.mark()
    # GLM_RESYNC_SECONDS=1 in tests: this window spans at least two resyncs, served from the watch-fed index
    await asyncio.sleep(3)
    made = [(e["verb"], e["requestURI"]) for e in cluster.requests(mark) if e.get("verb") not in {"watch"}]
    assert made == []
    # the resync still runs: a child deleted now is restored without any event from the CR
    apps = client.AppsV1Api(cluster.api)
    await cluster.call(apps.delete_namespaced_deployment, "glm-5-3-epp", cluster.namespace)
    await cluster.wait_for(lambda: _has_all(cluster, {("Deployment", "glm-5-3-epp")}), "the EPP Deployment back")


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


async def test_the_garbage_collector_deletes_the_children_with_the_cr(cluster: Cluster) -> None:
    await _create_seed(cluster)
    await cluster.wait_condition(NAME, "Ready", "True")
    await cluster.call(client.CustomObjectsApi(cluster.api).delete_namespaced_custom_object,
                       "serving.glm.dev", "v1alpha1", cluster.namespace, "glmdeployments", NAME)

    async def gone() -> bool:
        return not await cluster.children(NAME) and not await _pods(cluster, "decode")

    await cluster.wait_for(gone, "garbage collection of the children and their pods")
