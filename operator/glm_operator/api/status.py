"""The ``GLMDeployment`` status as pydantic models (also the source of the CRD status schema).

Conditions follow the Kubernetes API conventions (``metav1.Condition``): ``type``, ``status``
(``True``/``False``/``Unknown``), ``reason`` (CamelCase), ``message``, ``lastTransitionTime``
(changed only when ``status`` flips) and ``observedGeneration``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

ConditionType = Literal["Ready", "Progressing", "Degraded"]


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


class CapacityStatus(_Status):
    """The capacity the deployment was rendered for."""

    max_context_tokens: int | None = Field(default=None, ge=0, description="--max-model-len actually rendered.")


class GLMDeploymentStatus(_Status):
    """``status`` of a GLMDeployment, written by the operator only."""

    observed_generation: int | None = Field(default=None, ge=0)
    conditions: list[Condition] = Field(default_factory=list)
    prefill: ReplicaStatus | None = None
    decode: ReplicaStatus | None = None
    engine: ReplicaStatus | None = None
    router: ReplicaStatus | None = None
    endpoint: str | None = Field(default=None, description="Where clients send OpenAI-compatible requests.")
    capacity: CapacityStatus | None = None
