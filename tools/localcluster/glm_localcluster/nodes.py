"""Fake GPU nodes for kwok: Node objects whose capacity is that of an 8×H200 (or B200) server.

kwok takes over every Node (``--manage-all-nodes``): it marks them Ready, keeps their heartbeat and runs the pods the
scheduler binds to them (Running, then Ready). Capacity is set at create time and kept; nothing else reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from glm_operator.plan.profiles import GPU_PRODUCT_LABEL, GPUS

#: The RDMA extended resource the fake nodes advertise (what an RDMA device plugin would, e.g. Mellanox's).
RDMA_RESOURCE: Final = "rdma/ib"
#: The taint GPU nodes commonly carry (GPU operator / cloud node pools); engine pods tolerate it.
GPU_TAINT: Final = {"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present"}


@dataclass(frozen=True)
class NodeSpec:
    """One fake node: ``gpus`` of ``product`` (a key of ``glm_operator.plan.profiles.GPUS``, or None for CPU)."""

    name: str
    product: str | None = "H200"
    gpus: int = 8
    memory: str = "2Ti"
    cpu: str = "192"
    rdma: int = 8


#: Six 8×H200 servers (seed system A takes one per role; the README's GitOps overlay three more), one 8×B200
#: (examples/kimi-k2.6-dcp8-b200.yaml) and one CPU node for the routers.
DEFAULT_NODES: Final = (
    *(NodeSpec(f"h200-{i}") for i in range(6)),
    NodeSpec("b200-0", product="B200"),
    NodeSpec("cpu-0", product=None, gpus=0, memory="256Gi", cpu="32", rdma=0),
)


def node_object(spec: NodeSpec) -> dict[str, Any]:
    """The Node to create for ``spec`` (labels as GPU feature discovery sets them; kwok's annotation)."""
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
    capacity: dict[str, str] = {
        "cpu": spec.cpu, "memory": spec.memory, "pods": "110", "ephemeral-storage": "7Ti",
    }
    taints: list[dict[str, str]] = []
    if spec.product is not None:
        labels[GPU_PRODUCT_LABEL] = GPUS[spec.product].node_label_value
        labels["nvidia.com/gpu.count"] = str(spec.gpus)
        capacity["nvidia.com/gpu"] = str(spec.gpus)
        taints.append(dict(GPU_TAINT))
    if spec.rdma:
        capacity[RDMA_RESOURCE] = str(spec.rdma)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": taints},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }
