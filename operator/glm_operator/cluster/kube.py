"""The real :class:`~glm_operator.cluster.port.ClusterPort`: the official ``kubernetes`` client.

Every call uses ``_preload_content=False`` and decodes the JSON itself, so objects stay plain
dicts; the per-kind calls are :class:`~glm_operator.cluster.kinds.ChildKind` methods.
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Final, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from glm_operator.api.spec import API_GROUP, API_VERSION, KIND, PLURAL
from glm_operator.cluster.kinds import BY_KIND, CHILD_KINDS, ChildKind, decode
from glm_operator.render import names

COMPONENT: Final = "glm-operator"
#: Kubernetes caps an Event message at 1 KiB in practice (``kubectl describe`` truncates anyway).
MAX_MESSAGE: Final = 1024
MERGE_PATCH: Final = "application/merge-patch+json"

#: The child LISTs of one fallback listing run concurrently (one round trip instead of ten).
_LIST_POOL = ThreadPoolExecutor(max_workers=len(CHILD_KINDS), thread_name_prefix="glm-list")


def child_selector(cr_name: str) -> str:
    """Label selector of every child of one CR."""
    return f"{names.LABEL_DEPLOYMENT}={cr_name},{names.LABEL_MANAGED_BY}={names.MANAGED_BY}"


def read_deployment(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """GET one GLMDeployment as a dict, or ``None`` when it no longer exists.

    Raises:
        ApiException: any answer but 200/404; urllib3/OS errors when the server is unreachable.
    """
    try:
        resp = client.CustomObjectsApi(api).get_namespaced_custom_object(
            API_GROUP, API_VERSION, namespace, PLURAL, name, _preload_content=False
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return decode(resp)


def _list_kind(api: client.ApiClient, kind: ChildKind, namespace: str, selector: str) -> list[dict[str, Any]]:
    try:
        return kind.list(api, namespace, selector)
    except ApiException as exc:
        # A CRD (Gateway API's HTTPRoute, GAIE's InferencePool) may not be installed; that only
        # matters when the spec wants an object of that kind, and then its apply fails naming the CRD.
        if exc.status == 404:
            return []
        raise


class KubeCluster:
    """:class:`~glm_operator.cluster.port.ClusterPort` over one ``kubernetes.client.ApiClient``."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def list_children(self, namespace: str, cr_name: str) -> list[dict[str, Any]]:
        """See :meth:`ClusterPort.list_children`; the ten LISTs run concurrently."""
        selector = child_selector(cr_name)
        batches = _LIST_POOL.map(lambda kind: _list_kind(self.api, kind, namespace, selector), CHILD_KINDS)
        return [item for batch in batches for item in batch]

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """See :meth:`ClusterPort.apply`."""
        return BY_KIND[(obj["apiVersion"], obj["kind"])].apply(self.api, obj)

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """See :meth:`ClusterPort.delete`."""
        BY_KIND[(api_version, kind)].delete(self.api, namespace, name)

    def read_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        """See :meth:`ClusterPort.read_deployment`."""
        return read_deployment(self.api, namespace, name)

    def patch_status(self, namespace: str, name: str, status_patch: dict[str, Any]) -> dict[str, Any]:
        """See :meth:`ClusterPort.patch_status`."""
        return decode(client.CustomObjectsApi(self.api).patch_namespaced_custom_object_status(
            API_GROUP, API_VERSION, namespace, PLURAL, name, {"status": status_patch},
            _content_type=MERGE_PATCH, _preload_content=False,
        ))

    def annotate(self, namespace: str, name: str, annotations: dict[str, str | None]) -> dict[str, Any]:
        """See :meth:`ClusterPort.annotate`."""
        return decode(client.CustomObjectsApi(self.api).patch_namespaced_custom_object(
            API_GROUP, API_VERSION, namespace, PLURAL, name, {"metadata": {"annotations": annotations}},
            _content_type=MERGE_PATCH, _preload_content=False,
        ))

    def post_event(
        self, body: dict[str, Any], *, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        """See :meth:`ClusterPort.post_event` (a core/v1 Event, the kind ``kubectl describe`` shows)."""
        meta = body["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": f"{API_GROUP}/{API_VERSION}",
                "kind": KIND,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": type_,
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": socket.gethostname()[:128],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        client.CoreV1Api(self.api).create_namespaced_event(meta["namespace"], event, _preload_content=False)  # type: ignore[arg-type]
