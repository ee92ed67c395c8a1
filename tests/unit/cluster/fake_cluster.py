"""An in-memory :class:`~glm_operator.cluster.port.ClusterPort` for unit tests.

Stores objects by ``(apiVersion, kind, namespace, name)``, bumps an integer ``resourceVersion`` on
every write, records every call in :attr:`FakeCluster.calls` and raises injected failures:
``fake.fail("apply", ApiException(status=500), times=1, match="StatefulSet")``.
"""

from __future__ import annotations

import copy
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from kubernetes.client.exceptions import ApiException

from glm_operator.api.spec import API_GROUP, API_VERSION, KIND
from glm_operator.cluster.index import index_pod
from glm_operator.cluster.kinds import BY_KIND
from glm_operator.render import names

Key = tuple[str, str, str, str]


@dataclass
class _Injection:
    method: str
    error: BaseException
    times: int
    match: str


@dataclass
class FakeCluster:
    """The fake cluster. ``objects`` holds children and CRs alike (CRs under ``(group/version, KIND, ns, name)``)."""

    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    #: Pods of the workloads, by ``(namespace, name)``: never children (the operator neither lists nor writes them).
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    injections: list[_Injection] = field(default_factory=list)
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- test helpers -------------------------------------------------------------------------
    def fail(self, method: str, error: BaseException, *, times: int = 1, match: str = "") -> None:
        """Make the next ``times`` calls of ``method`` whose target contains ``match`` raise ``error``."""
        self.injections.append(_Injection(method, error, times, match))

    def add_cr(self, body: dict[str, Any]) -> dict[str, Any]:
        """Store a GLMDeployment (uid/generation/resourceVersion defaulted); returns the stored copy."""
        body = copy.deepcopy(body)
        meta = body.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[(f"{API_GROUP}/{API_VERSION}", KIND, meta["namespace"], meta["name"])] = body
        return copy.deepcopy(body)

    def cr(self, namespace: str, name: str) -> dict[str, Any]:
        """A copy of the stored CR."""
        return copy.deepcopy(self.objects[(f"{API_GROUP}/{API_VERSION}", KIND, namespace, name)])

    def children(self, namespace: str = "default") -> dict[tuple[str, str], dict[str, Any]]:
        """``{(kind, name): obj}`` of the stored children in ``namespace``."""
        return {(k[1], k[3]): v for k, v in self.objects.items() if k[1] != KIND and k[2] == namespace}

    def remove(self, kind: str, name: str, namespace: str = "default") -> None:
        """Delete a child behind the operator's back (as ``kubectl delete`` would)."""
        key = next(k for k in self.objects if k[1] == kind and k[2] == namespace and k[3] == name)
        del self.objects[key]

    def set_pod(self, pod: dict[str, Any]) -> None:
        """Create or replace a pod (as the StatefulSet controller, scheduler and kubelet would)."""
        meta = pod["metadata"]
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-pod-{meta['name']}")
        meta["resourceVersion"] = str(next(self._versions))
        self.pods[(meta["namespace"], meta["name"])] = copy.deepcopy(pod)

    def indexed_pods(self, namespace: str, cr_name: str) -> list[dict[str, Any]]:
        """The CR's pods as the operator's watch index holds them (:func:`~glm_operator.cluster.index.index_pod`)."""
        entries = [index_pod(pod) for pod in self.pods.values()]
        return [entry[(namespace, cr_name)] for entry in entries if (namespace, cr_name) in entry]

    def count(self, *methods: str) -> int:
        """How many calls of these methods were made (all methods when none are given)."""
        return sum(1 for method, _ in self.calls if not methods or method in methods)

    def _call(self, method: str, target: str) -> None:
        self.calls.append((method, target))
        for injection in self.injections:
            if injection.method == method and injection.match in target and injection.times > 0:
                injection.times -= 1
                raise injection.error

    # --- ClusterPort ----------------------------------------------------------------------------
    def list_children(self, namespace: str, cr_name: str) -> list[dict[str, Any]]:
        with self._lock:
            self._call("list_children", f"{namespace}/{cr_name}")
            return [
                copy.deepcopy(obj) for (_, kind, ns, _), obj in self.objects.items()
                if kind != KIND and ns == namespace
                and (obj["metadata"].get("labels") or {}).get(names.LABEL_DEPLOYMENT) == cr_name
                and (obj["metadata"].get("labels") or {}).get(names.LABEL_MANAGED_BY) == names.MANAGED_BY
            ]

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            meta = obj["metadata"]
            self._call("apply", f"{obj['kind']}/{meta['name']}")
            if (obj["apiVersion"], obj["kind"]) not in BY_KIND:
                raise ApiException(status=404, reason="Not Found")
            key = (obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
            stored = copy.deepcopy(obj)
            old = self.objects.get(key)
            if old is not None and "status" in old:
                stored["status"] = old["status"]
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
            stored["metadata"].setdefault("generation", 1)
            self.objects[key] = stored
            return copy.deepcopy(stored)

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            self._call("delete", f"{kind}/{name}")
            if self.objects.pop((api_version, kind, namespace, name), None) is None:
                raise ApiException(status=404, reason="Not Found")

    def read_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            self._call("read_deployment", f"{namespace}/{name}")
            found = self.objects.get((f"{API_GROUP}/{API_VERSION}", KIND, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def patch_status(self, namespace: str, name: str, status_patch: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._call("patch_status", f"{namespace}/{name}")
            body = self.objects[(f"{API_GROUP}/{API_VERSION}", KIND, namespace, name)]
            status = body.setdefault("status", {})
            for key, value in status_patch.items():
                if value is None:
                    status.pop(key, None)
                else:
                    status[key] = copy.deepcopy(value)
            body["metadata"]["resourceVersion"] = str(next(self._versions))
            return copy.deepcopy(body)

    def annotate(self, namespace: str, name: str, annotations: dict[str, str | None]) -> dict[str, Any]:
        with self._lock:
            self._call("annotate", f"{namespace}/{name}")
            body = self.objects[(f"{API_GROUP}/{API_VERSION}", KIND, namespace, name)]
            current = body["metadata"].setdefault("annotations", {})
            for key, value in annotations.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value
            body["metadata"]["resourceVersion"] = str(next(self._versions))
            return copy.deepcopy(body)

    def post_event(
        self, body: dict[str, Any], *, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        with self._lock:
            self._call("post_event", reason)
            self.events.append({"type": type_, "reason": reason, "message": message,
                                "name": body["metadata"]["name"]})
