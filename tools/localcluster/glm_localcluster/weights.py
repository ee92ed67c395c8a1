"""A bound PersistentVolumeClaim standing in for the weights volume examples mount (``spec.model.source.pvc``).

Pods that mount an unbound or missing claim are never scheduled, so the local cluster pre-binds a PV to the claim
(the PV controller in kube-controller-manager completes the binding). kwok mounts nothing: no weights are read.
"""

from __future__ import annotations

from typing import Any

#: What the PV advertises: the FP8 GLM-5.x checkpoint is ~750 GB.
CAPACITY = "1Ti"


def weights_volume(namespace: str, claim: str) -> list[dict[str, Any]]:
    """A PV pre-bound to ``namespace/claim`` and the claim itself (ReadOnlyMany, no storage class)."""
    pv_name = f"{claim}-{namespace}"
    return [
        {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
            "spec": {
                "capacity": {"storage": CAPACITY}, "accessModes": ["ReadOnlyMany"], "storageClassName": "",
                "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/models/{pv_name}"},
                "claimRef": {"namespace": namespace, "name": claim},
            },
        },
        {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": pv_name,
                "resources": {"requests": {"storage": CAPACITY}},
            },
        },
    ]


def claims_of(cr: dict[str, Any]) -> list[tuple[str, str]]:
    """``(namespace, claimName)`` of the weights PVC a GLMDeployment mounts, if any."""
    pvc = ((cr.get("spec") or {}).get("model") or {}).get("source", {}).get("pvc")
    if not pvc:
        return []
    return [(cr["metadata"].get("namespace", "default"), pvc["claimName"])]
