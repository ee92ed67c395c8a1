"""The ``GLMDeployment`` status as pydantic models (also the source of the CRD status schema).

Conditions follow the Kubernetes API conventions (``metav1.Condition``): ``type``, ``status``
(``True``/``False``/``Unknown``), ``reason`` (CamelCase), ``message``, ``lastTransitionTime``
(changed only when ``status`` flips) and ``observedGeneration``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

ConditionType = Literal["Ready", "Progressing", "Degraded", "Planned"]


class _Status(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Condition(_Status):
    """One status condition."""

    type: str = Field(max_length=316)
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    message: str = Field(default="", max_length=32768)
    last_transition_time: str = Field(description="RFC 3339 time of the last status flip.")
    observed_generation: int | None = Field(default=None, ge=0)


class ReplicaStatus(_Status):
    """Desired and ready replicas of one child workload (read from the StatefulSet/Deployment)."""

    replicas: int = Field(default=0, ge=0)
    ready_replicas: int = Field(default=0, ge=0)


class RoleCapacity(_Status):
    """The capacity plan of one engine role (``glmctl plan`` shows the same numbers)."""

    weights_bytes_per_gpu: int = Field(ge=0, description="Weight bytes each GPU holds.")
    kv_budget_bytes_per_gpu: int = Field(
        description="KV-cache budget per GPU in bytes (negative: the weights do not fit)."
    )
    max_request_tokens: int = Field(
        ge=0, description="Longest single request one DP rank of this role holds (tokens); the rendered "
        "--max-model-len is capacity.maxContextTokens."
    )
    max_concurrent_at_max_context: int = Field(
        ge=0, description="Requests of the rendered --max-model-len the whole role holds at once."
    )
    host_pool_bytes_per_rank: int = Field(default=0, ge=0, description="HiSparse host pool per DP rank (bytes).")
    host_memory_bytes: int = Field(ge=0, description="Memory request of one engine pod (bytes).")


class CapacityStatus(_Status):
    """The capacity plan the deployment was rendered for."""

    planned_generation: int | None = Field(
        default=None, ge=0,
        description="metadata.generation the children were rendered for. After a refused update it is older than "
        "observedGeneration: the running workloads keep this plan.",
    )
    max_context_tokens: int | None = Field(default=None, ge=0, description="--max-model-len actually rendered.")
    max_context_source: Literal["spec", "model", "kvBudget"] | None = Field(
        default=None,
        description="Where maxContextTokens comes from: spec.model.maxModelLen, the model's limit, or the longest "
        "context the KV budget of every role holds (maxModelLen not set).",
    )
    model_max_context_tokens: int | None = Field(default=None, ge=0, description="The model's context limit.")
    kv_bytes_per_token: int | None = Field(default=None, ge=0, description="KV bytes of one token, all layers.")
    kv_bytes_per_gpu: int | None = Field(default=None, description="Smallest KV budget per GPU over the roles.")
    kv_per_gpu: str | None = Field(default=None, description="kvBytesPerGpu for people, e.g. 15.0Gi.")
    max_concurrent_at_max_context: int | None = Field(
        default=None, ge=0, description="Requests at maxContextTokens the decode (or engine) role holds at once."
    )
    prefill: RoleCapacity | None = None
    decode: RoleCapacity | None = None
    engine: RoleCapacity | None = None


class GLMDeploymentStatus(_Status):
    """``status`` of a GLMDeployment, written by the operator only."""

    observed_generation: int | None = Field(
        default=None, ge=0,
        description="metadata.generation the operator has finished acting on: every child of that spec was applied "
        "and pruned, or the spec was refused (Planned=False, InvalidSpec/CapacityExceeded; the children then keep "
        "the spec of capacity.plannedGeneration and missing ones are restored from it). It does not advance while "
        "a failure (Degraded=True: ApplyFailed, ApiUnavailable, ApiRejected) keeps the children from being applied. "
        "Ready=True additionally means every replica of that spec is ready.",
    )
    conditions: list[Condition] = Field(default_factory=list)
    prefill: ReplicaStatus | None = None
    decode: ReplicaStatus | None = None
    engine: ReplicaStatus | None = None
    router: ReplicaStatus | None = None
    endpoint: str | None = Field(default=None, description="Where clients send OpenAI-compatible requests.")
    capacity: CapacityStatus | None = None
