"""Kubernetes Events about a GLMDeployment, posted with the official client.

kopf's ``kopf.event`` works only inside kopf's handler context; the operator also reconciles from
its resync task and from child watch events, so it posts Events itself (core ``v1`` Events, the
kind ``kubectl describe`` shows).
"""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime
from typing import Any, Final, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from glm_operator.api.spec import API_GROUP, API_VERSION, KIND

COMPONENT: Final = "glm-operator"
#: Kubernetes caps an Event message at 1 KiB in practice (``kubectl describe`` truncates anyway).
MAX_MESSAGE: Final = 1024

log = logging.getLogger(__name__)


def post_event(
    api: client.ApiClient,
    body: dict[str, Any],
    *,
    type_: Literal["Normal", "Warning"],
    reason: str,
    message: str,
) -> None:
    """Create one Event about the CR ``body``. Failures are logged, never raised (an Event is a hint)."""
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
    try:
        client.CoreV1Api(api).create_namespaced_event(meta["namespace"], event, _preload_content=False)  # type: ignore[arg-type]
    except ApiException as exc:
        log.warning("could not post %s Event for %s/%s: HTTP %s", reason, meta["namespace"], meta["name"], exc.status)
