"""The status names why pods do not start: a role that is not ready shows its first pod problem."""

from __future__ import annotations

from typing import Any

from glm_operator.api.load import parse
from glm_operator.observe import status as observe
from glm_operator.render import names
from glm_operator.render.manifests import render
from tests.conftest import seed

NOW = "2026-01-01T00:00:00Z"
PVC_MESSAGE = (
    '0/4 nodes are available: persistentvolumeclaim "hf-cache" not found. preemption: 0/4 nodes are available: '
    "4 Preemption is not helpful for scheduling."
)


def _workload(ready: int) -> dict[str, Any]:
    return {"metadata": {"generation": 1}, "status": {
        "observedGeneration": 1, "readyReplicas": ready, "updatedReplicas": ready,
        "currentRevision": "r1", "updateRevision": "r1"}}


def _pod(name: str, role: str, *, scheduled: tuple[str, str] | None = None,
         waiting: tuple[str, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
    if scheduled is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": scheduled[0],
                                 "message": scheduled[1]}]
    if waiting is not None:
        status["containerStatuses"] = [{"name": "vllm", "state": {"waiting": {"reason": waiting[0],
                                                                              "message": waiting[1]}}}]
    return {"metadata": {"name": name, "labels": {names.LABEL_COMPONENT: role}}, "status": status}


def _status(ready: dict[str, int], pods: list[dict[str, Any]]) -> dict[str, Any]:
    desired = {"prefill": 1, "decode": 2, "router": 1}
    return observe.healthy_status(
        previous={}, generation=1, workloads={role: (_workload(ready[role]), desired[role]) for role in desired},
        endpoint="e", plan=render(parse(seed())).plan, warnings=[], now=NOW, pods=pods,
    )


def _condition(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == ctype)


def test_unschedulable_pod_is_named_in_ready_and_briefly_in_progressing() -> None:
    pods = [_pod("glm-5-3-decode-1", "decode", scheduled=("Unschedulable", "other")),
            _pod("glm-5-3-decode-0", "decode", scheduled=("Unschedulable", PVC_MESSAGE)),
            _pod("glm-5-3-prefill-0", "prefill"), _pod("glm-5-3-epp-x", "router")]
    status = _status({"prefill": 0, "decode": 0, "router": 1}, pods)
    ready = _condition(status, "Ready")
    assert ready["status"] == "False"
    assert ready["message"] == (
        f"waiting for prefill 0/1, decode 0/2 (pod glm-5-3-decode-0 Unschedulable: {PVC_MESSAGE})")
    progressing = _condition(status, "Progressing")
    assert progressing["message"] == (
        "ready: prefill 0/1, decode 0/2, router 1/1; pod glm-5-3-decode-0 Unschedulable")


def test_long_scheduler_messages_are_truncated() -> None:
    long = "0/400 nodes are available: " + ", ".join(f"{i} Insufficient nvidia.com/gpu" for i in range(100))
    status = _status({"prefill": 0, "decode": 2, "router": 1},
                     [_pod("glm-5-3-prefill-0", "prefill", scheduled=("Unschedulable", long))])
    message = _condition(status, "Ready")["message"]
    detail = message.split("Unschedulable: ", 1)[1].rstrip(")")
    assert observe.POD_MESSAGE_LIMIT - 5 < len(detail) <= observe.POD_MESSAGE_LIMIT and detail.endswith("...")
    assert detail.startswith("0/400 nodes are available: 0 Insufficient nvidia.com/gpu")


def test_waiting_containers_are_problems_but_a_normal_start_is_not() -> None:
    pods = [_pod("glm-5-3-prefill-0", "prefill", waiting=("ContainerCreating", "")),
            _pod("glm-5-3-decode-0", "decode", waiting=("ImagePullBackOff", 'Back-off pulling image "x"')),
            _pod("glm-5-3-epp-x", "router", waiting=("CrashLoopBackOff", "back-off 10s restarting failed"))]
    message = _condition(_status({"prefill": 0, "decode": 0, "router": 0}, pods), "Ready")["message"]
    assert message == (
        "waiting for prefill 0/1, "
        'decode 0/2 (pod glm-5-3-decode-0 ImagePullBackOff: container vllm: Back-off pulling image "x"), '
        "router 0/1 (pod glm-5-3-epp-x CrashLoopBackOff: container vllm: back-off 10s restarting failed)")
    assert observe.pod_problem(_pod("p", "decode", waiting=("CreateContainerConfigError", ""))) == (
        "CreateContainerConfigError", "container vllm")


def test_problems_of_ready_roles_are_not_reported() -> None:
    pods = [_pod("glm-5-3-decode-0", "decode", waiting=("CrashLoopBackOff", "restarting"))]  # a stale pod entry
    status = _status({"prefill": 1, "decode": 2, "router": 1}, pods)
    assert _condition(status, "Ready")["message"] == "ready: prefill 1/1, decode 2/2, router 1/1"
    assert _condition(status, "Progressing")["message"] == "ready: prefill 1/1, decode 2/2, router 1/1"


def test_without_pods_the_messages_are_unchanged() -> None:
    status = _status({"prefill": 0, "decode": 0, "router": 1}, [])
    assert _condition(status, "Ready")["message"] == "waiting for prefill 0/1, decode 0/2"
    assert _condition(status, "Progressing")["message"] == "ready: prefill 0/1, decode 0/2, router 1/1"
