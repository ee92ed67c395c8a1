"""The capacity plan of a GLMDeployment: weights, KV budget, max context and concurrency per role.

Memory model of one GPU (vLLM's ``gpu_worker.determine_available_memory``):
``KV budget = gpu_memory_utilization × HBM − weights per GPU − activation/graph reserve``.

- :data:`GPU_MEMORY_UTILIZATION` = 0.9, vLLM's default ``--gpu-memory-utilization`` (the operator
  does not render the flag);
- :data:`ACTIVATION_RESERVE_BYTES` = 6.4 GiB: peak activations of the profile run, CUDA graphs,
  sampler, MTP draft buffers and the EP all-to-all buffers, which vLLM measures at start-up and the
  planner cannot. It is *calibrated*: with it, GLM-5.3-FP8 under EP8 on H200 (≈ 105 GiB of
  weights per GPU, 0.9 × 140.4 GiB usable) leaves ≈ 15.0 GiB per GPU for KV, the figure seed
  system A reports (``docs/SEED-FACTS.md``).

Per role (one engine = one pod = one node; ``data`` DP ranks of ``tensor × prefillContext`` GPUs):

- a request's KV lives on the GPUs of one DP rank, sharded by DCP (every GPU stores 1/DCP of each
  token), replicated across the rest of the rank (TP for MLA, PCP after the all-gather);
- with HiSparse (decode) the indexer KV and a per-request hot buffer stay on the GPU
  (:func:`hisparse_hot_buffer_bytes`); MLA rows fill resident GPU pages first and spill into the
  rank's pinned host pool (``hostPoolPerRank``; vLLM ``docs/design/hisparse.md``: "if the imported
  prefix fits in device pools, NIXL writes it to resident GPU pages, otherwise it goes to the host
  tier");
- a CPU KV offload (``cpuOffloadPerRank``) holds *prefixes* of finished requests for reuse; it
  never holds a running request's KV, so it adds nothing to max context or concurrency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

from glm_operator.api.quantity import GIB
from glm_operator.api.spec import GLMDeploymentSpec, RoleSpec
from glm_operator.plan import flops
from glm_operator.plan.flags import extra_arg_value, human_readable_int
from glm_operator.plan.kv import KvBytesPerToken, kv_bytes_per_token
from glm_operator.plan.memory import host_memory_bytes, host_pool_bytes_per_rank, offload_bytes_per_rank
from glm_operator.plan.profiles import GpuProfile, ModelProfile, gpu_profile, model_profile
from glm_operator.plan.weights import weight_bytes, weight_bytes_per_gpu

#: vLLM's default ``--gpu-memory-utilization``.
GPU_MEMORY_UTILIZATION: Final = 0.9
#: Activation/CUDA-graph/communication reserve per GPU in bytes (calibrated, see the module docstring).
ACTIVATION_RESERVE_BYTES: Final = int(6.4 * GIB)
#: HiSparse ``device_buffer_size`` default = 2 × index_topk; a request's hot region per layer is
#: ``round_up(device_buffer_size + 1, 128)`` rows (``reference/vllm.md`` §1.8).
HISPARSE_ROW_ALIGN: Final = 128
#: The seed's prefill-step shape for the DCP all-gather figures: a 2K-token chunk on top of 64K and
#: 248K cached tokens (``docs/SEED-FACTS.md``: +6 % per step up to 64K, +15 % at 248K).
ALLGATHER_CHUNK_TOKENS: Final = 2048
ALLGATHER_CACHED_TOKENS: Final = (65_536, 253_952)

MaxLenSource = Literal["spec", "model", "kvBudget"]


def hisparse_hot_buffer_bytes(model: ModelProfile, mla_row: int, mla_layers: int) -> int:
    """GPU bytes of one request's HiSparse hot buffer: round_up(2·top-k + 1, 128) MLA rows per layer
    (GLM-5.3: 4,224 rows × 656 B × 79 layers ≈ 219 MB)."""
    rows = -(-(2 * model.index_topk + 1) // HISPARSE_ROW_ALIGN) * HISPARSE_ROW_ALIGN
    return rows * mla_row * mla_layers


@dataclass(frozen=True)
class RolePlan:
    """The plan of one engine role.

    Attributes:
        role: ``prefill``, ``decode`` or ``engine``.
        replicas / tensor / prefill_context / decode_context / data: the layout.
        expert_parallel: ``--enable-expert-parallel``.
        weights_bytes_per_gpu: weight bytes one GPU holds.
        gpu_memory_utilization: the fraction of GPU memory vLLM may use (``--gpu-memory-utilization``
            in ``extraArgs``, else 0.9).
        usable_bytes_per_gpu: ``gpu_memory_utilization × HBM``.
        kv_budget_bytes_per_gpu: what is left for KV (negative: the weights do not fit), or exactly
            ``--kv-cache-memory-bytes`` when the role's ``extraArgs`` set it.
        kv_cache_memory_bytes: ``--kv-cache-memory-bytes`` from ``extraArgs`` (None when not set).
        kv_bytes_per_token_per_gpu: KV bytes one GPU stores per token of a request (total / DCP).
        hisparse: HiSparse is on (MLA rows may live in the host pool).
        host_pool_bytes_per_rank: HiSparse host pool per DP rank (0 without HiSparse).
        hot_buffer_bytes: HiSparse GPU hot buffer per running request (0 without HiSparse).
        gpu_tokens_per_rank: tokens whose KV fits one DP rank's GPUs (HiSparse: GPU + host tiers).
        max_context_tokens: the longest single request one DP rank holds (not capped by the model).
        offload_prefix_tokens_per_rank: prefix tokens the CPU offload of one DP rank keeps for reuse
            (each GPU offloads what it stores; with HiSparse the offload keeps only the indexer KV and
            the MLA rows of a prefix must fit the host pool).
        host_memory_bytes: memory request of one engine pod.
        flop_per_byte: sparse-MLA decode arithmetic intensity at this role's heads per GPU (None
            without sparse attention).
        indexer_crossover_tokens: prompt length where the indexer overtakes sparse MLA on one GPU.
        dcp_allgather_bytes_per_layer: ``{cached tokens: bytes}`` one GPU receives per MLA layer per
            2K-token prefill step (prefill roles with DCP > 1 and PCP > 1 only).
        kv: the model's KV bytes per token.
    """

    role: str
    replicas: int
    tensor: int
    prefill_context: int
    decode_context: int
    data: int
    expert_parallel: bool
    weights_bytes_per_gpu: float
    gpu_memory_utilization: float
    usable_bytes_per_gpu: float
    kv_budget_bytes_per_gpu: float
    kv_cache_memory_bytes: int | None
    kv_bytes_per_token_per_gpu: float
    hisparse: bool
    host_pool_bytes_per_rank: int
    hot_buffer_bytes: int
    gpu_tokens_per_rank: int
    max_context_tokens: int
    offload_prefix_tokens_per_rank: int
    host_memory_bytes: int
    flop_per_byte: float | None
    indexer_crossover_tokens: float | None
    kv: KvBytesPerToken
    dcp_allgather_bytes_per_layer: dict[int, float] = field(default_factory=dict)

    @property
    def free_bytes_per_gpu(self) -> float:
        """GPU memory left after weights and the activation reserve: within ``--gpu-memory-utilization``,
        or of the whole GPU when ``--kv-cache-memory-bytes`` is set (vLLM then ignores the utilization)."""
        memory = self.usable_bytes_per_gpu
        if self.kv_cache_memory_bytes is not None:
            memory /= self.gpu_memory_utilization
        return memory - self.weights_bytes_per_gpu - ACTIVATION_RESERVE_BYTES

    @property
    def weights_fit(self) -> bool:
        """Whether any memory is left for KV after weights and the reserve."""
        return self.free_bytes_per_gpu > 0

    def request_bytes_per_gpu(self, tokens: int) -> float:
        """GPU bytes one request of ``tokens`` tokens needs on each GPU of its DP rank (HiSparse:
        indexer KV + hot buffer + MLA rows that do not fit the host pool)."""
        dcp = self.decode_context
        if not self.hisparse:
            return tokens * self.kv.total / dcp
        spill = max(0.0, tokens * self.kv.mla - self.host_pool_bytes_per_rank) / dcp
        return tokens * self.kv.indexer / dcp + self.hot_buffer_bytes + spill

    def concurrency_per_rank(self, tokens: int) -> int:
        """How many requests of ``tokens`` tokens one DP rank holds at once (0: not even one)."""
        budget = self.kv_budget_bytes_per_gpu
        if budget <= 0 or tokens <= 0:
            return 0
        if not self.hisparse:
            return int(budget // self.request_bytes_per_gpu(tokens))

        def need(n: int) -> float:
            dcp = self.decode_context
            spill = max(0.0, n * tokens * self.kv.mla - self.host_pool_bytes_per_rank) / dcp
            return n * (tokens * self.kv.indexer / dcp + self.hot_buffer_bytes) + spill

        low, high = 0, 1
        while need(high) <= budget:
            low, high = high, high * 2
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if need(mid) <= budget else (low, mid)
        return low

    def concurrency(self, tokens: int) -> int:
        """Requests of ``tokens`` tokens the whole role holds at once (ranks × replicas)."""
        return self.concurrency_per_rank(tokens) * self.data * self.replicas


@dataclass(frozen=True)
class Plan:
    """The capacity plan of a GLMDeployment.

    Attributes:
        model / gpu: the profiles used.
        quantization: the weight format planned for.
        kv: KV bytes per token of the model.
        model_max_context: the model's context limit (tokens).
        max_model_len: the ``--max-model-len`` rendered (tokens).
        max_model_len_source: ``spec`` (set by the user), ``model`` (the model's limit fits every
            role) or ``kvBudget`` (derived: the longest context every role holds, a multiple of the
            KV block size).
        roles: :class:`RolePlan` per role, in render order.
        ridge_flop_per_byte: the GPU's roofline ridge point, None when unknown.
    """

    model: ModelProfile
    gpu: GpuProfile
    quantization: str
    kv: KvBytesPerToken
    model_max_context: int
    max_model_len: int
    max_model_len_source: MaxLenSource
    roles: dict[str, RolePlan]
    ridge_flop_per_byte: float | None

    @property
    def serving_role(self) -> RolePlan:
        """The role whose concurrency bounds serving: decode (disaggregated) or engine (aggregated)."""
        return self.roles.get("decode") or self.roles.get("engine") or next(iter(self.roles.values()))

    @property
    def min_kv_budget_bytes_per_gpu(self) -> float:
        """The smallest KV budget per GPU over the roles."""
        return min(r.kv_budget_bytes_per_gpu for r in self.roles.values())


def _tiered_tokens(gpu: float, host: float, indexer: float, mla: float, fixed: float) -> int:
    """Tokens of one request that fit when ``indexer`` bytes/token and ``fixed`` bytes stay on a GPU
    with ``gpu`` bytes, and ``mla`` bytes/token fill the GPU first, then ``host`` bytes of host pool."""
    if gpu <= fixed:
        return 0
    # Largest n with need(n) = indexer·n + fixed + max(0, mla·n − host) <= gpu. need is piecewise
    # linear and increasing. If the GPU's indexer bound (gpu − fixed)/indexer lies beyond the point
    # host/mla where the pool is full, the answer is in the spill regime: (gpu + host − fixed)/(indexer
    # + mla), which is then the smaller of the two. Otherwise the pool never fills and the indexer bound
    # is the answer, and it is the smaller one (the mediant (g+h)/(i+m) lies between g/i and h/m).
    with_host = (gpu + host - fixed) / (indexer + mla)
    indexer_bound = (gpu - fixed) / indexer if indexer else float("inf")
    return int(min(with_host, indexer_bound))


def query_replicated(role: RoleSpec) -> bool:
    """DCP query replication: on by default for DCP > 1 with PCP = 1 (vLLM #50382), unless the role's
    ``extraArgs`` say ``--no-dcp-q-replicate``; ``--dcp-q-replicate`` turns it on explicitly."""
    p = role.parallelism
    default = p.decode_context > 1 and p.prefill_context == 1
    for arg in role.extra_args:
        flag = arg.split("=", 1)[0].strip().replace("_", "-").lower()
        if flag == "--no-dcp-q-replicate":
            default = False
        elif flag == "--dcp-q-replicate":
            value = arg.split("=", 1)[1].strip().lower() if "=" in arg else "true"
            default = value not in {"false", "0", "no", "off"}
    return default and p.decode_context > 1


def memory_utilization(role: RoleSpec) -> float:
    """``--gpu-memory-utilization`` from the role's ``extraArgs`` when valid (0 < u <= 1), else vLLM's
    default :data:`GPU_MEMORY_UTILIZATION` (the rules report an invalid value)."""
    found = extra_arg_value(role.extra_args, "--gpu-memory-utilization")
    try:
        value = float(found[1]) if found else GPU_MEMORY_UTILIZATION
    except ValueError:
        return GPU_MEMORY_UTILIZATION
    return value if 0 < value <= 1 else GPU_MEMORY_UTILIZATION


def kv_cache_memory_bytes(role: RoleSpec) -> int | None:
    """``--kv-cache-memory-bytes`` from the role's ``extraArgs`` (vLLM then sizes the KV cache to exactly
    this, ignoring ``--gpu-memory-utilization``), or None when absent or invalid."""
    found = extra_arg_value(role.extra_args, "--kv-cache-memory-bytes")
    if not found:
        return None
    try:
        return human_readable_int(found[1])
    except ValueError:
        return None


def _role_plan(spec: GLMDeploymentSpec, name: str, role: RoleSpec, *, model: ModelProfile, gpu: GpuProfile,
               kv: KvBytesPerToken, weights_per_gpu: float) -> RolePlan:
    p = role.parallelism
    utilization = memory_utilization(role)
    usable = utilization * gpu.hbm_bytes
    budget = usable - weights_per_gpu - ACTIVATION_RESERVE_BYTES
    fixed_kv = kv_cache_memory_bytes(role)
    if fixed_kv is not None:  # vLLM allocates exactly this; the rules refuse it when it does not fit
        budget = float(fixed_kv)
    hisparse = role.hi_sparse is not None and role.hi_sparse.enabled
    host_pool = host_pool_bytes_per_rank(role)
    mla_layers = model.layers + (model.mtp_layers if spec.speculative.method == "mtp" else 0)
    hot = hisparse_hot_buffer_bytes(model, kv.mla_row, mla_layers) if hisparse and model.sparse_mla else 0
    dcp = p.decode_context
    per_token_gpu = kv.total / dcp
    if budget <= 0:
        gpu_tokens = max_context = 0
    elif hisparse:
        gpu_tokens = _tiered_tokens(budget, host_pool / dcp, kv.indexer / dcp, kv.mla / dcp, 0)
        max_context = _tiered_tokens(budget, host_pool / dcp, kv.indexer / dcp, kv.mla / dcp, hot)
    else:
        gpu_tokens = max_context = int(budget // per_token_gpu)
    offload = offload_bytes_per_rank(role)
    # every GPU of a DP rank offloads what it stores: 1/DCP of each token, replicated TP·PCP/DCP times
    replication = p.tensor * p.prefill_context / dcp
    if hisparse and kv.indexer:  # the offload keeps indexer KV; the MLA rows of a prefix live in the host pool
        offload_tokens = int(min(offload / (kv.indexer * replication), host_pool / kv.mla))
    else:
        offload_tokens = int(offload / (kv.total * replication))
    heads_per_gpu = model.attention_heads // p.tensor
    sparse = model.sparse_mla and heads_per_gpu >= 1
    allgather = {}
    if p.prefill_context > 1 and dcp > 1:
        allgather = {
            cached: flops.dcp_allgather_bytes_per_layer(cached + ALLGATHER_CHUNK_TOKENS, kv.mla_row, dcp)
            for cached in ALLGATHER_CACHED_TOKENS
        }
    return RolePlan(
        role=name, replicas=role.replicas, tensor=p.tensor, prefill_context=p.prefill_context, decode_context=dcp,
        data=p.data, expert_parallel=p.expert, weights_bytes_per_gpu=weights_per_gpu,
        gpu_memory_utilization=utilization, usable_bytes_per_gpu=usable,
        kv_budget_bytes_per_gpu=budget, kv_cache_memory_bytes=fixed_kv, kv_bytes_per_token_per_gpu=per_token_gpu,
        hisparse=hisparse,
        host_pool_bytes_per_rank=host_pool, hot_buffer_bytes=hot, gpu_tokens_per_rank=gpu_tokens,
        max_context_tokens=max_context, offload_prefix_tokens_per_rank=offload_tokens,
        host_memory_bytes=host_memory_bytes(spec, role),
        flop_per_byte=flops.sparse_mla_flop_per_byte(model, heads_per_gpu, kv.mla_row) if sparse else None,
        indexer_crossover_tokens=flops.indexer_crossover_tokens(model, p.tensor) if sparse else None,
        kv=kv, dcp_allgather_bytes_per_layer=allgather,
    )


#: Weight-format markers in Hugging Face repository ids (``zai-org/GLM-5.3-FP8``, ``nvidia/Kimi-K2.6-NVFP4``).
_FORMAT_MARKERS = {"fp8": "fp8", "nvfp4": "nvfp4", "fp4": "nvfp4", "mxfp4": "nvfp4", "int4": "int4",
                   "w4a16": "int4", "awq": "int4", "gptq": "int4", "bf16": "bf16", "fp16": "bf16"}


def quantization_from_name(model_name: str) -> str | None:
    """The weight format a repository id names (``…-FP8`` → fp8, ``…-NVFP4`` → nvfp4), or None."""
    for token in re.split(r"[-_/.]", model_name.lower()):
        if token in _FORMAT_MARKERS:
            return _FORMAT_MARKERS[token]
    return None


def quantization_of(spec: GLMDeploymentSpec, model: ModelProfile) -> str:
    """``spec.model.quantization``, else the format ``model.name`` names, else the profile's usual
    checkpoint format."""
    return spec.model.quantization or quantization_from_name(spec.model.name) or model.default_quantization


def plan_deployment(spec: GLMDeploymentSpec) -> Plan:
    """Plan every role of ``spec`` (pure; microseconds). Never raises for a spec that parsed: a
    layout that cannot work shows up as a non-positive budget or a too-small max context, which
    :func:`glm_operator.plan.rules.kv_capacity` turns into findings."""
    model, gpu = model_profile(spec), gpu_profile(spec)
    mtp = spec.speculative.method == "mtp"
    kv = kv_bytes_per_token(model, spec.kv_cache.dtype, mtp=mtp)
    weights = weight_bytes(model, quantization_of(spec, model), mtp=mtp)
    roles = {}
    for name, role in spec.roles().items():
        p = role.parallelism
        per_gpu = weight_bytes_per_gpu(weights, tensor=p.tensor, prefill_context=p.prefill_context, data=p.data,
                                       query_replicated=query_replicated(role))
        roles[name] = _role_plan(spec, name, role, model=model, gpu=gpu, kv=kv, weights_per_gpu=per_gpu)
    fits = min(r.max_context_tokens for r in roles.values())
    source: MaxLenSource
    if spec.model.max_model_len is not None:
        max_len, source = spec.model.max_model_len, "spec"
    elif fits >= model.max_context_tokens:
        max_len, source = model.max_context_tokens, "model"
    else:
        block = spec.kv_cache.block_size
        max_len, source = max(0, fits // block * block), "kvBudget"
    return Plan(
        model=model, gpu=gpu, quantization=quantization_of(spec, model), kv=kv,
        model_max_context=model.max_context_tokens, max_model_len=max_len, max_model_len_source=source,
        roles=roles, ridge_flop_per_byte=gpu.ridge_flop_per_byte,
    )
