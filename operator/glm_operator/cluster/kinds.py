"""The child kinds the operator manages and how to list, apply and delete each with the official client.

Every call uses ``_preload_content=False`` and decodes the JSON itself, so objects stay plain
dicts (the same shape the renderer produces) instead of client model classes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, cast

from kubernetes import client

FIELD_MANAGER: Final = "glm-operator"
APPLY_CONTENT_TYPE: Final = "application/apply-patch+yaml"


def decode(response: object) -> dict[str, Any]:
    """The JSON body of a ``_preload_content=False`` response (a urllib3 response) as a dict."""
    result: dict[str, Any] = json.loads(cast(Any, response).data)
    return result


@dataclass(frozen=True)
class ChildKind:
    """One Kubernetes kind the operator creates.

    Attributes:
        api_version: ``group/version`` or ``v1``.
        kind: e.g. ``StatefulSet``.
        plural: resource name, e.g. ``statefulsets``.
        api_class: the typed client class (``None`` for custom resources).
        snake: the typed client's method suffix, e.g. ``stateful_set``.
    """

    api_version: str
    kind: str
    plural: str
    api_class: type | None = None
    snake: str = ""

    @property
    def group(self) -> str:
        """API group ('' for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """API version, e.g. ``v1``."""
        return self.api_version.rpartition("/")[2]

    def list(self, api: client.ApiClient, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """Objects of this kind in ``namespace`` matching ``label_selector``."""
        if self.api_class is None:
            resp = client.CustomObjectsApi(api).list_namespaced_custom_object(
                self.group, self.version, namespace, self.plural, label_selector=label_selector,
                _preload_content=False,
            )
        else:
            method = getattr(self.api_class(api), f"list_namespaced_{self.snake}")
            resp = method(namespace, label_selector=label_selector, _preload_content=False)
        items: list[dict[str, Any]] = decode(resp).get("items") or []
        for item in items:  # a LIST omits kind/apiVersion on items
            item.setdefault("apiVersion", self.api_version)
            item.setdefault("kind", self.kind)
        return items

    def apply(self, api: client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply ``obj`` with the operator's field manager (forcing ownership)."""
        meta = obj["metadata"]
        if self.api_class is None:
            resp = client.CustomObjectsApi(api).patch_namespaced_custom_object(
                self.group, self.version, meta["namespace"], self.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER, force=True, _content_type=APPLY_CONTENT_TYPE, _preload_content=False,
            )
        else:
            method = getattr(self.api_class(api), f"patch_namespaced_{self.snake}")
            resp = method(
                meta["name"], meta["namespace"], obj,
                field_manager=FIELD_MANAGER, force=True, _content_type=APPLY_CONTENT_TYPE, _preload_content=False,
            )
        return decode(resp)

    def delete(self, api: client.ApiClient, namespace: str, name: str) -> None:
        """Delete one object (background propagation: its own dependents are garbage-collected)."""
        body = client.V1DeleteOptions(propagation_policy="Background")
        if self.api_class is None:
            client.CustomObjectsApi(api).delete_namespaced_custom_object(
                self.group, self.version, namespace, self.plural, name, body=body, _preload_content=False
            )
        else:
            method = getattr(self.api_class(api), f"delete_namespaced_{self.snake}")
            method(name, namespace, body=body, _preload_content=False)


CHILD_KINDS: Final[tuple[ChildKind, ...]] = (
    ChildKind("v1", "ServiceAccount", "serviceaccounts", client.CoreV1Api, "service_account"),
    ChildKind("rbac.authorization.k8s.io/v1", "Role", "roles", client.RbacAuthorizationV1Api, "role"),
    ChildKind(
        "rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", client.RbacAuthorizationV1Api, "role_binding"
    ),
    ChildKind("v1", "ConfigMap", "configmaps", client.CoreV1Api, "config_map"),
    ChildKind("v1", "Service", "services", client.CoreV1Api, "service"),
    ChildKind("apps/v1", "StatefulSet", "statefulsets", client.AppsV1Api, "stateful_set"),
    ChildKind("apps/v1", "Deployment", "deployments", client.AppsV1Api, "deployment"),
    ChildKind("inference.networking.k8s.io/v1", "InferencePool", "inferencepools"),
    ChildKind("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes"),
    ChildKind("monitoring.coreos.com/v1", "PodMonitor", "podmonitors"),
)

BY_KIND: Final = {(k.api_version, k.kind): k for k in CHILD_KINDS}


def kind_of(obj: dict[str, Any]) -> ChildKind:
    """The :class:`ChildKind` of a rendered or live object.

    Raises:
        KeyError: for a kind the operator does not manage.
    """
    return BY_KIND[(obj["apiVersion"], obj["kind"])]
