"""vLLM command-line arguments and ``--kv-transfer-config`` of one engine role (the renderer emits them as they
are; the rules derive the flags ``extraArgs`` may not repeat from :func:`operator_args`).

Flags are those of vLLM 0.32.0 (``reference/vllm.md`` §1): ``--prefill-context-parallel-size``,
``--decode-context-parallel-size``, ``--dcp-comm-backend``, ``--data-parallel-size``,
``--enable-expert-parallel``, ``--kv-cache-dtype``, ``--block-size``, ``--max-model-len``,
``--speculative-config``, ``--attention-config``, ``--compilation-config`` and
``--kv-transfer-config``.

KV connectors are always composed explicitly: NIXL first (the first connector that reports
matched tokens wins a load), then HiSparse and/or CPU offloading, inside a ``MultiConnector``.
The ``--kv-offloading-size`` shortcut is never used because it *overwrites* the NIXL connector
(``VllmConfig._post_init_kv_transfer_config``, ``reference/vllm.md`` §1.7).
"""

from __future__ import annotations

import json
from typing import Any

from glm_operator.api.quantity import GIB, parse_bytes
from glm_operator.api.spec import GLMDeploymentSpec, RoleSpec
from glm_operator.plan.capacity import plan_deployment
from glm_operator.plan.layout import needs_eager_pcp
from glm_operator.plan.ports import RolePorts

#: Seconds vLLM drains in-flight requests on SIGTERM (``--shutdown-timeout``; 0 aborts them, vLLM
#: 0.32.0 ``v1/engine/core.py``). The pod's terminationGracePeriodSeconds adds 30 s to exit.
SHUTDOWN_DRAIN_S = 90

#: Where the weights volume is mounted (PVC source).
WEIGHTS_MOUNT = "/models"

#: vLLM roles of the NIXL connector per engine role (vLLM ≥ 0.23: explicit producer/consumer).
KV_ROLES = {"prefill": "kv_producer", "decode": "kv_consumer"}


def compact_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: stable, shell-safe flag values."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def served_name(spec: GLMDeploymentSpec) -> str:
    """``--served-model-name``: ``model.servedName``, else the profile name (for ``profile: custom``,
    the last part of the repository id, lower-cased)."""
    if spec.model.served_name:
        return spec.model.served_name
    return spec.model.name.rsplit("/", 1)[-1].lower() if spec.model.profile == "custom" else spec.model.profile


def max_model_len(spec: GLMDeploymentSpec) -> int:
    """``--max-model-len`` in tokens: ``model.maxModelLen``, else the planner's value — the model's
    limit, or the longest context every role's KV budget holds when that is shorter."""
    return plan_deployment(spec).max_model_len


def kv_transfer_config(spec: GLMDeploymentSpec, role_name: str, role: RoleSpec) -> dict[str, Any] | None:
    """The ``--kv-transfer-config`` object of a role, or ``None`` when the role needs no connector.

    Prefill (disaggregated): ``NixlConnector`` producer [+ ``OffloadingConnector``].
    Decode: ``NixlConnector`` consumer [+ ``HiSparseConnector`` + ``OffloadingConnector``] or
    [+ ``OffloadingConnector``]. Aggregated: ``OffloadingConnector`` alone when CPU offload is set.
    Sizes: ``cpu_bytes_to_use`` in bytes per DP rank (an engine's connector instance serves one DP
    rank); ``host_pool_gib`` in GiB per DP rank (vLLM ``docs/design/hisparse.md``).
    """
    connectors: list[dict[str, Any]] = []
    top_role = "kv_both"
    if spec.mode == "disaggregated" and spec.kv_transfer.connector == "nixl":
        top_role = KV_ROLES[role_name]
        connectors.append({
            "kv_connector": "NixlConnector",
            "kv_role": top_role,
            "kv_load_failure_policy": spec.kv_transfer.load_failure_policy,
            "kv_buffer_device": "cuda",
            "kv_connector_extra_config": {"backends": ["UCX"]},
        })
    hisparse = role.hi_sparse if role.hi_sparse is not None and role.hi_sparse.enabled else None
    if hisparse is not None:
        connectors.append({
            "kv_connector": "HiSparseConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"host_pool_gib": _gib_number(parse_bytes(hisparse.host_pool_per_rank))},
        })
    offload = hisparse.offload_per_rank if hisparse is not None else role.cpu_offload_per_rank
    if offload is not None and parse_bytes(offload) > 0:  # "0" turns the offload off
        connectors.append({
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            # No "block_size": vLLM 0.32.0 offloads one KV block per chunk by default, and under DCP a
            # block spans block_size x DCP tokens, so an explicit 64 would be refused at start-up
            # (offloading/config.py: chunk must be a multiple of the DCP block span).
            "kv_connector_extra_config": {"cpu_bytes_to_use": parse_bytes(offload)},
        })
    if not connectors:
        return None
    if len(connectors) == 1:
        return connectors[0]
    config: dict[str, Any] = {
        "kv_connector": "MultiConnector",
        "kv_role": top_role,
        "kv_connector_extra_config": {"connectors": connectors},
    }
    if top_role != "kv_both":
        config["kv_load_failure_policy"] = spec.kv_transfer.load_failure_policy
    return config


def _gib_number(n_bytes: int) -> int | float:
    value = n_bytes / GIB
    return int(value) if value.is_integer() else round(value, 3)


def vllm_args(spec: GLMDeploymentSpec, role_name: str, role: RoleSpec, ports: RolePorts) -> list[str]:
    """The argument list after ``vllm serve`` for one role, in a fixed order: :func:`operator_args`, then the
    user's ``extraArgs``."""
    return [*operator_args(spec, role_name, role, ports), *role.extra_args]


def operator_args(spec: GLMDeploymentSpec, role_name: str, role: RoleSpec, ports: RolePorts) -> list[str]:
    """The arguments the operator renders for one role (the model, then flags); parallel sizes above 1 are
    passed explicitly (TP always). Every flag here is owned: ``extraArgs`` may not repeat it."""
    p = role.parallelism
    model = WEIGHTS_MOUNT if spec.model.source.pvc is not None else spec.model.name
    args = [
        model,
        "--served-model-name", served_name(spec),
        "--port", str(ports.vllm),
        "--tensor-parallel-size", str(p.tensor),
    ]
    if p.prefill_context > 1:
        args += ["--prefill-context-parallel-size", str(p.prefill_context)]
    if p.decode_context > 1:
        args += ["--decode-context-parallel-size", str(p.decode_context)]
        if role.dcp_comm_backend is not None:
            args += ["--dcp-comm-backend", role.dcp_comm_backend]
    if p.data > 1:
        args += ["--data-parallel-size", str(p.data)]
    if p.expert:
        args.append("--enable-expert-parallel")
    args += [
        "--kv-cache-dtype", spec.kv_cache.dtype,
        "--block-size", str(spec.kv_cache.block_size),
        "--max-model-len", str(max_model_len(spec)),
    ]
    if spec.speculative.method == "mtp":
        args += ["--speculative-config", compact_json(
            {"method": "mtp", "num_speculative_tokens": spec.speculative.num_speculative_tokens}
        )]
    if role.force_sparse_mqa:
        args += ["--attention-config", compact_json({"sparse_mla_force_mqa": True})]
    if needs_eager_pcp(spec, role):
        # vLLM 0.32.0 (v1/worker/gpu/pcp_manager.py): "MRV2 sparse MLA PCP does not support CUDA graphs
        # yet" when DCP is 1. HiSparse needs nothing here: vLLM's default FULL_AND_PIECEWISE is its path.
        args += ["--compilation-config", compact_json({"cudagraph_mode": "NONE"})]
    transfer = kv_transfer_config(spec, role_name, role)
    if transfer is not None:
        args += ["--kv-transfer-config", compact_json(transfer)]
    args += ["--disable-access-log-for-endpoints", "/health,/metrics,/v1/models"]
    args += ["--shutdown-timeout", str(SHUTDOWN_DRAIN_S)]
    return args
