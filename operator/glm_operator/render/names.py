"""Child object names and labels, shared by every renderer.

Label keys: the ``app.kubernetes.io/*`` recommended labels, ``llm-d.ai/role`` (the endpoint
picker's prefill/decode filters read it; a pod without it counts as decode, ``reference/llm-d.md``
§1.4), and our own ``serving.glm.dev/*`` keys for selectors.
"""

from __future__ import annotations

from typing import Final

from glm_operator.api.spec import API_GROUP

MANAGED_BY: Final = "glm-operator"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_DEPLOYMENT: Final = f"{API_GROUP}/deployment"
#: The workload a child belongs to (``prefill``, ``decode``, ``engine``, ``router``), also on its pods.
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_ROLE: Final = f"{API_GROUP}/role"
#: The one label prefill and decode pods share; the InferencePool selects on it.
LABEL_POOL: Final = f"{API_GROUP}/pool"
#: Present on every GPU engine pod of any GLMDeployment: pod anti-affinity keeps one engine per node.
LABEL_GPU_ENGINE: Final = f"{API_GROUP}/gpu-engine"
LABEL_LLMD_ROLE: Final = "llm-d.ai/role"
ANNOTATION_CONFIG_HASH: Final = f"{API_GROUP}/config-hash"
#: Hash of a child's rendered content; see :func:`glm_operator.render.manifests.stamp_applied_hash`.
ANNOTATION_APPLIED_HASH: Final = f"{API_GROUP}/applied-hash"

#: ``llm-d.ai/role`` value per engine role (an aggregated engine does both).
LLMD_ROLES: Final = {"prefill": "prefill", "decode": "decode", "engine": "prefill-decode"}


def role_name(cr_name: str, role: str) -> str:
    """StatefulSet and headless Service name of a role: ``<cr>-<role>``."""
    return f"{cr_name}-{role}"


def epp_name(cr_name: str) -> str:
    """Endpoint picker Deployment/Service/ConfigMap/ServiceAccount/Role name: ``<cr>-epp``."""
    return f"{cr_name}-epp"


def pool_name(cr_name: str) -> str:
    """InferencePool (and HTTPRoute) name: the CR name, as the llm-d charts name it after the release."""
    return cr_name


def common_labels(cr_name: str, component: str) -> dict[str, str]:
    """Labels on every child object (and used by the operator to find its children)."""
    return {
        "app.kubernetes.io/name": "glm-deployment",
        "app.kubernetes.io/instance": cr_name,
        LABEL_COMPONENT: component,
        "app.kubernetes.io/part-of": "glm",
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_DEPLOYMENT: cr_name,
    }


def selector_labels(cr_name: str, role: str) -> dict[str, str]:
    """Immutable StatefulSet selector of a role's pods."""
    return {LABEL_DEPLOYMENT: cr_name, LABEL_ROLE: role}


def epp_selector_labels(cr_name: str) -> dict[str, str]:
    """Immutable selector of the endpoint picker's pods (Deployment, Service, PodMonitor)."""
    return {LABEL_DEPLOYMENT: cr_name, "app.kubernetes.io/component": "router"}


def engine_pod_labels(cr_name: str, role: str) -> dict[str, str]:
    """Labels of an engine pod: common + selector + pool membership + llm-d role."""
    return {
        **common_labels(cr_name, role),
        **selector_labels(cr_name, role),
        LABEL_POOL: cr_name,
        LABEL_LLMD_ROLE: LLMD_ROLES[role],
        LABEL_GPU_ENGINE: "true",
    }
