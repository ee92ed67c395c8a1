"""The API permissions the operator needs, derived from its code, and the ones the chart grants.

A permission is ``(apiGroup, resource[/subresource], verb)``. :func:`required_permissions` builds the
set from the code itself, so a new child kind, kopf handler or EPP Role rule changes it:

- every kopf handler registered by :mod:`glm_operator.handlers` (kopf's registry, indices included): list +
  watch of its resource; changing handlers (resume/create/update) also patch it (kopf's progress and
  last-handled annotations);
- every :data:`~glm_operator.cluster.kinds.CHILD_KINDS` entry, per :class:`ChildKind` method
  (:data:`CHILD_METHOD_VERBS`);
- :func:`~glm_operator.cluster.kube.read_deployment` (get), ``KubeCluster.patch_status`` (patch status),
  :meth:`~glm_operator.cluster.kube.KubeCluster.post_event` (create events), ``blockOwnerDeletion`` in the
  owner reference (update ``…/finalizers``);
- every rule of the endpoint picker's Role as rendered with leader election (Kubernetes refuses
  to create a Role that grants more than its creator holds);
- kopf's resource scanning (``kopf/_core/reactor/observation.py``): list + watch CRDs, and
  namespaces when the operator watches chosen namespaces.

:func:`audit_permission` reads the permission the real API server checked for one request of the operator from
its audit log, for the traffic-based test.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Final

import kopf

from glm_operator import handlers  # noqa: F401  (importing registers the kopf handlers)
from glm_operator.api.load import parse
from glm_operator.api.spec import API_GROUP, PLURAL
from glm_operator.cluster.kinds import CHILD_KINDS, ChildKind
from glm_operator.render.manifests import owner_reference, render
from tests.conftest import seed

Permission = tuple[str, str, str]

#: The verbs each I/O method of ChildKind needs: server-side apply of a missing object is a create.
CHILD_METHOD_VERBS: Final = {"list": {"list"}, "apply": {"create", "patch"}, "delete": {"delete"}}


def child_kind_methods() -> set[str]:
    """The public methods of :class:`ChildKind` that call the API (all take the API client)."""
    return {
        name for name, fn in inspect.getmembers(ChildKind, inspect.isfunction)
        if not name.startswith("_") and "api" in inspect.signature(fn).parameters
    }


def _expand(rule: dict[str, Any]) -> set[Permission]:
    return {(g, r, v) for g in rule.get("apiGroups", []) for r in rule.get("resources", []) for v in rule["verbs"]}


def _epp_role_permissions() -> set[Permission]:
    cr = copy.deepcopy(seed())
    cr["spec"].setdefault("router", {})["endpointPicker"] = {"replicas": 2}  # leader election: the widest Role
    roles = [o for o in render(parse(cr)).objects if o["kind"] == "Role"]
    assert roles, "the endpoint picker Role is no longer rendered; revisit the escalation rules"
    return {p for role in roles for rule in role["rules"] for p in _expand(rule)}


def _resource(selector: Any) -> tuple[str, str]:
    """(group, plural) of a kopf selector; handlers name the resource by its plural (``any_name``)."""
    plural = str(selector.plural or selector.any_name or "")
    assert plural and plural == plural.lower(), f"handler selector without a plural: {selector}"
    return str(selector.group or ""), plural


def _handler_permissions() -> set[Permission]:
    registry = kopf.get_default_registry()
    found: set[Permission] = set()
    # kopf keeps handlers per kind of reaction; each lists/watches the selected resource
    for handler in [*registry._indexing.get_all_handlers(), *registry._watching.get_all_handlers()]:
        found |= {(*_resource(handler.selector), verb) for verb in ("list", "watch")}
    for handler in registry._changing.get_all_handlers():
        found |= {(*_resource(handler.selector), verb) for verb in ("list", "watch", "patch")}
    assert found, "no kopf handlers registered"
    return found


def required_permissions(*, namespaced: bool) -> set[Permission]:
    """Everything the operator's code calls (see the module docstring)."""
    assert child_kind_methods() == set(CHILD_METHOD_VERBS), "a ChildKind I/O method changed: update CHILD_METHOD_VERBS"
    needed = _handler_permissions()
    for kind in CHILD_KINDS:
        needed |= {(kind.group, kind.plural, verb) for verbs in CHILD_METHOD_VERBS.values() for verb in verbs}
    needed |= {(API_GROUP, PLURAL, "get"), (API_GROUP, f"{PLURAL}/status", "patch"), ("", "events", "create")}
    cr = parse({**seed(), "metadata": {**seed()["metadata"], "uid": "u"}})
    if owner_reference(cr)["blockOwnerDeletion"]:
        needed.add((API_GROUP, f"{PLURAL}/finalizers", "update"))
    needed |= _epp_role_permissions()
    needed |= {("apiextensions.k8s.io", "customresourcedefinitions", verb) for verb in ("list", "watch")}
    if namespaced:
        needed |= {("", "namespaces", verb) for verb in ("list", "watch")}
    return needed


def granted_permissions(objects: list[dict[str, Any]]) -> tuple[set[Permission], list[dict[str, Any]]]:
    """The permissions of every ClusterRole that a rendered binding binds to, and all rules seen."""
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    bound = {b["roleRef"]["name"] for b in objects if b["kind"] in {"ClusterRoleBinding", "RoleBinding"}}
    rules = [rule for name in bound for rule in roles[name]["rules"]]
    return {p for rule in rules for p in _expand(rule)}, [r for role in roles.values() for r in role["rules"]]


def audit_permission(event: dict[str, Any]) -> set[Permission]:
    """The permissions the API server checked for one audit event (its authorization attributes).

    Empty for non-resource requests (``/version``, discovery). A server-side apply (``patch``) that created the
    object (HTTP 201) was also authorised as ``create``.
    """
    ref = event.get("objectRef") or {}
    if not ref.get("resource"):
        return set()
    resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    found = {(ref.get("apiGroup") or "", resource, event["verb"])}
    if event["verb"] == "patch" and (event.get("responseStatus") or {}).get("code") == 201:
        found.add((ref.get("apiGroup") or "", resource, "create"))
    return found
