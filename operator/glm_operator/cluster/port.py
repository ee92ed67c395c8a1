"""The seam between reconcile logic and the cluster: :class:`ClusterPort`.

Reconcile code talks to the API server only through this protocol. The real adapter is
:class:`glm_operator.cluster.kube.KubeCluster` (the official ``kubernetes`` client); unit tests use
an in-memory fake (``tests/unit/cluster/fake_cluster.py``) that can inject failures per call.

Objects are plain dicts in the shape the API server returns (``apiVersion``, ``kind``,
``metadata``, ``spec``, ``status``). Methods are synchronous (the official client blocks; the
scheduler runs reconciles in a worker thread) and raise whatever the transport raises
(``ApiException``, ``urllib3`` errors, ``OSError``, ...); :func:`glm_operator.cluster.errors.classify`
sorts those out.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol


class ClusterPort(Protocol):
    """What the operator does to the cluster: read its CR, list/apply/delete children, write status,
    annotate the CR and post Events."""

    def list_children(self, namespace: str, cr_name: str) -> list[dict[str, Any]]:
        """Every child of every :data:`~glm_operator.cluster.kinds.CHILD_KINDS` kind labelled for CR
        ``cr_name`` in ``namespace`` (kinds whose CRD is not installed contribute nothing)."""
        ...

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply ``obj`` (field manager ``glm-operator``, forced); returns the object as
        stored, with its new ``metadata.resourceVersion``."""
        ...

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """Delete one child (background propagation). Raises an ``ApiException`` 404 when it is gone."""
        ...

    def read_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        """GET one GLMDeployment, or ``None`` when it does not exist."""
        ...

    def patch_status(self, namespace: str, name: str, status_patch: dict[str, Any]) -> dict[str, Any]:
        """JSON-merge-patch the ``status`` subresource with ``{"status": status_patch}``; returns the CR as the
        API server stored it."""
        ...

    def annotate(self, namespace: str, name: str, annotations: dict[str, str | None]) -> dict[str, Any]:
        """JSON-merge-patch ``metadata.annotations`` of the GLMDeployment (``None`` removes a key); returns the CR
        as the API server stored it."""
        ...

    def post_event(
        self, body: dict[str, Any], *, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        """Create one core/v1 Event about the CR ``body`` (raises on failure; callers treat Events as
        best effort)."""
        ...
