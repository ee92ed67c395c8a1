"""The capacity plan as plain data: what ``glmctl plan`` prints (table or ``--json``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from glm_operator.api.findings import Finding
from glm_operator.api.quantity import GIB
from glm_operator.plan.capacity import Plan, RolePlan


def layout_label(rp: RolePlan) -> str:
    """The vLLM layout in the field's notation, e.g. ``PCP8×DCP8×EP8``, ``DP8×EP8`` or ``TP8×DCP8``."""
    parts = [f"{label}{size}" for label, size in (("TP", rp.tensor), ("PCP", rp.prefill_context),
                                                  ("DCP", rp.decode_context), ("DP", rp.data)) if size > 1]
    if rp.expert_parallel:
        parts.append(f"EP{rp.tensor * rp.prefill_context * rp.data}")
    return "×".join(parts) or "TP1"


def role_report(plan: Plan, rp: RolePlan) -> dict[str, Any]:
    """One role's numbers (bytes, tokens, FLOP/B) as a JSON-able dict with camelCase keys."""
    tokens = plan.max_model_len
    return {
        "layout": layout_label(rp),
        "replicas": rp.replicas,
        "gpusPerEngine": rp.tensor * rp.prefill_context * rp.data,
        "weightsBytesPerGpu": int(rp.weights_bytes_per_gpu),
        "kvBudgetBytesPerGpu": int(rp.kv_budget_bytes_per_gpu),
        "kvBytesPerTokenPerGpu": rp.kv_bytes_per_token_per_gpu,
        "requestBytesPerGpuAtMaxModelLen": int(rp.request_bytes_per_gpu(tokens)),
        "maxContextTokens": rp.max_context_tokens,
        "maxConcurrentAtMaxContext": rp.concurrency(tokens),
        "hiSparse": rp.hisparse,
        "hostPoolBytesPerRank": rp.host_pool_bytes_per_rank,
        "offloadPrefixTokensPerRank": rp.offload_prefix_tokens_per_rank,
        "hostMemoryBytes": rp.host_memory_bytes,
        "sparseMlaFlopPerByte": rp.flop_per_byte,
        "indexerCrossoverTokens": rp.indexer_crossover_tokens,
        "dcpAllgatherBytesPerLayer": {str(k): v for k, v in rp.dcp_allgather_bytes_per_layer.items()},
    }


def _json_value(value: Any) -> Any:
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def plan_report(plan: Plan, findings: list[Finding]) -> dict[str, Any]:
    """The whole plan and the rules' findings as a JSON-able dict (``glmctl plan --json``)."""
    return {
        "model": plan.model.name,
        "gpu": plan.gpu.name,
        "gpuMemoryBytes": plan.gpu.hbm_bytes,
        "quantization": plan.quantization,
        "kvBytesPerToken": {"total": plan.kv.total, "mla": plan.kv.mla, "indexer": plan.kv.indexer},
        "maxModelLen": plan.max_model_len,
        "maxModelLenSource": plan.max_model_len_source,
        "modelMaxContextTokens": plan.model_max_context,
        "ridgeFlopPerByte": plan.ridge_flop_per_byte,
        "roles": {name: role_report(plan, rp) for name, rp in plan.roles.items()},
        "findings": plan_report_findings(findings),
    }


def plan_report_findings(findings: list[Finding]) -> list[dict[str, Any]]:
    """Findings as JSON-able dicts (severity, field, value, message, fix)."""
    return [
        {"severity": str(f.severity), "field": f.field, "value": _json_value(f.value), "message": f.message,
         "fix": f.fix}
        for f in findings
    ]


def gib(n_bytes: float) -> str:
    """Bytes as ``15.0 GiB``."""
    return f"{n_bytes / GIB:,.1f} GiB"


def table_rows(plan: Plan) -> list[tuple[str, list[str]]]:
    """Rows of the ``glmctl plan`` table: (label, one cell per role)."""
    roles = list(plan.roles.values())
    tokens = plan.max_model_len

    def row(label: str, cell: Callable[[RolePlan], str]) -> tuple[str, list[str]]:
        return label, [cell(rp) for rp in roles]

    def optional(value: float | None, fmt: str) -> str:
        return "—" if value is None else format(value, fmt)

    def allgather(rp: RolePlan) -> str:
        return ", ".join(f"{v / 1e6:.1f} MB at {k // 1024}K" for k, v in rp.dcp_allgather_bytes_per_layer.items())

    return [
        row("layout (GPUs per engine)", lambda rp: f"{layout_label(rp)} ({rp.tensor * rp.prefill_context * rp.data})"),
        row("weights / GPU", lambda rp: gib(rp.weights_bytes_per_gpu)),
        row("KV budget / GPU", lambda rp: gib(rp.kv_budget_bytes_per_gpu)),
        row("KV bytes / token / GPU", lambda rp: f"{rp.kv_bytes_per_token_per_gpu:,.0f} B"),
        row(f"one {tokens:,}-token request / GPU", lambda rp: gib(rp.request_bytes_per_gpu(tokens))),
        row("max context (one request)", lambda rp: f"{rp.max_context_tokens:,}"),
        row(f"concurrency at {tokens:,} tokens", lambda rp: f"{rp.concurrency(tokens):,}"),
        row("HiSparse host pool / rank", lambda rp: gib(rp.host_pool_bytes_per_rank) if rp.hisparse else "—"),
        row("CPU offload prefix tokens / rank", lambda rp: f"{rp.offload_prefix_tokens_per_rank:,}"
            + (" (indexer KV only)" if rp.hisparse else "")),
        row("pod host memory", lambda rp: gib(rp.host_memory_bytes)),
        row("sparse-MLA FLOP/B (decode)", lambda rp: optional(rp.flop_per_byte, ".0f")),
        row("indexer > sparse MLA from (tokens)", lambda rp: optional(rp.indexer_crossover_tokens, ",.0f")),
        row("DCP all-gather / layer / 2K step", lambda rp: allgather(rp) or "—"),
    ]
