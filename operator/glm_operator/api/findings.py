"""Structured validation findings shared by the api and plan layers.

A :class:`Finding` names the field (a dotted path into the custom resource, e.g.
``spec.prefill.parallelism.decodeContext``), the offending value, what is wrong and how to fix it.
``glmctl validate`` prints them; the operator puts them into the ``Ready`` condition and an Event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from glm_operator.api.reasons import INVALID_SPEC


class Severity(StrEnum):
    """How bad a finding is: ``error`` blocks rendering and applying; ``warning`` does not."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One problem with a GLMDeployment.

    Attributes:
        field: dotted path of the offending field in the CR, e.g. ``spec.decode.replicas``.
        value: the offending value as the user wrote it (or as defaulted).
        message: what is wrong, with the numbers.
        fix: what to change.
        severity: :class:`Severity`.
        reason: CamelCase condition reason for status (``InvalidSpec``; the capacity rules use
            ``CapacityExceeded``).
    """

    field: str
    value: Any
    message: str
    fix: str
    severity: Severity = Severity.ERROR
    reason: str = INVALID_SPEC

    def __str__(self) -> str:
        return f"{self.field}: {self.message} (value: {show_value(self.value)}). Fix: {self.fix}"


def show_value(value: Any) -> str:
    """A value as a user wrote it in YAML: ``not set`` for None, ``true``/``false``, strings quoted."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


class FieldError(ValueError):
    """A cross-field check inside a pydantic validator that blames one sub-field.

    Raised from a ``model_validator``; :func:`glm_operator.api.load.findings_from_validation_error`
    turns it into a :class:`Finding` at ``<model path>.<field>`` with this value, message and fix
    (pydantic alone would blame the whole model and offer a generic fix).
    """

    def __init__(self, field: str, value: Any, message: str, fix: str) -> None:
        super().__init__(f"{message}; {fix}")
        self.field = field
        self.value = value
        self.message = message
        self.fix = fix


@dataclass
class SpecInvalidError(Exception):
    """Raised when a GLMDeployment cannot be rendered; carries every error finding."""

    findings: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.summary())

    def summary(self) -> str:
        """All findings, one per line."""
        return "\n".join(str(f) for f in self.findings)
