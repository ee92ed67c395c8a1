"""Bound PersistentVolumeClaims standing in for the volumes a GLMDeployment mounts: its weights
(``spec.model.source.pvc``) or its Hugging Face cache (``spec.model.source.huggingFace.cacheClaimName``).

Pods that mount an unbound or missing claim are never scheduled, so the local cluster pre-binds a PV to each claim
(the PV controller in kube-controller-manager completes the binding), as a storage provisioner would. kwok mounts
nothing: no weights are read.
"""

from __future__ import annotations

from typing import Any

#: What the PV advertises: the FP8 GLM-5.x checkpoint is ~750 GB.
CAPACITY = "1Ti"


def weights_volume(namespace: str, claim: str) -> list[dict[str, Any]]:
    """A PV pre-bound to ``namespace/claim`` and the claim itself (ReadWriteMany, no storage class: the weights
    are mounted read-only, a Hugging Face cache read-write)."""
    pv_name = f"{claim}-{namespace}"
    return [
        {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
            "spec": {
                "capacity": {"storage": CAPACITY}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": f"/models/{pv_name}"},
                "claimRef": {"namespace": namespace, "name": claim},
            },
        },
        {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv_name,
                "resources": {"requests": {"storage": CAPACITY}},
            },
        },
    ]


def claims_of(cr: dict[str, Any]) -> list[tuple[str, str]]:
    """``(namespace, claimName)`` of every claim a GLMDeployment mounts (weights, Hugging Face cache)."""
    source = ((cr.get("spec") or {}).get("model") or {}).get("source") or {}
    claims = [(source.get("pvc") or {}).get("claimName"), (source.get("huggingFace") or {}).get("cacheClaimName")]
    namespace = (cr.get("metadata") or {}).get("namespace") or "default"
    return [(namespace, claim) for claim in claims if claim]
