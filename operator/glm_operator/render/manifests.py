"""Render a whole GLMDeployment: rules first, then every child object, in a fixed order."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from glm_operator.api.findings import Finding, SpecInvalidError
from glm_operator.api.load import GLMDeployment
from glm_operator.api.spec import API_GROUP, API_VERSION, KIND
from glm_operator.plan import rules
from glm_operator.plan.capacity import Plan, plan_deployment
from glm_operator.render import names
from glm_operator.render.engine import render_role
from glm_operator.render.monitoring import render_pod_monitors
from glm_operator.render.router import endpoint, render_router


@dataclass(frozen=True)
class Rendered:
    """The result of rendering one GLMDeployment.

    Attributes:
        objects: child objects (dicts) in apply order: per role Service then StatefulSet, then the
            router objects, then PodMonitors (``spec.monitoring.podMonitors``).
        warnings: non-blocking findings of the rules.
        endpoint: where clients send requests.
        plan: the capacity plan the objects were rendered for.
    """

    objects: list[dict[str, Any]]
    plan: Plan
    warnings: list[Finding] = field(default_factory=list)
    endpoint: str = ""

    @property
    def max_context_tokens(self) -> int:
        """The ``--max-model-len`` rendered (tokens)."""
        return self.plan.max_model_len


def owner_reference(deployment: GLMDeployment) -> dict[str, Any]:
    """The controller owner reference children carry (garbage-collected with the CR)."""
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "name": deployment.name,
        "uid": deployment.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def stamp_applied_hash(obj: dict[str, Any]) -> None:
    """Annotate ``obj`` with a hash of its rendered content (:data:`names.ANNOTATION_APPLIED_HASH`).

    Drift detection compares rendered objects as a subset of live ones, which cannot see a field
    the new render *removed* (a dropped nodeSelector entry, RDMA capability, ...). The hash changes
    with any rendered change, removals included, so such a child is still re-applied (server-side
    apply then drops the fields this field manager no longer sets).
    """
    digest = hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    obj["metadata"].setdefault("annotations", {})[names.ANNOTATION_APPLIED_HASH] = digest


def render(deployment: GLMDeployment) -> Rendered:
    """Check the rules and render every child.

    Owner references are added when the deployment has a ``uid`` (it came from the API server);
    files rendered offline (``glmctl render``) get none.

    Raises:
        SpecInvalidError: when any rule reports an error; nothing is rendered then.
    """
    spec = deployment.spec
    findings = rules.check(spec)
    blocking = rules.errors(findings)
    if blocking:
        raise SpecInvalidError(blocking)
    objects: list[dict[str, Any]] = []
    for role_name, role in spec.roles().items():
        objects += render_role(deployment.name, deployment.namespace, spec, role_name, role)
    objects += render_router(deployment.name, deployment.namespace, spec)
    objects += render_pod_monitors(deployment.name, deployment.namespace, spec)
    objects = [copy.deepcopy(obj) for obj in objects]
    for obj in objects:
        if deployment.uid:
            obj["metadata"]["ownerReferences"] = [owner_reference(deployment)]
        stamp_applied_hash(obj)
    return Rendered(
        objects=objects,
        warnings=[f for f in findings if f not in blocking],
        endpoint=endpoint(deployment.name, deployment.namespace, spec),
        plan=plan_deployment(spec),
    )
