"""The port plan of an engine pod: every port each container listens on, checked for collisions.

All containers of a pod share one network namespace, so the vLLM HTTP port, the P/D sidecar
port, the NIXL side-channel range and vLLM's internal defaults must all differ.

Sources:
- NIXL side channel: ``VLLM_NIXL_SIDE_CHANNEL_PORT`` is the base; each worker of an engine uses
  ``base + dp_rank * tp_size + tp_rank`` (vLLM docs PR #24249, ``reference/llm-d.md`` §3.2), so an
  engine reserves ``world_size`` consecutive ports (one per worker; with TP1 this is base + DP rank).
- llm-d layout: the pool target port serves (prefill vLLM, decode sidecar); decode vLLM listens
  behind the sidecar (``reference/llm-d.md`` §1.4).
- vLLM internal defaults: ``--data-parallel-rpc-port`` 29550 and torch.distributed's 29500.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from glm_operator.api.spec import GLMDeploymentSpec, RoleSpec

VLLM_CONTAINER: Final = "vllm"
SIDECAR_CONTAINER: Final = "routing-proxy"

#: Ports vLLM opens inside the pod that the spec cannot move: ``(port, what)``.
INTERNAL_PORTS: Final = ((29500, "torch.distributed default master port"), (29550, "vLLM --data-parallel-rpc-port"))


@dataclass(frozen=True)
class PortUse:
    """One port in a pod.

    Attributes:
        name: the containerPort name (IANA service name, at most 15 characters), or ``""`` for
            ports that are not exposed.
        port: the number.
        container: the container that listens.
        field: the CR field that sets it (for error messages).
    """

    name: str
    port: int
    container: str
    field: str


@dataclass(frozen=True)
class RolePorts:
    """The port plan of one role's pod.

    Attributes:
        serving: the port the InferencePool targets (vLLM on prefill/engine, the sidecar on decode).
        vllm: the vLLM HTTP port (API, /health, /metrics).
        nixl: the NIXL side-channel ports, one per worker (empty when KV transfer is off).
        uses: every port of the pod, including internal ones, for collision checks.
    """

    serving: int
    vllm: int
    nixl: tuple[int, ...]
    uses: tuple[PortUse, ...]


def role_ports(spec: GLMDeploymentSpec, role_name: str, role: RoleSpec) -> RolePorts:
    """Compute the port plan of ``role_name``'s pod (no validation; see :func:`collisions`)."""
    has_sidecar = role_name == "decode"
    serving = spec.ports.serving
    vllm = spec.ports.engine if has_sidecar else serving
    uses = []
    if has_sidecar:
        uses.append(PortUse("http", serving, SIDECAR_CONTAINER, "spec.ports.serving"))
        uses.append(PortUse("vllm", vllm, VLLM_CONTAINER, "spec.ports.engine"))
    else:
        uses.append(PortUse("http", vllm, VLLM_CONTAINER, "spec.ports.serving"))
    nixl: tuple[int, ...] = ()
    if spec.mode == "disaggregated" and spec.kv_transfer.connector == "nixl":
        base = spec.kv_transfer.side_channel_base_port
        nixl = tuple(base + worker for worker in range(role.parallelism.world_size))
        uses.extend(
            PortUse(f"nixl-{worker}", port, VLLM_CONTAINER, "spec.kvTransfer.sideChannelBasePort")
            for worker, port in enumerate(nixl)
        )
    uses.extend(PortUse("", port, VLLM_CONTAINER, f"(internal: {what})") for port, what in INTERNAL_PORTS)
    return RolePorts(serving=serving, vllm=vllm, nixl=nixl, uses=tuple(uses))


def collisions(plan: RolePorts) -> list[tuple[PortUse, PortUse]]:
    """Pairs of port uses in one pod that share a number (first use, colliding use)."""
    seen: dict[int, PortUse] = {}
    clashes = []
    for use in plan.uses:
        if use.port in seen:
            clashes.append((seen[use.port], use))
        else:
            seen[use.port] = use
    return clashes
