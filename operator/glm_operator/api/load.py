"""Parse a GLMDeployment custom resource (a dict from YAML or the API server) into typed objects.

Every failure becomes a :class:`~glm_operator.api.findings.Finding` that names the field, the value
and the fix; nothing here raises a raw pydantic traceback at the user.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from glm_operator.api.findings import FieldError, Finding, SpecInvalidError
from glm_operator.api.spec import (
    API_GROUP,
    API_VERSION,
    KIND,
    LABEL_KEY_PATTERN,
    LABEL_VALUE_PATTERN,
    GLMDeploymentSpec,
)

#: Child names are ``<name>-prefill``, ``<name>-decode-<ordinal>``, ``<name>-epp`` …; Services need
#: DNS-1035 labels and the llm-d charts truncate release names to 40 characters.
NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME_LENGTH = 40
#: DNS-1123 label, at most 63 characters (Kubernetes namespace names).
NAMESPACE_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: ``ObjectMeta`` fields (k8s.io/apimachinery ``metav1.ObjectMeta``); anything else is a typo.
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
})


@dataclass(frozen=True)
class GLMDeployment:
    """A parsed custom resource: identity plus the typed spec.

    Attributes:
        name, namespace: ``metadata.name`` / ``metadata.namespace`` (namespace ``default`` when absent,
            as ``kubectl apply`` would use).
        uid: ``metadata.uid`` (empty for files that were never applied).
        generation: ``metadata.generation`` (0 for files).
        spec: the validated spec with defaults.
    """

    name: str
    namespace: str
    uid: str
    generation: int
    spec: GLMDeploymentSpec


def parse(resource: dict[str, Any]) -> GLMDeployment:
    """Validate a GLMDeployment dict and return it typed.

    Raises:
        SpecInvalidError: with one finding per problem (wrong apiVersion/kind, bad name, every
            schema violation of the spec).
    """
    findings: list[Finding] = []
    api_version = resource.get("apiVersion")
    if api_version != f"{API_GROUP}/{API_VERSION}":
        findings.append(
            Finding("apiVersion", api_version, "unsupported apiVersion", f"use {API_GROUP}/{API_VERSION}")
        )
    if resource.get("kind") != KIND:
        findings.append(Finding("kind", resource.get("kind"), "not a GLMDeployment", f"use kind: {KIND}"))
    metadata = resource.get("metadata") or {}
    if not isinstance(metadata, dict):
        metadata = {}
        findings.append(Finding("metadata", resource.get("metadata"), "must be a mapping", "add metadata.name"))
    for key in sorted(set(metadata) - OBJECT_META_FIELDS):
        close = difflib.get_close_matches(key, OBJECT_META_FIELDS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        findings.append(Finding(f"metadata.{key}", metadata[key], "unknown field", f"{hint}remove it"))
    findings += _check_labels(metadata)
    namespace = metadata.get("namespace")
    if namespace is not None and not (isinstance(namespace, str) and NAMESPACE_PATTERN.match(namespace)):
        findings.append(Finding(
            "metadata.namespace", namespace, "not a valid namespace name",
            "use a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters",
        ))
    name = str(metadata.get("name") or "")
    if not NAME_PATTERN.match(name) or len(name) > MAX_NAME_LENGTH:
        findings.append(
            Finding(
                "metadata.name",
                name,
                f"must be a DNS-1035 label of at most {MAX_NAME_LENGTH} characters (children append suffixes)",
                "use lowercase letters, digits and '-', starting with a letter, e.g. glm-5-3",
            )
        )
    spec_raw = resource.get("spec")
    spec: GLMDeploymentSpec | None = None
    if not isinstance(spec_raw, dict):
        findings.append(Finding("spec", spec_raw, "spec is missing", "add spec.model.name and spec.image"))
    else:
        null_paths = _null_paths(spec_raw, "spec")
        findings.extend(
            Finding(
                path, None,
                "explicit null: the API server drops it before defaulting, so the default would apply in the "
                "cluster while glmctl would render no value",
                "remove the field to get the default, or set an explicit value (e.g. enabled: false, or 0 for a pool)",
            )
            for path in null_paths
        )
        try:
            spec = GLMDeploymentSpec.model_validate(spec_raw)
        except ValidationError as exc:
            findings.extend(
                f for f in findings_from_validation_error(exc, GLMDeploymentSpec, prefix="spec")
                if f.field not in null_paths  # already reported as an explicit null
            )
    if findings or spec is None:
        raise SpecInvalidError(findings)
    return GLMDeployment(
        name=name,
        namespace=str(metadata.get("namespace") or "default"),
        uid=str(metadata.get("uid") or ""),
        generation=int(metadata.get("generation") or 0),
        spec=spec,
    )


def _check_labels(metadata: dict[str, Any]) -> list[Finding]:
    """``metadata.labels`` keys/values and ``metadata.annotations`` values the API server accepts."""
    found = []
    for key, value in (metadata.get("labels") or {}).items():
        if not re.match(LABEL_KEY_PATTERN, str(key)) or not isinstance(value, str) or not re.match(
            LABEL_VALUE_PATTERN, value
        ):
            found.append(Finding(
                f"metadata.labels.{key}", value, "not a valid label",
                "keys are [prefix/]name (letters, digits, '-', '_', '.'), values at most 63 such characters",
            ))
    for key, value in (metadata.get("annotations") or {}).items():
        if not isinstance(value, str):
            found.append(Finding(f"metadata.annotations.{key}", value, "annotation values must be strings",
                                 "quote the value"))
    return found


def _null_paths(node: Any, path: str) -> list[str]:
    """Dotted paths of every explicit ``null`` below ``node``."""
    if isinstance(node, dict):
        found = []
        for key, value in node.items():
            child = f"{path}.{key}"
            found += [child] if value is None else _null_paths(value, child)
        return found
    if isinstance(node, list):
        return [p for i, value in enumerate(node) for p in _null_paths(value, f"{path}[{i}]")]
    return []


def findings_from_validation_error(exc: ValidationError, model: type[BaseModel], prefix: str) -> list[Finding]:
    """Turn a pydantic :class:`ValidationError` into findings with camelCase paths and a fix each."""
    findings = []
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        path = prefix + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, FieldError):
            findings.append(Finding(field=f"{path}.{cause.field}", value=cause.value, message=cause.message,
                                    fix=cause.fix))
            continue
        findings.append(
            Finding(
                field=path,
                value=None if error["type"] == "missing" else error.get("input"),
                message=_message(error),
                fix=_fix(error, model, loc),
            )
        )
    return findings


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "string_pattern_mismatch" and "Ki|Mi|Gi" in str((error.get("ctx") or {}).get("pattern")):
        value = str(error.get("input", ""))
        return "a negative size" if value.startswith("-") else "not a Kubernetes memory quantity"
    return str(error["msg"]).removeprefix("Value error, ")


def _fix(error: Any, model: type[BaseModel], loc: list[str]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        known = _known_fields(model, loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"{hint}remove it or use one of: {', '.join(sorted(known))}"
    if kind == "missing":
        return f"set {loc[-1]}"
    if kind in {"greater_than_equal", "greater_than"}:
        return f"use a value >= {ctx.get('ge', ctx.get('gt'))}"
    if kind in {"less_than_equal", "less_than"}:
        return f"use a value <= {ctx.get('le', ctx.get('lt'))}"
    if kind == "literal_error":
        return f"use one of {ctx.get('expected')}"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        if "Ki|Mi|Gi" in pattern:
            return "write a Kubernetes memory quantity such as 48Gi or 512Gi"
        return f"match the pattern {pattern}"
    return "correct the value to the documented type (`glmctl crd` or `kubectl explain glmdeployment.spec` shows it)"


def _known_fields(model: type[BaseModel], loc: list[str]) -> list[str]:
    """camelCase field names of the sub-model reached by following ``loc`` from ``model``."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None or part.isdigit():
            continue
        nxt: type[BaseModel] | None = None
        for name, info in current.model_fields.items():
            if part in {name, info.alias}:
                nxt = _submodel(info.annotation)
                break
        current = nxt
    if current is None:
        return []
    return [info.alias or name for name, info in current.model_fields.items()]


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel class inside ``X``, ``X | None`` or ``list[X]``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _submodel(arg)
        if found is not None:
            return found
    return None
