"""Compatibility rules: every rule is a pure function ``(spec) -> list[Finding]``.

Each finding names a CR field, the value, what breaks and the fix. :func:`check` runs them all.
The rules encode failures seen in the field (``docs/DESIGN.md``, "What the operator must get right")
and vLLM's own start-up assertions, so a bad CR is refused before a GPU is touched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from glm_operator.api import reasons
from glm_operator.api.findings import Finding, Severity
from glm_operator.api.quantity import GIB, parse_bytes
from glm_operator.api.spec import GLMDeploymentSpec, RoleSpec
from glm_operator.plan.capacity import (
    ACTIVATION_RESERVE_BYTES,
    GPU_MEMORY_UTILIZATION,
    Plan,
    RolePlan,
    plan_deployment,
    quantization_from_name,
)
from glm_operator.plan.engine_args import operator_args
from glm_operator.plan.flag_table import check_extra_args, flag_table, owned_dests
from glm_operator.plan.flags import extra_arg_value, human_readable_int
from glm_operator.plan.layout import needs_eager_pcp
from glm_operator.plan.memory import host_memory_bytes, host_pool_bytes_per_rank, offload_bytes_per_rank
from glm_operator.plan.ports import collisions, role_ports
from glm_operator.plan.profiles import GPU_PRODUCT_LABEL, GPUS, MODELS, model_profile
from glm_operator.plan.report import gib as _gib
from glm_operator.versions import VLLM_VERSION

Rule = Callable[[GLMDeploymentSpec], list[Finding]]

def rendered_flags(spec: GLMDeploymentSpec, role: RoleSpec) -> dict[str, str]:
    """Flags the renderer emits or depends on for this role only (beyond :data:`MANAGED_FLAGS`), with the fix.

    HiSparse in vLLM 0.32.0 requires the hybrid KV cache manager and ``--scheduler-reserve-full-isl``
    (``VllmConfig.__post_init__``), so switching either off is refused.
    """
    flags = {}
    if role.hi_sparse is not None and role.hi_sparse.enabled:
        flags["--disable-hybrid-kv-cache-manager"] = "HiSparse requires the hybrid KV cache manager"
        flags["--scheduler-reserve-full-isl"] = "HiSparse requires --scheduler-reserve-full-isl (the default)"
    if needs_eager_pcp(spec, role):
        flags["--compilation-config"] = "sparse-MLA PCP without DCP runs with cudagraph_mode NONE (set by the operator)"
    if role.force_sparse_mqa:
        flags["--attention-config"] = "set forceSparseMQA: false to pass your own attention config"
    if role.parallelism.decode_context > 1 and role.dcp_comm_backend is not None:
        flags["--dcp-comm-backend"] = "set dcpCommBackend"
    return flags


#: Environment variables the operator owns on every vLLM container.
MANAGED_ENV: dict[str, str] = {
    "PYTHONHASHSEED": "set spec.hashSeed (it must be equal on every engine)",
    "VLLM_NIXL_SIDE_CHANNEL_HOST": "the operator sets it to the pod IP",
    "VLLM_NIXL_SIDE_CHANNEL_PORT": "set spec.kvTransfer.sideChannelBasePort",
    "UCX_TLS": "set spec.kvTransfer.ucx.tls",
    "UCX_NET_DEVICES": "set spec.kvTransfer.ucx.netDevices",
}

#: Environment variables no engine pod may set: they break the GPU assignment of the device plugin or inject code
#: into every vLLM process.
REFUSED_ENV: dict[str, str] = {
    "CUDA_VISIBLE_DEVICES": "the device plugin assigns the pod's GPUs; renumbering them hides GPUs from vLLM's "
    "ranks (world size > visible GPUs) or maps two ranks to one GPU",
    "NVIDIA_VISIBLE_DEVICES": "the NVIDIA container runtime would expose GPUs the scheduler did not give the pod",
    "NVIDIA_DRIVER_CAPABILITIES": "the container runtime needs compute,utility for CUDA and NVML",
    "CUDA_DEVICE_ORDER": "vLLM's ranks map to devices in the device plugin's order",
    "ROCR_VISIBLE_DEVICES": "it hides devices from the engine's ranks",
    "HIP_VISIBLE_DEVICES": "it hides devices from the engine's ranks",
    "LD_PRELOAD": "it injects a shared library into every vLLM process",
    "LD_LIBRARY_PATH": "it replaces the image's CUDA/NCCL library search path",
    "LD_AUDIT": "it injects a shared library into every vLLM process",
    "PYTHONPATH": "it injects Python modules ahead of the image's vLLM",
    "PYTHONSTARTUP": "it runs code in every Python process",
    "PYTHONHOME": "it replaces the image's Python installation",
    "PYTHONINSPECT": "it stops Python processes at an interactive prompt instead of exiting",
    "VLLM_PLUGINS": "it selects which plugins (code) every vLLM process loads; the image decides",
    "NCCL_NET_PLUGIN": "it loads a shared library into every NCCL communicator",
}


def _roles(spec: GLMDeploymentSpec) -> Iterator[tuple[str, RoleSpec]]:
    yield from spec.roles().items()


def parallel_layout(spec: GLMDeploymentSpec) -> list[Finding]:
    """vLLM's ``ParallelConfig._validate_parallel_config`` plus one engine per node.

    PCP>1 with DP>1 is rejected; PCP=1 needs ``tp % dcp == 0``; PCP>1 needs
    ``dcp ∈ {1, pcp, tp·pcp}``; ``a2a`` needs DCP>1; TP×PCP×DP GPUs must fit one node.
    """
    out = []
    for name, role in _roles(spec):
        p = role.parallelism
        base = f"spec.{name}.parallelism"
        if p.prefill_context > 1 and p.data > 1:
            out.append(Finding(
                f"{base}.data", p.data,
                f"prefill context parallelism (prefillContext={p.prefill_context}) with data parallelism is not "
                "supported: vLLM up to 0.29 refuses it ('PCP does not support data parallelism yet') and the "
                "pinned 0.32.0 has no tested PCP×DP path",
                "set data: 1 (scale with replicas) or prefillContext: 1",
            ))
        if p.prefill_context > 1 and p.decode_context > 1 and not model_profile(spec).sparse_mla:
            out.append(Finding(
                f"{base}.decodeContext", p.decode_context,
                f"vLLM 0.32.0 runs PCP together with DCP for sparse MLA models only; {spec.model.profile} is "
                "dense MLA ('MRV2 PCP + DCP supports sparse MLA models only')",
                "set decodeContext: 1, or prefillContext: 1 and shard the KV cache with tensor + decodeContext",
            ))
        if p.prefill_context == 1 and p.tensor % p.decode_context != 0:
            out.append(Finding(
                f"{base}.decodeContext", p.decode_context,
                f"with prefillContext 1, DCP reuses the TP ranks: tensor ({p.tensor}) must be a multiple of "
                f"decodeContext ({p.decode_context})",
                f"use a decodeContext that divides {p.tensor}, e.g. {p.tensor}",
            ))
        allowed = {1, p.prefill_context, p.tensor * p.prefill_context}
        if p.prefill_context > 1 and p.decode_context not in allowed:
            out.append(Finding(
                f"{base}.decodeContext", p.decode_context,
                f"with prefillContext {p.prefill_context} and tensor {p.tensor}, vLLM accepts decodeContext "
                f"in {sorted(allowed)} only",
                f"use one of {sorted(allowed)}",
            ))
        heads = model_profile(spec).attention_heads
        if heads % p.tensor != 0:
            out.append(Finding(
                f"{base}.tensor", p.tensor,
                f"tensor parallelism splits the {heads} attention heads of {spec.model.profile}; {p.tensor} does "
                "not divide them",
                f"use a tensor size that divides {heads} (1, 2, 4 or 8)",
            ))
        if role.dcp_comm_backend == "a2a" and p.decode_context <= 1:
            out.append(Finding(
                f"spec.{name}.dcpCommBackend", "a2a", "the a2a DCP backend needs decodeContext > 1",
                "remove dcpCommBackend or raise decodeContext",
            ))
        if p.world_size > spec.gpu.per_node:
            out.append(Finding(
                f"{base}", f"tensor={p.tensor} prefillContext={p.prefill_context} data={p.data}",
                f"an engine needs tensor×prefillContext×data = {p.world_size} GPUs but a node has "
                f"{spec.gpu.per_node} (spec.gpu.perNode); multi-node engines are not supported",
                f"reduce the product to at most {spec.gpu.per_node} and scale with replicas",
            ))
        elif p.world_size < spec.gpu.per_node:
            out.append(Finding(
                f"{base}", f"tensor={p.tensor} prefillContext={p.prefill_context} data={p.data}",
                f"an engine uses {p.world_size} of the node's {spec.gpu.per_node} GPUs; the rest stay idle "
                "because one engine owns one node",
                "raise the parallel sizes to fill the node, or lower spec.gpu.perNode",
                Severity.WARNING,
            ))
    return out


def mode_roles(spec: GLMDeploymentSpec) -> list[Finding]:
    """Roles must match the mode: ``prefill``/``decode`` when disaggregated, ``engine`` when aggregated."""
    out = []
    if spec.mode == "aggregated":
        for name in ("prefill", "decode"):
            if getattr(spec, name) is not None:
                out.append(Finding(
                    f"spec.{name}", "(set)",
                    f"mode aggregated runs one engine role; {name} is a disaggregated-only role",
                    f"move its settings to spec.engine and remove spec.{name}, or set mode: disaggregated",
                ))
        # only what differs from the default: the API server fills every default in, and nobody set those
        kv, defaults = spec.kv_transfer, type(spec.kv_transfer)()
        ignored = sorted(
            (info.alias or name) for name, info in type(kv).model_fields.items()
            if name in kv.model_fields_set and getattr(kv, name) != getattr(defaults, name)
            and not (name == "connector" and kv.connector == "none")  # what the fix asks for
        )
        if "kv_transfer" in spec.model_fields_set and ignored:
            out.append(Finding(
                "spec.kvTransfer", ", ".join(ignored),
                "mode aggregated runs one engine with no prefill→decode KV transfer: NIXL, its side channel, UCX and "
                "RDMA settings are not rendered",
                "remove spec.kvTransfer (or set only connector: none)", Severity.WARNING,
            ))
        engine = spec.engine
        if engine is not None and engine.hi_sparse is not None and engine.hi_sparse.enabled:
            out.append(Finding(
                "spec.engine.hiSparse", "enabled",
                "HiSparse is a decode-role feature of prefill/decode disaggregation",
                "remove hiSparse, or set mode: disaggregated and put it on spec.decode",
            ))
    else:
        if spec.engine is not None:
            out.append(Finding(
                "spec.engine", "(set)", "engine is the single role of mode aggregated",
                "use spec.prefill and spec.decode, or set mode: aggregated",
            ))
        if spec.kv_transfer.connector != "nixl":
            out.append(Finding(
                "spec.kvTransfer.connector", spec.kv_transfer.connector,
                "disaggregated prefill/decode moves the KV cache with NIXL; without it decode cannot start "
                "from the prefill's KV",
                "set kvTransfer.connector: nixl (or mode: aggregated)",
            ))
    return out


def hisparse_placement(spec: GLMDeploymentSpec) -> list[Finding]:
    """HiSparse lives on decode only and is composed with NIXL; its offload excludes cpuOffloadPerRank."""
    out = []
    roles = spec.roles()
    prefill = roles.get("prefill")
    if prefill is not None and prefill.hi_sparse is not None and prefill.hi_sparse.enabled:
        out.append(Finding(
            "spec.prefill.hiSparse", "enabled", "HiSparse serves sparse-MLA decode; prefill has no use for it",
            "remove spec.prefill.hiSparse (use cpuOffloadPerRank for prefix reuse)",
        ))
    decode = roles.get("decode")
    if decode is not None and decode.hi_sparse is not None and decode.hi_sparse.enabled:
        if spec.kv_transfer.connector != "nixl":
            out.append(Finding(
                "spec.decode.hiSparse", "enabled",
                "in disaggregated mode HiSparse lands the prefill's KV through NIXL (a MultiConnector child "
                "beside NixlConnector); without NIXL decode never receives it",
                "set kvTransfer.connector: nixl",
            ))
        if decode.parallelism.decode_context > 1:
            out.append(Finding(
                "spec.decode.parallelism.decodeContext", decode.parallelism.decode_context,
                "HiSparse does not support decode context parallelism (vLLM 0.32.0 refuses it at start-up)",
                "set decodeContext: 1 (scale decode with data parallelism), or hiSparse.enabled: false",
            ))
        if decode.cpu_offload_per_rank is not None:
            out.append(Finding(
                "spec.decode.cpuOffloadPerRank", decode.cpu_offload_per_rank,
                "with HiSparse the CPU offload beside it is hiSparse.offloadPerRank",
                "remove cpuOffloadPerRank, or set hiSparse.enabled: false for plain CPU offload",
            ))
        if not model_profile(spec).sparse_mla:
            out.append(Finding(
                "spec.decode.hiSparse", "enabled", f"HiSparse needs a sparse-MLA model; {spec.model.profile} is not",
                "set hiSparse.enabled: false",
            ))
        if spec.kv_cache.dtype not in ("fp8", "fp8_ds_mla"):
            out.append(Finding(
                "spec.kvCache.dtype", spec.kv_cache.dtype,
                "HiSparse stores the 656-byte fp8_ds_mla row (FP8_DS_MLA_ROW_BYTES in vLLM's hisparse code); it has "
                "no BF16 layout",
                "set kvCache.dtype: fp8, or decode.hiSparse.enabled: false",
            ))
    return out


def pool_sizes(spec: GLMDeploymentSpec) -> list[Finding]:
    """KV pools are at least 1 GiB; ``0`` turns a CPU offload off; a HiSparse host pool cannot be 0
    (use ``enabled: false``). A size under 1 GiB is a typo (``512M``)."""
    out = []
    for name, role in _roles(spec):
        sizes = []  # (field, size, may be zero)
        if role.cpu_offload_per_rank is not None:
            sizes.append(("cpuOffloadPerRank", role.cpu_offload_per_rank, True))
        if role.hi_sparse is not None and role.hi_sparse.enabled:
            sizes += [("hiSparse.hostPoolPerRank", role.hi_sparse.host_pool_per_rank, False),
                      ("hiSparse.offloadPerRank", role.hi_sparse.offload_per_rank, True)]
        for field, size, may_be_zero in sizes:
            n_bytes = parse_bytes(size)
            if n_bytes < GIB and not (may_be_zero and n_bytes == 0):
                out.append(Finding(
                    f"spec.{name}.{field}", size, "a KV pool below 1 GiB holds almost nothing",
                    "use at least 1Gi (e.g. 48Gi)" + (", or 0 to turn the offload off" if may_be_zero
                                                      else ", or hiSparse.enabled: false"),
                ))
    return out


def sanity(spec: GLMDeploymentSpec) -> list[Finding]:
    """Values that parse but cannot work: tiny engine memory or /dev/shm, all scorers off, a node
    selector that contradicts ``gpu.product``; and a warning when NIXL has no RDMA device."""
    out = []
    for name, role in _roles(spec):
        for field, size in (("memory", role.resources.memory), ("shm", role.resources.shm)):
            if parse_bytes(size) < GIB:
                out.append(Finding(
                    f"spec.{name}.resources.{field}", size,
                    "an engine loading a ~750 GB checkpoint with NCCL needs far more" if field == "memory"
                    else "NCCL needs /dev/shm (llm-d guides use 16–20 GiB)",
                    "use at least 1Gi (defaults: memory 256Gi, shm 32Gi)",
                ))
    weights = spec.router.endpoint_picker.scorers
    if weights.prefix_cache == weights.queue == weights.kv_cache_utilization == 0:
        out.append(Finding(
            "spec.router.endpointPicker.scorers", "all 0", "with every scorer weight 0 the router picks blindly",
            "give at least one scorer a positive weight (defaults: prefixCache 2, queue 1, kvCacheUtilization 1)",
        ))
    if GPU_PRODUCT_LABEL in spec.scheduling.node_selector:
        out.append(Finding(
            "spec.scheduling.nodeSelector", {GPU_PRODUCT_LABEL: spec.scheduling.node_selector[GPU_PRODUCT_LABEL]},
            f"{GPU_PRODUCT_LABEL} is set from spec.gpu.product; a second value would override it silently",
            f"remove it and set spec.gpu.product (one of {sorted(GPUS)})",
        ))
    if spec.mode == "disaggregated" and spec.kv_transfer.rdma is None:
        out.append(Finding(
            "spec.kvTransfer.rdma", None,
            "no RDMA device is requested: NIXL/UCX moves the KV cache between nodes over TCP unless the pods "
            "see RDMA devices some other way",
            "set kvTransfer.rdma (e.g. resource: rdma/ib) where the cluster has an RDMA device plugin",
            Severity.WARNING,
        ))
    return out


def model_limits(spec: GLMDeploymentSpec) -> list[Finding]:
    """Context, block size, MTP and sparse-MQA settings the model profile allows; the model name
    must not belong to another profile's family."""
    out = []
    profile = model_profile(spec)
    others = [p.name for p in MODELS.values()
              if p.name != profile.name and re.search(p.name_pattern, spec.model.name, re.IGNORECASE)]
    if others and not re.search(profile.name_pattern, spec.model.name, re.IGNORECASE):
        out.append(Finding(
            "spec.model.profile", profile.name,
            f"model.name {spec.model.name!r} looks like {others[0]}, but the profile is {profile.name}; the planner "
            "and the context limit would be wrong",
            f"set model.profile: {others[0]}",
        ))
    explicit = "profile" in spec.model.model_fields_set
    if not others and not explicit and not re.search(profile.name_pattern, spec.model.name, re.IGNORECASE):
        out.append(Finding(
            "spec.model.profile", None,
            f"model.name {spec.model.name!r} matches no built-in profile; it is planned as {profile.name} (the "
            "default), so layers, KV bytes and weights may be wrong",
            f"set model.profile (one of {', '.join(MODELS)}) or profile: custom with model.architecture",
            Severity.WARNING,
        ))
    known_family = bool(profile.name_pattern) and re.search(profile.name_pattern, spec.model.name, re.IGNORECASE)
    if spec.model.quantization is None and quantization_from_name(spec.model.name) is None and not known_family:
        out.append(Finding(
            "spec.model.quantization", None,
            f"model.name {spec.model.name!r} names no weight format and no known model family; planning for "
            f"{profile.default_quantization} weights",
            "set model.quantization (fp8, nvfp4, int4 or bf16) to the checkpoint's format", Severity.WARNING,
        ))
    if spec.model.max_model_len is not None and spec.model.max_model_len > profile.max_context_tokens:
        out.append(Finding(
            "spec.model.maxModelLen", spec.model.max_model_len,
            f"{profile.name} supports at most {profile.max_context_tokens:,} tokens of context",
            f"use a value <= {profile.max_context_tokens}",
        ))
    if profile.sparse_mla and spec.kv_cache.block_size != profile.sparse_mla_block_size:
        out.append(Finding(
            "spec.kvCache.blockSize", spec.kv_cache.block_size,
            f"the sparse-MLA kernels (FLASHMLA_SPARSE) of {profile.name} accept block size "
            f"{profile.sparse_mla_block_size} only",
            f"use blockSize: {profile.sparse_mla_block_size}",
        ))
    if spec.speculative.method == "mtp" and profile.mtp_layers == 0:
        out.append(Finding(
            "spec.speculative.method", "mtp", f"{profile.name} has no MTP layer", "set speculative.method: none",
        ))
    for name, role in _roles(spec):
        if role.force_sparse_mqa and not profile.sparse_mla:
            out.append(Finding(
                f"spec.{name}.forceSparseMQA", True, f"{profile.name} has no sparse-MLA attention",
                "set forceSparseMQA: false",
            ))
    return out


def pd_consistency(spec: GLMDeploymentSpec) -> list[Finding]:
    """P/D rule of vLLM 0.32.0's NIXL connector: an engine is either fully replicated or fully
    DCP-sharded, ``decodeContext ∈ {1, max(tensor, prefillContext)}`` (``VllmConfig.__post_init__``:
    "A NIXL side is either fully replicated or fully DCP-sharded; MLA only"). Block size, KV dtype,
    hash seed and speculative settings are single spec-level values, equal on both roles by
    construction.
    """
    out: list[Finding] = []
    if spec.mode != "disaggregated":
        return out
    for name, role in _roles(spec):
        p = role.parallelism
        transfer = max(p.tensor, p.prefill_context)
        if p.decode_context not in (1, transfer):
            out.append(Finding(
                f"spec.{name}.parallelism.decodeContext", p.decode_context,
                f"NIXL P/D needs decodeContext 1 or the transfer parallel size max(tensor, prefillContext) = "
                f"{transfer}",
                f"use decodeContext: 1 or {transfer}",
            ))
    return out


def escape_hatches(spec: GLMDeploymentSpec) -> list[Finding]:
    """``extraArgs`` are read as the vLLM release's own parser reads them (:mod:`~glm_operator.plan.flag_table`):
    positional words, unknown flags, wrong values, flags the operator renders (derived from
    :func:`~glm_operator.plan.engine_args.operator_args`) and multi-node flags are refused. ``env`` may not set
    what the operator sets, nor what breaks GPU assignment or injects code (:data:`REFUSED_ENV`)."""
    out = []
    table = flag_table(VLLM_VERSION)
    for name, role in _roles(spec):
        owned = owned_dests(operator_args(spec, name, role, role_ports(spec, name, role)), table)
        for option, fix in rendered_flags(spec, role).items():
            flag = table.lookup(option)
            if flag is not None:
                owned[flag.dest] = fix
        out += check_extra_args(role.extra_args, table, owned, f"spec.{name}.extraArgs")
        protected = dict(MANAGED_ENV)
        if role.parallelism.prefill_context > 1 or (role.hi_sparse is not None and role.hi_sparse.enabled):
            protected["VLLM_USE_V2_MODEL_RUNNER"] = (
                "prefill context parallelism and HiSparse run only on vLLM's Model Runner V2"
            )
        seen: set[str] = set()
        for i, env in enumerate(role.env):
            if env.name in seen:
                out.append(Finding(
                    f"spec.{name}.env[{i}].name", env.name, f"{env.name} appears twice in env",
                    "keep one entry per name (the API server refuses duplicates)",
                ))
            seen.add(env.name)
            if env.name in protected:
                out.append(Finding(
                    f"spec.{name}.env[{i}].name", env.name, f"{env.name} is set by the operator",
                    f"remove it: {protected[env.name]}",
                ))
            elif env.name in REFUSED_ENV:
                out.append(Finding(
                    f"spec.{name}.env[{i}].name", env.name, f"{env.name} may not be set on an engine pod: "
                    f"{REFUSED_ENV[env.name]}", "remove it",
                ))
    return out


def port_plan(spec: GLMDeploymentSpec) -> list[Finding]:
    """No two ports of one pod may be equal (serving, vLLM, NIXL side channel range, internal)."""
    out = []
    for name, role in _roles(spec):
        plan = role_ports(spec, name, role)
        if plan.nixl and plan.nixl[-1] > 65535:
            out.append(Finding(
                "spec.kvTransfer.sideChannelBasePort", spec.kv_transfer.side_channel_base_port,
                f"the NIXL side channel of the {name} pod needs {len(plan.nixl)} ports from the base, up to "
                f"{plan.nixl[-1]}, beyond 65535",
                f"use a base port of at most {65535 - len(plan.nixl) + 1}",
            ))
        for first, clash in collisions(plan):
            culprit = clash if clash.field.startswith("spec.") else first
            other = first if culprit is clash else clash
            field_values = {
                "spec.ports.serving": spec.ports.serving,
                "spec.ports.engine": spec.ports.engine,
                "spec.kvTransfer.sideChannelBasePort": spec.kv_transfer.side_channel_base_port,
            }
            out.append(Finding(
                culprit.field, field_values.get(culprit.field, culprit.port),
                f"port {clash.port} of the {name} pod is used twice: {first.name or first.field} "
                f"({first.container}) and {clash.name or clash.field} ({clash.container}); the NIXL side "
                f"channel takes {len(plan.nixl)} ports from the base",
                f"choose ports that do not overlap {other.field}",
            ))
    return out


CAPACITY = reasons.CAPACITY_EXCEEDED




def _layout_value(rp: RolePlan) -> str:
    return (f"tensor {rp.tensor}, prefillContext {rp.prefill_context}, decodeContext {rp.decode_context}, "
            f"data {rp.data}")


def _context_fixes(spec: GLMDeploymentSpec, plan: Plan, rp: RolePlan) -> tuple[str | None, str]:
    """How to make a role hold a longer context: ``(layout or pool change, or None; the maxModelLen
    change)``. The target is ``maxModelLen``, or the model's limit when it is not set. Every suggested
    layout passes the layout and P/D rules."""
    wanted = spec.model.max_model_len or plan.model_max_context
    limit = max(0, rp.max_context_tokens // spec.kv_cache.block_size * spec.kv_cache.block_size)
    verb = "lower maxModelLen" if spec.model.max_model_len else "set maxModelLen"
    lower = f"{verb} to at most {limit:,}" if limit >= 1024 else verb
    world = rp.tensor * rp.prefill_context
    if rp.hisparse:
        needed = wanted * plan.kv.mla
        return (f"raise {rp.role}.hiSparse.hostPoolPerRank (a {wanted:,}-token request has {_gib(needed)} of MLA "
                "rows)", lower)
    if rp.data > 1 and rp.role != "decode" and plan.model.sparse_mla:
        n = rp.data * rp.tensor
        return (f"give one request all {n} GPUs: {rp.role}.parallelism tensor 1, prefillContext {n}, "
                f"decodeContext {n}, data 1", lower)
    if rp.decode_context < world:
        return (f"set {rp.role}.parallelism.decodeContext: {world} (DCP shards the KV by token)", lower)
    if rp.role == "decode" and plan.model.sparse_mla and rp.tensor == 1 and rp.prefill_context == 1:
        return ("enable decode.hiSparse (MLA rows in a host pool per DP rank)", lower)
    return (None, lower)


def _context_fix(spec: GLMDeploymentSpec, plan: Plan, rp: RolePlan) -> str:
    """Both fixes of :func:`_context_fixes` joined with "or"."""
    change, lower = _context_fixes(spec, plan, rp)
    return f"{change}, or {lower}" if change else lower


def kv_capacity(spec: GLMDeploymentSpec) -> list[Finding]:
    """Weights fit every GPU, and ``maxModelLen`` fits the KV budget of *every* role: one request of
    that length must fit the prefill engine and one decode rank (on the GPU, or through the
    HiSparse host pool). Without ``maxModelLen`` the planner derives the longest context that fits
    (a warning says so when it is below the model's limit)."""
    plan = plan_deployment(spec)
    out: list[Finding] = []
    if any(rp.kv_cache_memory_bytes is not None and rp.kv_cache_memory_bytes <= 0 for rp in plan.roles.values()):
        return out  # memory_flags refuses the flag; no plan to check
    for name, rp in plan.roles.items():
        if rp.kv_cache_memory_bytes is not None and rp.free_bytes_per_gpu > 0 \
                and rp.kv_cache_memory_bytes > rp.free_bytes_per_gpu:
            found = extra_arg_value(spec.roles()[name].extra_args, "--kv-cache-memory-bytes")
            index = found[0] if found else 0
            out.append(Finding(
                f"spec.{name}.extraArgs[{index}]", spec.roles()[name].extra_args[index],
                f"{name}: --kv-cache-memory-bytes asks for {_gib(rp.kv_cache_memory_bytes)} of KV per GPU; after "
                f"{_gib(rp.weights_bytes_per_gpu)} of weights and a {_gib(ACTIVATION_RESERVE_BYTES)} activation "
                f"reserve a {plan.gpu.name} GPU has {_gib(rp.free_bytes_per_gpu)}",
                f"use at most {int(rp.free_bytes_per_gpu // GIB)}G, or drop the flag and let vLLM size the cache",
                reason=CAPACITY,
            ))
        elif not rp.weights_fit:
            out.append(Finding(
                f"spec.{name}.parallelism", _layout_value(rp),
                f"{name}: the {plan.quantization} weights of {plan.model.name} need {_gib(rp.weights_bytes_per_gpu)} "
                f"per GPU; a {plan.gpu.name} GPU has {_gib(rp.usable_bytes_per_gpu)} usable "
                f"({rp.gpu_memory_utilization} of {_gib(plan.gpu.hbm_bytes)}) minus a "
                f"{_gib(ACTIVATION_RESERVE_BYTES)} activation reserve, which leaves nothing for the KV cache",
                (f"raise --gpu-memory-utilization in {name}.extraArgs (vLLM's default is {GPU_MEMORY_UTILIZATION}), "
                 "or " if rp.gpu_memory_utilization < GPU_MEMORY_UTILIZATION else "")
                + "use a checkpoint with fewer bytes per weight (model.quantization: fp8 or nvfp4) or a GPU with more "
                "memory; the routed experts are already split over all of the engine's GPUs", reason=CAPACITY,
            ))
    if out:
        return out
    tokens = plan.max_model_len
    if plan.max_model_len_source == "spec":
        for name, rp in plan.roles.items():
            if rp.max_context_tokens >= tokens:
                continue
            total = tokens * plan.kv.total
            where = "rank" if rp.data > 1 else "engine"
            subject = name if name == where else f"{name} {where}"
            if rp.hisparse:
                detail = (f"{_gib(rp.request_bytes_per_gpu(tokens))} on the GPU beyond the "
                          f"{_gib(rp.host_pool_bytes_per_rank)} host pool (indexer KV, hot buffer and MLA rows "
                          "that do not fit the pool)")
            elif rp.decode_context > 1:
                detail = f"{_gib(total / rp.decode_context)} per GPU under DCP{rp.decode_context}"
            else:
                detail = "on every GPU" + (" (PCP replicates the KV after its all-gather)"
                                           if rp.prefill_context > 1 else "")
            pool = "" if rp.hisparse else " and no host pool"
            out.append(Finding(
                "spec.model.maxModelLen", tokens,
                f"{subject}: a {tokens:,}-token request needs {_gib(total)} of KV ({plan.kv.total:,} B/token), "
                f"{detail}; a GPU has {_gib(rp.kv_budget_bytes_per_gpu)} for KV after "
                f"{_gib(rp.weights_bytes_per_gpu)} of weights{pool}, so one {where} holds at most "
                f"{rp.max_context_tokens:,} tokens",
                _context_fix(spec, plan, rp), reason=CAPACITY,
            ))
    elif plan.max_model_len_source == "kvBudget":
        limiting = min(plan.roles.values(), key=lambda r: r.max_context_tokens)
        if plan.max_model_len < 1024:
            out.append(Finding(
                "spec.model.maxModelLen", None,
                f"{limiting.role}: the KV budget holds only {limiting.max_context_tokens:,} tokens per request",
                _context_fix(spec, plan, limiting), reason=CAPACITY,
            ))
        else:
            change, _ = _context_fixes(spec, plan, limiting)
            out.append(Finding(
                "spec.model.maxModelLen", None,
                f"not set: rendering {plan.max_model_len:,} tokens, the longest context the {limiting.role} KV "
                f"budget holds; {plan.model.name} allows {plan.model_max_context:,}",
                f"set maxModelLen: {plan.max_model_len} to make this explicit"
                + (f"; for the model's full context {change}" if change else ""),
                Severity.WARNING, reason=CAPACITY,
            ))
    return out


def memory_flags(spec: GLMDeploymentSpec) -> list[Finding]:
    """``--gpu-memory-utilization`` / ``--kv-cache-memory-bytes`` in ``extraArgs`` feed the plan, so
    they must parse the way vLLM parses them."""
    out = []
    for name, role in _roles(spec):
        found = extra_arg_value(role.extra_args, "--gpu-memory-utilization")
        if found:
            try:
                ok = 0 < float(found[1]) <= 1
            except ValueError:
                ok = False
            if not ok:
                out.append(Finding(f"spec.{name}.extraArgs[{found[0]}]", role.extra_args[found[0]],
                                   "--gpu-memory-utilization takes a fraction of GPU memory in (0, 1]",
                                   "write e.g. --gpu-memory-utilization=0.92"))
        found = extra_arg_value(role.extra_args, "--kv-cache-memory-bytes")
        if found:
            try:
                problem = "" if human_readable_int(found[1]) > 0 else "a KV cache of 0 bytes holds nothing"
            except ValueError as exc:
                problem = str(exc)
            if problem:
                out.append(Finding(f"spec.{name}.extraArgs[{found[0]}]", role.extra_args[found[0]],
                                   f"--kv-cache-memory-bytes: {problem}", "write e.g. --kv-cache-memory-bytes=12G"))
    return out


#: Host memory of a common 8-GPU H200/B200 node (DGX H200: 2 TiB). Without ``gpu.nodeMemory`` a pod
#: asking for more gets a warning, not an error.
TYPICAL_NODE_MEMORY_BYTES = 2 * 1024 * GIB


def host_memory(spec: GLMDeploymentSpec) -> list[Finding]:
    """With ``gpu.nodeMemory`` declared, every engine pod's memory request (engine + KV pools of all
    DP ranks + ``/dev/shm``) must fit one node; a pod that asks for more never schedules. Without it,
    a pod above :data:`TYPICAL_NODE_MEMORY_BYTES` gets a warning."""
    out = []
    if spec.gpu.node_memory is None:
        for name, role in _roles(spec):
            need = host_memory_bytes(spec, role)
            if need > TYPICAL_NODE_MEMORY_BYTES:
                out.append(Finding(
                    f"spec.{name}.resources.memory", role.resources.memory,
                    f"the {name} pod requests {_gib(need)} of host memory (KV pools of {role.parallelism.data} DP "
                    "rank(s) included); 8-GPU H200/B200 nodes commonly have 2 TiB",
                    "set gpu.nodeMemory to your nodes' allocatable memory so the planner checks it, or shrink the KV "
                    "pools (cpuOffloadPerRank / hiSparse)", Severity.WARNING,
                ))
        return out
    node = parse_bytes(spec.gpu.node_memory)
    for name, role in _roles(spec):
        need = host_memory_bytes(spec, role)
        if need <= node:
            continue
        pools = role.parallelism.data * (host_pool_bytes_per_rank(role) + offload_bytes_per_rank(role))
        out.append(Finding(
            f"spec.{name}.resources.memory", role.resources.memory,
            f"the {name} pod requests {_gib(need)} of host memory (engine {role.resources.memory} + KV pools "
            f"{_gib(pools)} for {role.parallelism.data} DP rank(s) + /dev/shm {role.resources.shm}); a node has "
            f"{spec.gpu.node_memory} (gpu.nodeMemory)",
            f"shrink the KV pools (cpuOffloadPerRank / hiSparse) or resources.memory by {_gib(need - node)}, or "
            "correct gpu.nodeMemory",
            reason=CAPACITY,
        ))
    return out


RULES: tuple[Rule, ...] = (
    mode_roles,
    parallel_layout,
    hisparse_placement,
    pool_sizes,
    sanity,
    model_limits,
    pd_consistency,
    escape_hatches,
    port_plan,
    memory_flags,
    host_memory,
    kv_capacity,
)


def check(spec: GLMDeploymentSpec) -> list[Finding]:
    """Run every rule; return all findings (errors and warnings), errors first."""
    findings = [finding for rule in RULES for finding in rule(spec)]
    return sorted(findings, key=lambda f: f.severity != Severity.ERROR)


def errors(findings: list[Finding]) -> list[Finding]:
    """Only the findings that block rendering."""
    return [f for f in findings if f.severity == Severity.ERROR]
