"""The ``GLMDeployment`` spec (``serving.glm.dev/v1alpha1``) as pydantic v2 models.

These models are the single source of the API: the operator parses custom resources with them,
``glmctl`` validates files with them, and ``make crds`` generates ``crds/glmdeployment.yaml`` from
them (:mod:`glm_operator.api.crd`). Field names are camelCase on the wire (Kubernetes API
conventions) and snake_case in Python.

Defaults make a minimal CR (``model.name`` + ``image``) describe seed system A of
``docs/SEED-FACTS.md``: GLM-5.3-FP8 on two 8×H200 nodes, prefill PCP8×DCP8×EP8 with 512 GiB CPU KV
offload, decode DP8×EP8 with Hybrid HiSparse (48 GiB host pool + 16 GiB offload per DP rank),
FP8 KV cache with block size 64, MTP with 3 draft tokens, NIXL KV transfer, llm-d router.

Cross-field rules that are simple enough are also CRD ``x-kubernetes-validations`` (CEL), so the
API server refuses them at ``kubectl apply`` time; the rest live in :mod:`glm_operator.plan.rules`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, field_validator, model_validator
from pydantic.alias_generators import to_camel

from glm_operator.api.findings import FieldError
from glm_operator.api.quantity import CPU_QUANTITY_PATTERN, GIB, MEMORY_QUANTITY_PATTERN, parse_bytes

API_GROUP = "serving.glm.dev"
API_VERSION = "v1alpha1"
KIND = "GLMDeployment"
PLURAL = "glmdeployments"
SINGULAR = "glmdeployment"
SHORT_NAMES = ["glmd"]

def _int_to_str(value: Any) -> Any:
    """Kubernetes quantities are int-or-string: ``cpu: 32`` means ``"32"``."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


MemoryQuantity = Annotated[
    str,
    BeforeValidator(_int_to_str),
    StringConstraints(pattern=MEMORY_QUANTITY_PATTERN),
    Field(json_schema_extra={"x-kubernetes-int-or-string": True, "pattern": MEMORY_QUANTITY_PATTERN}),
]
CpuQuantity = Annotated[
    str,
    BeforeValidator(_int_to_str),
    StringConstraints(pattern=CPU_QUANTITY_PATTERN),
    Field(json_schema_extra={"x-kubernetes-int-or-string": True, "pattern": CPU_QUANTITY_PATTERN}),
]
#: DNS-1123 subdomain (object names such as Secrets, PVCs, Gateways).
DnsName = Annotated[
    str,
    StringConstraints(max_length=253, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"),
]
Port = Annotated[int, Field(ge=1024, le=65535)]
#: Label/selector key and value syntax (k8s.io/apimachinery validation: qualified names, label values).
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"


def _cel(*rules: tuple[str, str] | tuple[str, str, str]) -> dict[str, Any]:
    """``x-kubernetes-validations`` for a model's JSON schema: ``(rule, message)`` or ``(rule, message, fieldPath)``.

    ``fieldPath`` (relative to the object the rule is on, e.g. ``.memory``) is the field the API server names in its
    refusal (``spec.gpu.memory: Invalid value: ...``); without it, it names the object (``spec.gpu``)."""
    return {"x-kubernetes-validations": [
        {"rule": rule[0], "message": rule[1], **({"fieldPath": rule[2]} if len(rule) == 3 else {})} for rule in rules
    ]}


class _Model(BaseModel):
    """Base: camelCase aliases, unknown fields forbidden (typos are errors, not silently ignored),
    strict types (``replicas: "1"`` or ``true`` is an error, as the API server would say)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        validate_default=True,
        strict=True,
    )


# --------------------------------------------------------------------------------------------- model


class SecretKeyRef(_Model):
    """A key in a Secret of the CR's namespace."""

    name: DnsName = Field(description="Secret name.")
    key: str = Field(
        default="HF_TOKEN",
        min_length=1,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
        description="Key inside the Secret.",
    )


class PvcSource(_Model):
    """Weights on a PersistentVolumeClaim (ReadOnlyMany or ReadWriteMany across the engine pods)."""

    claim_name: DnsName = Field(description="Name of an existing PersistentVolumeClaim.")
    sub_path: str | None = Field(
        default=None,
        pattern=r"^[^/].*$",
        max_length=1024,
        description="Relative directory inside the volume that holds the checkpoint (no '..').",
    )

    @field_validator("sub_path")
    @classmethod
    def _no_parent_dirs(cls, value: str | None) -> str | None:
        if value is not None and ".." in value.split("/"):
            raise ValueError("subPath must not contain '..' (Kubernetes refuses it)")
        return value


class HuggingFaceSource(_Model):
    """Weights downloaded from Hugging Face by vLLM at start-up."""

    token_secret: SecretKeyRef | None = Field(
        default=None, description="Secret with a Hugging Face token, exposed as HF_TOKEN. Omit for public models."
    )
    cache_claim_name: DnsName | None = Field(
        default=None,
        description="PVC used as the Hugging Face cache so restarts do not re-download ~750 GB. "
        "Without it the cache is an emptyDir on the node.",
    )


class WeightsSource(_Model):
    """Where the checkpoint comes from: exactly one of ``pvc`` or ``huggingFace``."""

    model_config = ConfigDict(
        json_schema_extra=_cel(("!(has(self.pvc) && has(self.huggingFace))", "set only one of pvc or huggingFace"))
    )

    pvc: PvcSource | None = None
    hugging_face: HuggingFaceSource | None = Field(default=None, alias="huggingFace")

    @model_validator(mode="after")
    def _only_one(self) -> WeightsSource:
        if self.pvc is not None and self.hugging_face is not None:
            raise ValueError("set only one of pvc or huggingFace")
        return self


ModelProfileName = Literal["glm-5.3", "glm-5.2", "glm-5.1", "glm-5", "deepseek-v3.2", "kimi-k2.6", "custom"]
Quantization = Literal["fp8", "nvfp4", "int4", "bf16"]


def _dim(description: str, *, ge: int = 1, le: int = 1_000_000) -> Any:
    return Field(ge=ge, le=le, description=description)


class ArchitectureSpec(_Model):
    """The architecture of a model the planner has no profile for (``profile: custom``), with the
    field names of its Hugging Face ``config.json``. MLA models only (DeepSeek-V3 family)."""

    max_context_tokens: int = _dim("max_position_embeddings (tokens).", ge=1024, le=16_777_216)
    layers: int = _dim("num_hidden_layers, MTP layers excluded.", le=512)
    dense_layers: int = _dim("first_k_dense_replace: leading layers with a dense MLP.", ge=0, le=512)
    hidden_size: int = _dim("hidden_size.", le=65_536)
    attention_heads: int = _dim("num_attention_heads.", le=1024)
    q_lora_rank: int = _dim("q_lora_rank (0: no query LoRA).", ge=0, le=65_536)
    kv_lora_rank: int = _dim("kv_lora_rank (MLA latent width).", le=65_536)
    qk_nope_head_dim: int = _dim("qk_nope_head_dim.", le=4096)
    qk_rope_head_dim: int = _dim("qk_rope_head_dim.", le=4096)
    v_head_dim: int = _dim("v_head_dim.", le=4096)
    routed_experts: int = _dim("n_routed_experts (0: dense model).", ge=0, le=65_536)
    shared_experts: int = _dim("n_shared_experts.", ge=0, le=64)
    moe_intermediate_size: int = _dim("moe_intermediate_size.", ge=0, le=262_144)
    intermediate_size: int = _dim("intermediate_size of the dense layers.", le=262_144)
    vocab_size: int = _dim("vocab_size.", le=4_194_304)
    indexer_layers: int = _dim("Layers with a lightning indexer (0: no sparse attention).", ge=0, le=512)
    indexer_heads: int = _dim("index_n_heads.", ge=0, le=1024)
    indexer_head_dim: int = _dim("index_head_dim.", ge=0, le=4096)
    index_topk: int = _dim("index_topk.", ge=0, le=1_048_576)
    mtp_layers: int = _dim("num_nextn_predict_layers.", ge=0, le=8)

    @model_validator(mode="after")
    def _consistent(self) -> ArchitectureSpec:
        for name, value in (("denseLayers", self.dense_layers), ("indexerLayers", self.indexer_layers)):
            if value > self.layers:
                raise FieldError(name, value, f"{name} cannot exceed layers ({self.layers})",
                                 f"use a value <= {self.layers}")
        if self.indexer_layers:
            for name, value in (("indexerHeads", self.indexer_heads), ("indexerHeadDim", self.indexer_head_dim),
                                ("indexTopk", self.index_topk)):
                if not value:
                    raise FieldError(name, value, f"a model with indexerLayers {self.indexer_layers} needs {name}",
                                     f"set {name} from the model's config.json, or indexerLayers: 0")
        return self


class ModelSpec(_Model):
    """The model to serve."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            ("self.profile != 'custom' || has(self.architecture)", "profile custom needs model.architecture",
             ".architecture"),
            ("self.profile == 'custom' || !has(self.architecture)", "model.architecture is only for profile custom",
             ".architecture"),
        )
    )

    name: str = Field(
        min_length=1,
        max_length=256,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
        description="Hugging Face repository id, e.g. zai-org/GLM-5.3-FP8.",
    )
    served_name: str | None = Field(
        default=None,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
        description="Model name clients send in requests (--served-model-name). Default: the profile name.",
    )
    profile: ModelProfileName = Field(
        default="glm-5.3", description="Architecture profile used by the planner (layers, MLA/indexer dims, context)."
    )
    source: WeightsSource = Field(
        default_factory=lambda: WeightsSource(hugging_face=HuggingFaceSource()),
        description="Where the weights come from. Default: Hugging Face, no token.",
    )
    max_model_len: int | None = Field(
        default=None,
        ge=1024,
        le=16_777_216,
        description="--max-model-len in tokens. Default: the largest context that the model allows and the KV "
        "budget of every role holds (status.capacity says which).",
    )
    quantization: Quantization | None = Field(
        default=None,
        description="Weight format of the checkpoint, for the planner's weights-per-GPU. Default: the format "
        "model.name names (-FP8, -NVFP4, -INT4, -BF16), else the family's checkpoint without a marker (GLM-5.x "
        "bf16, DeepSeek-V3.2 fp8, Kimi K2.x int4, custom bf16).",
    )
    architecture: ArchitectureSpec | None = Field(
        default=None, description="Required with profile custom (and only then): the model's config.json shape."
    )

    @model_validator(mode="after")
    def _architecture_with_custom(self) -> ModelSpec:
        if self.profile == "custom" and self.architecture is None:
            raise FieldError(
                "architecture", None, "profile custom needs model.architecture: the planner has no profile for "
                f"{self.name}",
                "add model.architecture with the fields of the model's config.json (layers, hiddenSize, kvLoraRank, "
                "...; `glmctl crd` lists them), or pick a built-in profile",
            )
        if self.profile != "custom" and self.architecture is not None:
            raise FieldError(
                "architecture", "(set)", f"model.architecture is only for profile custom; {self.profile} is built in",
                "remove model.architecture, or set model.profile: custom",
            )
        return self


# --------------------------------------------------------------------------------------------- cluster-wide


#: GPU products the planner has profiles for (glm_operator.plan.profiles.GPUS), by product name and by
#: their ``nvidia.com/gpu.product`` label value.
KNOWN_GPU_PRODUCTS = ("H200", "B200", "NVIDIA-H200", "NVIDIA-B200")


class GpuSpec(_Model):
    """The GPU nodes the engines run on."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "self.product in ['H200', 'B200', 'NVIDIA-H200', 'NVIDIA-B200'] || has(self.memory)",
                "the planner knows H200 and B200; for another product set gpu.memory (memory per GPU)",
                ".memory",
            ),
        )
    )

    product: str = Field(
        default="H200",
        min_length=1,
        max_length=63,
        pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        description="GPU product: H200 or B200 (planner profiles, node label from GPU feature discovery), or the "
        "nvidia.com/gpu.product label value of another GPU together with gpu.memory.",
    )
    per_node: int = Field(default=8, ge=1, le=16, description="GPUs per node; one engine owns one node.")
    memory: MemoryQuantity | None = Field(
        default=None,
        description="Memory per GPU as the driver reports it (e.g. 143771Mi for H200). Required for a product "
        "the planner does not know; overrides the profile otherwise.",
    )
    node_memory: MemoryQuantity | None = Field(
        default=None,
        description="Allocatable host memory of one GPU node. When set, every engine pod's memory request "
        "(engine + KV pools + /dev/shm) must fit in it.",
    )

    @model_validator(mode="after")
    def _memory_for_unknown(self) -> GpuSpec:
        if self.product not in KNOWN_GPU_PRODUCTS and self.memory is None:
            close = [p for p in KNOWN_GPU_PRODUCTS if p.lower() == self.product.lower()]
            hint = f"did you mean {close[0]}? Otherwise s" if close else "s"
            raise FieldError(
                "memory", None,
                f"the planner does not know GPU product {self.product!r} (known: H200, B200) and cannot plan its KV "
                "budget without its memory",
                f"{hint}et gpu.memory to its memory per GPU as the driver reports it (e.g. 81559Mi for an 80 GB H100)",
            )
        if self.memory is not None and parse_bytes(self.memory) < GIB:
            raise FieldError("memory", self.memory, "less than 1 GiB per GPU cannot hold any model",
                             "write the GPU's memory, e.g. 143771Mi (H200) or 80Gi")
        return self


class KvCacheSpec(_Model):
    """KV cache layout, one value for both roles (a mismatch breaks NIXL transfers)."""

    dtype: Literal["fp8", "fp8_ds_mla", "bfloat16", "auto"] = Field(
        default="fp8",
        description="--kv-cache-dtype. vLLM rewrites fp8* to the 656-byte fp8_ds_mla row for sparse-MLA models.",
    )
    block_size: Literal[16, 32, 64, 128, 256] = Field(
        default=64, description="--block-size in tokens. FLASHMLA_SPARSE supports 64 only."
    )


class SpeculativeSpec(_Model):
    """Speculative decoding; the same on both roles (NIXL requires it)."""

    method: Literal["mtp", "none"] = Field(default="mtp", description="mtp uses the checkpoint's MTP layer.")
    num_speculative_tokens: int = Field(default=3, ge=1, le=8, description="Draft tokens per step.")


class PortsSpec(_Model):
    """Container ports of the engine pods."""

    model_config = ConfigDict(json_schema_extra=_cel(("self.serving != self.engine", "serving and engine must differ")))

    serving: Port = Field(
        default=8000,
        description="Port the InferencePool targets: prefill vLLM and the decode P/D sidecar listen here.",
    )
    engine: Port = Field(default=8200, description="Decode vLLM port behind the P/D sidecar.")

    @model_validator(mode="after")
    def _differ(self) -> PortsSpec:
        if self.serving == self.engine:
            raise ValueError("serving and engine must differ")
        return self


# --------------------------------------------------------------------------------------------- roles


class ParallelismSpec(_Model):
    """vLLM parallel layout of one engine (one pod, one node).

    World size (GPUs per engine) = tensor × prefillContext × data. DCP does not grow the world
    size; it reuses TP ranks (PCP=1) or spans the PCP×TP block (PCP>1).
    Rules from ``vllm/config/parallel.py`` ``_validate_parallel_config``.
    """

    model_config = ConfigDict(
        json_schema_extra=_cel(
            ("self.prefillContext == 1 || self.data == 1", "PCP > 1 with data parallelism is not supported", ".data"),
            (
                "self.prefillContext > 1 || self.tensor % self.decodeContext == 0",
                "with prefillContext 1, tensor must be a multiple of decodeContext",
                ".decodeContext",
            ),
            (
                "self.prefillContext == 1 || self.decodeContext == 1 || self.decodeContext == self.prefillContext"
                " || self.decodeContext == self.tensor * self.prefillContext",
                "with prefillContext > 1, decodeContext must be 1, prefillContext or tensor*prefillContext",
                ".decodeContext",
            ),
        )
    )

    tensor: int = Field(default=1, ge=1, le=16, description="--tensor-parallel-size.")
    prefill_context: int = Field(default=1, ge=1, le=16, description="--prefill-context-parallel-size (PCP).")
    decode_context: int = Field(default=1, ge=1, le=16, description="--decode-context-parallel-size (DCP).")
    data: int = Field(default=1, ge=1, le=16, description="--data-parallel-size (DP ranks inside the pod).")
    expert: bool = Field(default=False, description="--enable-expert-parallel (EP over TP×PCP×DP).")

    @property
    def world_size(self) -> int:
        """GPUs one engine uses: TP × PCP × DP."""
        return self.tensor * self.prefill_context * self.data


class HiSparseSpec(_Model):
    """Hybrid HiSparse: sparse-MLA KV in pinned host memory, hot rows on the GPU (decode only)."""

    enabled: bool = Field(default=True, description="Turn HiSparse on.")
    host_pool_per_rank: MemoryQuantity = Field(
        default="48Gi", description="HiSparseConnector host_pool_gib per DP rank (pinned host memory)."
    )
    offload_per_rank: MemoryQuantity = Field(
        default="16Gi", description="OffloadingConnector size per DP rank beside HiSparse (indexer KV prefixes)."
    )


class KeyRef(_Model):
    """A key of a Secret or ConfigMap in the CR's namespace."""

    name: DnsName
    key: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    optional: bool | None = None


class FieldRef(_Model):
    """A field of the pod (downward API), e.g. ``status.podIP``."""

    field_path: str = Field(min_length=1, max_length=256)
    api_version: str | None = None


class ResourceFieldRef(_Model):
    """A resource limit or request of a container (downward API)."""

    resource: str = Field(min_length=1, max_length=256)
    container_name: str | None = None
    divisor: str | None = None


class EnvVarSource(_Model):
    """``valueFrom`` of an environment variable: exactly one source."""

    secret_key_ref: KeyRef | None = None
    config_map_key_ref: KeyRef | None = None
    field_ref: FieldRef | None = None
    resource_field_ref: ResourceFieldRef | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvVarSource:
        count = sum(v is not None for v in (self.secret_key_ref, self.config_map_key_ref, self.field_ref,
                                            self.resource_field_ref))
        if count != 1:
            raise ValueError("set exactly one of secretKeyRef, configMapKeyRef, fieldRef or resourceFieldRef")
        return self


class EnvVar(_Model):
    """An environment variable: a literal ``value`` or a Kubernetes ``valueFrom`` (secretKeyRef,
    configMapKeyRef, fieldRef, resourceFieldRef), exactly one of them."""

    model_config = ConfigDict(
        json_schema_extra=_cel(("has(self.value) != has(self.valueFrom)", "set exactly one of value or valueFrom"))
    )

    name: str = Field(pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    value: str | None = None
    value_from: EnvVarSource | None = None

    @model_validator(mode="after")
    def _one_source(self) -> EnvVar:
        if (self.value is None) == (self.value_from is None):
            raise ValueError("set exactly one of value or valueFrom")
        return self


class RoleResources(_Model):
    """Host resources of one engine pod, besides GPUs.

    The memory request and limit of the vLLM container are ``memory`` + the CPU-offload and
    HiSparse pools of all DP ranks + ``shm`` (the memory-backed ``/dev/shm`` counts against the
    limit).
    """

    cpu: CpuQuantity = Field(default="32", description="CPU request of the vLLM container.")
    memory: MemoryQuantity = Field(
        default="256Gi", description="Host memory for the engine itself, excluding KV pools and /dev/shm."
    )
    shm: MemoryQuantity = Field(default="32Gi", description="Size of the memory-backed /dev/shm (NCCL).")


class RoleSpec(_Model):
    """One engine role: a StatefulSet of identical engines, one per node."""

    replicas: int = Field(default=1, ge=1, le=64, description="Engines in this role (one node each).")
    parallelism: ParallelismSpec = Field(default_factory=ParallelismSpec)
    dcp_comm_backend: Literal["ag_rs", "a2a"] | None = Field(
        default=None, description="--dcp-comm-backend. Default: the model's default (a2a for GLM)."
    )
    cpu_offload_per_rank: MemoryQuantity | None = Field(
        default=None, description="CPU KV offload per DP rank (OffloadingConnector cpu_bytes_to_use)."
    )
    force_sparse_mqa: bool = Field(
        default=False,
        alias="forceSparseMQA",
        description='--attention-config {"sparse_mla_force_mqa":true}: keep short prompts on the sparse-MLA path.',
    )
    hi_sparse: HiSparseSpec | None = Field(default=None, alias="hiSparse", description="Decode only.")
    resources: RoleResources = Field(default_factory=RoleResources)
    extra_args: list[Annotated[str, StringConstraints(min_length=1, max_length=4096)]] = Field(
        default_factory=list, max_length=64, description="Extra vLLM arguments appended last (escape hatch)."
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=64,
        description="Extra environment variables; one entry per name, replacing the operator's default of that name.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


def _seed_prefill_parallelism() -> ParallelismSpec:
    return ParallelismSpec(tensor=1, prefill_context=8, decode_context=8, data=1, expert=True)


def _seed_decode_parallelism() -> ParallelismSpec:
    return ParallelismSpec(tensor=1, prefill_context=1, decode_context=1, data=8, expert=True)


def _seed_engine_parallelism() -> ParallelismSpec:
    return ParallelismSpec(tensor=8, prefill_context=1, decode_context=8, data=1, expert=False)


class PrefillSpec(RoleSpec):
    """Prefill role. Default: seed system A (PCP8×DCP8×EP8, ag_rs, force MQA, 512 GiB CPU offload)."""

    parallelism: ParallelismSpec = Field(default_factory=_seed_prefill_parallelism)
    dcp_comm_backend: Literal["ag_rs", "a2a"] | None = Field(default="ag_rs")
    cpu_offload_per_rank: MemoryQuantity | None = Field(default="512Gi")
    force_sparse_mqa: bool = Field(default=True, alias="forceSparseMQA")


class DecodeSpec(RoleSpec):
    """Decode role. Default: seed system A (DP8×EP8 with HiSparse 48 GiB + 16 GiB per rank)."""

    parallelism: ParallelismSpec = Field(default_factory=_seed_decode_parallelism)
    hi_sparse: HiSparseSpec | None = Field(default_factory=HiSparseSpec, alias="hiSparse")


class EngineSpec(RoleSpec):
    """The single engine role of ``mode: aggregated``. Default: seed system B (TP8 + DCP8)."""

    parallelism: ParallelismSpec = Field(default_factory=_seed_engine_parallelism)


# --------------------------------------------------------------------------------------------- router


class ScorerWeights(_Model):
    """Endpoint-picker scorer weights (weighted sum per scheduling profile)."""

    prefix_cache: float = Field(default=2.0, ge=0, le=100, description="prefix-cache-scorer weight.")
    queue: float = Field(default=1.0, ge=0, le=100, description="queue-scorer weight.")
    kv_cache_utilization: float = Field(default=1.0, ge=0, le=100, description="kv-cache-utilization-scorer weight.")


class PdDeciderSpec(_Model):
    """``prefix-based-pd-decider``: disaggregate when the decode pod's uncached suffix is long enough."""

    non_cached_tokens: int = Field(
        default=16, ge=1, le=1_048_576, description="Uncached tokens that trigger P/D (0 would disable P/D)."
    )
    prompt_tokens: int = Field(default=0, ge=0, le=16_777_216, description="Minimum prompt length for P/D (0 = off).")


class EndpointPickerSpec(_Model):
    """The llm-d endpoint picker (EPP)."""

    replicas: int = Field(default=1, ge=1, le=3, description="EPP replicas; >1 is active/passive with leader election.")
    scorers: ScorerWeights = Field(default_factory=ScorerWeights)
    pd_decider: PdDeciderSpec = Field(default_factory=PdDeciderSpec, alias="pdDecider")
    secure_serving: bool = Field(
        default=True,
        description="EPP ext-proc over self-signed TLS (behind a Gateway). Set false for gateways that cannot "
        "skip verification (Istio without a DestinationRule). Standalone mode always uses plaintext on localhost.",
    )


class GatewayRef(_Model):
    """A Gateway API Gateway; when set, an HTTPRoute to the InferencePool is rendered."""

    name: DnsName
    namespace: DnsName | None = Field(default=None, description="Default: the CR's namespace.")
    section_name: DnsName | None = Field(default=None, description="Listener name on the Gateway.")


class RouterSpec(_Model):
    """llm-d prefix-aware router. Without ``gateway`` it runs standalone (Envoy beside the EPP)."""

    endpoint_picker: EndpointPickerSpec = Field(default_factory=EndpointPickerSpec)
    gateway: GatewayRef | None = None


# --------------------------------------------------------------------------------------------- KV transfer


class UcxSpec(_Model):
    """UCX settings for NIXL. Never defaults to TCP-only: unset means UCX picks the transports."""

    tls: str | None = Field(
        default=None, pattern=r"^[a-z0-9_,^]+$", description="UCX_TLS, e.g. rc,cuda_copy,cuda_ipc."
    )
    net_devices: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_:.,-]+$", description="UCX_NET_DEVICES, e.g. mlx5_0:1."
    )


class RdmaSpec(_Model):
    """An RDMA device-plugin resource requested by every engine (e.g. ``rdma/ib``)."""

    resource: str = Field(
        default="rdma/ib", pattern=r"^[a-z0-9.-]+/[a-zA-Z0-9._-]+$", description="Extended resource name."
    )
    count: int = Field(default=1, ge=1, le=16)


class KvTransferSpec(_Model):
    """NIXL KV transfer between prefill and decode."""

    connector: Literal["nixl", "none"] = Field(
        default="nixl", description="nixl for prefill/decode disaggregation; none only in mode aggregated."
    )
    side_channel_base_port: Port = Field(
        default=5600, description="VLLM_NIXL_SIDE_CHANNEL_PORT; worker w of an engine uses base + w."
    )
    load_failure_policy: Literal["fail", "recompute"] = Field(
        default="fail", description="kv_load_failure_policy; recompute hides transfer failures behind latency."
    )
    ucx: UcxSpec = Field(default_factory=UcxSpec)
    rdma: RdmaSpec | None = None


# --------------------------------------------------------------------------------------------- scheduling


class Toleration(_Model):
    """A pod toleration (``core/v1`` Toleration)."""

    key: str | None = Field(default=None, max_length=316)
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = Field(default=None, max_length=63)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


#: Keys of ``core/v1`` Affinity and of each of its terms (the terms themselves pass through).
_AFFINITY_TERMS = frozenset(
    {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"}
)
AFFINITY_KEYS = {"nodeAffinity": _AFFINITY_TERMS, "podAffinity": _AFFINITY_TERMS, "podAntiAffinity": _AFFINITY_TERMS}


class SchedulingSpec(_Model):
    """Pod placement for the engine pods (merged with the GPU node selector and one-engine-per-node)."""

    node_selector: dict[
        Annotated[str, StringConstraints(max_length=316, pattern=LABEL_KEY_PATTERN)],
        Annotated[str, StringConstraints(pattern=LABEL_VALUE_PATTERN)],
    ] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=64)
    affinity: dict[str, Any] = Field(
        default_factory=dict,
        description="core/v1 Affinity; its terms are passed through. Our one-engine-per-node anti-affinity is added.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    priority_class_name: DnsName | None = None

    @field_validator("affinity")
    @classmethod
    def _affinity_keys(cls, affinity: dict[str, Any]) -> dict[str, Any]:
        for key, value in affinity.items():
            if key not in AFFINITY_KEYS:
                raise ValueError(f"{key} is not a field of Affinity; use one of {sorted(AFFINITY_KEYS)}")
            if not isinstance(value, dict) or not set(value) <= AFFINITY_KEYS[key]:
                raise ValueError(f"{key} may contain only {sorted(AFFINITY_KEYS[key])}")
        return affinity


# --------------------------------------------------------------------------------------------- monitoring


class MonitoringSpec(_Model):
    """Prometheus Operator scrape objects for this deployment (``monitoring.coreos.com/v1``)."""

    pod_monitors: bool = Field(
        default=False,
        description="Render PodMonitors for the vLLM engines (/metrics on the vLLM port) and the endpoint picker "
        "(metrics port 9090, served without authentication); needs the Prometheus Operator CRDs.",
    )
    scrape_interval_seconds: int = Field(default=30, ge=5, le=600, description="Scrape interval of the PodMonitors.")
    labels: dict[
        Annotated[str, StringConstraints(max_length=316, pattern=LABEL_KEY_PATTERN)],
        Annotated[str, StringConstraints(pattern=LABEL_VALUE_PATTERN)],
    ] = Field(
        default_factory=dict,
        description="Extra labels on the PodMonitors, e.g. release: kube-prometheus-stack (its Prometheus selects "
        "monitors by that label by default).",
    )


# --------------------------------------------------------------------------------------------- spec


class GLMDeploymentSpec(_Model):
    """``spec`` of a GLMDeployment."""

    model_config = ConfigDict(
        json_schema_extra=_cel(
            (
                "self.mode == 'aggregated' || !has(self.engine)",
                "engine is only for mode aggregated; use prefill and decode",
                ".engine",
            ),
            (
                "self.mode == 'disaggregated' || !has(self.prefill)",
                "mode aggregated has one role: set engine, not prefill or decode",
                ".prefill",
            ),
            (
                "self.mode == 'disaggregated' || !has(self.decode)",
                "mode aggregated has one role: set engine, not prefill or decode",
                ".decode",
            ),
        )
    )

    model: ModelSpec
    image: str = Field(
        min_length=1,
        max_length=512,
        pattern=r"^[a-z0-9][a-z0-9._/:-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[a-z0-9]+:[a-f0-9]{32,})?$",
        description="vLLM serving image with the glm_kernels plugin (built from images/vllm-glm).",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    mode: Literal["disaggregated", "aggregated"] = Field(
        default="disaggregated", description="disaggregated: prefill + decode roles; aggregated: one engine role."
    )
    gpu: GpuSpec = Field(default_factory=GpuSpec)
    kv_cache: KvCacheSpec = Field(default_factory=KvCacheSpec)
    speculative: SpeculativeSpec = Field(default_factory=SpeculativeSpec)
    hash_seed: int = Field(
        default=42, ge=0, le=4_294_967_295, description="PYTHONHASHSEED on every vLLM pod (prefix-cache hashes)."
    )
    startup_timeout_seconds: int = Field(
        default=3600, ge=300, le=21600, description="Time allowed to load weights before liveness applies."
    )
    ports: PortsSpec = Field(default_factory=PortsSpec)
    prefill: PrefillSpec | None = None
    decode: DecodeSpec | None = None
    engine: EngineSpec | None = None
    router: RouterSpec = Field(default_factory=RouterSpec)
    kv_transfer: KvTransferSpec = Field(default_factory=KvTransferSpec)
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec)
    monitoring: MonitoringSpec = Field(default_factory=MonitoringSpec)

    def roles(self) -> dict[str, RoleSpec]:
        """The engine roles this spec renders, with defaults filled: ``{"prefill": …, "decode": …}``
        in disaggregated mode, ``{"engine": …}`` in aggregated mode."""
        if self.mode == "aggregated":
            return {"engine": self.engine or EngineSpec()}
        return {"prefill": self.prefill or PrefillSpec(), "decode": self.decode or DecodeSpec()}
