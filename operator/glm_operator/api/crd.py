"""Generate the GLMDeployment CustomResourceDefinition from the pydantic models.

The pydantic JSON schema is turned into a Kubernetes *structural* OpenAPI v3 schema
(``apiextensions.k8s.io/v1``, "Specifying a structural schema" in the Kubernetes docs):

- every ``$ref`` is inlined (CRDs do not allow ``$ref``);
- ``X | None`` (``anyOf`` with ``null``) becomes ``X`` — optional fields are simply omitted;
- ``const`` becomes a one-value ``enum``; ``title`` and ``additionalProperties: false`` are dropped
  (the API server prunes unknown fields; ``glmctl validate`` reports them); ``patternProperties``
  (constrained map keys) becomes ``additionalProperties`` — CRDs reject it, pydantic still checks keys;
- only scalar, non-null defaults are kept, so ``kubectl explain`` and printer columns see them;
- ``x-kubernetes-validations`` (CEL) and ``x-kubernetes-preserve-unknown-fields`` pass through.
"""

from __future__ import annotations

import copy
from typing import Any

from glm_operator.api.spec import API_GROUP, API_VERSION, KIND, PLURAL, SHORT_NAMES, SINGULAR, GLMDeploymentSpec
from glm_operator.api.status import GLMDeploymentStatus

CRD_NAME = f"{PLURAL}.{API_GROUP}"

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
    {"name": "Max-Context", "type": "integer", "jsonPath": ".status.capacity.maxContextTokens"},
    {"name": "KV/GPU", "type": "string", "jsonPath": ".status.capacity.kvPerGpu"},
    {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

#: JSON-schema keywords CRDs do not accept (``propertyNames`` comes from constrained dict keys,
#: which pydantic still enforces).
_DROP_KEYS = {"title", "$defs", "discriminator", "propertyNames"}


def structural_schema(model_schema: dict[str, Any]) -> dict[str, Any]:
    """Convert a pydantic JSON schema (``model_json_schema(by_alias=True)``) to a structural schema.

    Raises:
        ValueError: if a node cannot be given a ``type`` (the CRD would be rejected as non-structural).
    """
    defs = model_schema.get("$defs", {})
    return _convert(model_schema, defs, path="")


def _convert(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    if "$ref" in node:
        target = defs[node["$ref"].split("/")[-1]]
        merged = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
        return _convert(merged, defs, path)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"{path or '<root>'}: union types are not structural: {node['anyOf']}")
        rest = {k: v for k, v in node.items() if k not in {"anyOf", "default"}}
        if node.get("default") is not None:
            rest["default"] = node["default"]
        return _convert({**options[0], **rest}, defs, path)

    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "default":
            if isinstance(value, str | int | float | bool) and value is not None:
                out["default"] = value
        elif key == "properties":
            out["properties"] = {name: _convert(sub, defs, f"{path}.{name}") for name, sub in value.items()}
        elif key == "description":
            out["description"] = str(value).replace("``", "")
        elif key == "items":
            out["items"] = _convert(value, defs, f"{path}[]")
        elif key == "patternProperties":
            # CRDs reject patternProperties (from constrained dict keys); keys stay checked by pydantic.
            (value_schema,) = value.values()
            out["additionalProperties"] = _convert(value_schema, defs, f"{path}{{}}")
        elif key == "additionalProperties":
            if isinstance(value, dict) and value:
                out["additionalProperties"] = _convert(value, defs, f"{path}{{}}")
            elif value is True or value == {}:
                out["x-kubernetes-preserve-unknown-fields"] = True
        else:
            out[key] = copy.deepcopy(value)
    if "enum" in out and "type" not in out:
        out["type"] = _json_type(out["enum"][0])
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)  # int-or-string nodes carry no type; pattern applies to the string form
        return out
    if "type" not in out:
        raise ValueError(f"{path or '<root>'}: schema node has no type: {node}")
    if out["type"] == "object" and "properties" in out:
        out.pop("x-kubernetes-preserve-unknown-fields", None)
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def spec_schema() -> dict[str, Any]:
    """Structural schema of ``spec``."""
    return structural_schema(GLMDeploymentSpec.model_json_schema(by_alias=True, mode="validation"))


def status_schema() -> dict[str, Any]:
    """Structural schema of ``status``."""
    return structural_schema(GLMDeploymentStatus.model_json_schema(by_alias=True, mode="validation"))


def openapi_schema() -> dict[str, Any]:
    """The whole ``openAPIV3Schema`` of the served version."""
    return {
        "type": "object",
        "description": "GLMDeployment runs a long-context GLM-5.x model on vLLM: prefill and decode engines "
        "with context parallelism, NIXL KV transfer and the llm-d prefix-aware router.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema(),
            "status": status_schema(),
        },
    }


def build_crd() -> dict[str, Any]:
    """The complete ``apiextensions.k8s.io/v1`` CustomResourceDefinition as a dict."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "labels": {"app.kubernetes.io/name": "glm-operator", "app.kubernetes.io/part-of": "glm"},
        },
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": ["glm"],
            },
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                }
            ],
        },
    }
