"""Engine roles: one StatefulSet + headless Service per role (prefill, decode, or engine).

Each pod is one vLLM engine owning one GPU node. Pod plumbing follows the field failures listed in
``docs/DESIGN.md``: ``VLLM_NIXL_SIDE_CHANNEL_HOST`` from the pod IP, one ``PYTHONHASHSEED`` on
every pod, a memory-backed ``/dev/shm`` counted inside the memory limit, host memory for the CPU
offload and HiSparse pools, a startupProbe long enough for a ~750 GB checkpoint, a GPU-product node
selector and anti-affinity so one engine owns one node. Decode pods carry the llm-d P/D sidecar as
a native sidecar (init container with ``restartPolicy: Always``, ``reference/llm-d.md`` §1.5).
"""

from __future__ import annotations

import math
from typing import Any

from glm_operator import versions
from glm_operator.api.quantity import canonical_cpu, format_bytes, parse_bytes
from glm_operator.api.spec import GLMDeploymentSpec, RoleSpec
from glm_operator.plan.engine_args import SHUTDOWN_DRAIN_S, WEIGHTS_MOUNT, vllm_args
from glm_operator.plan.memory import host_memory_bytes
from glm_operator.plan.ports import SIDECAR_CONTAINER, VLLM_CONTAINER, RolePorts, role_ports
from glm_operator.plan.profiles import GPU_PRODUCT_LABEL, gpu_profile
from glm_operator.render import names

HF_HOME = "/cache/huggingface"
#: Probe periods (seconds). Startup failureThreshold = startupTimeoutSeconds / period.
STARTUP_PERIOD_S = 10
#: The pod's grace period: vLLM's drain (``--shutdown-timeout``) plus 30 s to exit.
TERMINATION_GRACE_S = SHUTDOWN_DRAIN_S + 30
GPU_RESOURCE = "nvidia.com/gpu"


def _env(spec: GLMDeploymentSpec, role_name: str, role: RoleSpec, ports: RolePorts) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "PYTHONHASHSEED", "value": str(spec.hash_seed)},
        {"name": "VLLM_USE_V2_MODEL_RUNNER", "value": "1"},
    ]
    if ports.nixl:
        env += [
            {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(ports.nixl[0])},
        ]
        if spec.kv_transfer.ucx.tls:
            env.append({"name": "UCX_TLS", "value": spec.kv_transfer.ucx.tls})
        if spec.kv_transfer.ucx.net_devices:
            env.append({"name": "UCX_NET_DEVICES", "value": spec.kv_transfer.ucx.net_devices})
    if role_name == "prefill":
        # vLLM's 5 s keep-alive is shorter than the sidecar's 90 s idle timeout → TCP resets.
        env.append({"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": "120"})
    hf = spec.model.source.hugging_face
    if hf is not None:
        env.append({"name": "HF_HOME", "value": HF_HOME})
        if hf.token_secret is not None:
            env.append({
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": hf.token_secret.name, "key": hf.token_secret.key}},
            })
    return merge_env(env, role)


def merge_env(managed: list[dict[str, Any]], role: RoleSpec) -> list[dict[str, Any]]:
    """The operator's env with the role's ``env`` applied: a user entry replaces a managed one of the
    same name in place (protected names are refused by the rules), others are appended. Empty
    values are rendered without ``value``, as the API server stores them."""
    merged = {entry["name"]: entry for entry in managed}
    for e in role.env:
        entry: dict[str, Any] = {"name": e.name}
        if e.value_from is None and e.value:
            entry["value"] = e.value
        if e.value_from is not None:
            entry["valueFrom"] = e.value_from.model_dump(by_alias=True, exclude_none=True)
        merged[e.name] = entry
    return list(merged.values())


def _volumes(spec: GLMDeploymentSpec, role: RoleSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, vLLM container mounts)."""
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": format_bytes(parse_bytes(role.resources.shm))}},
        {"name": "compile-cache", "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "compile-cache", "mountPath": "/root/.cache"},
    ]
    source = spec.model.source
    if source.pvc is not None:
        pvc_ref = {"claimName": source.pvc.claim_name, "readOnly": True}
        volumes.append({"name": "weights", "persistentVolumeClaim": pvc_ref})
        mount: dict[str, Any] = {"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True}
        if source.pvc.sub_path:
            mount["subPath"] = source.pvc.sub_path
        mounts.append(mount)
    elif source.hugging_face is not None:
        claim = source.hugging_face.cache_claim_name
        volumes.append(
            {"name": "hf-cache", "persistentVolumeClaim": {"claimName": claim}}
            if claim
            else {"name": "hf-cache", "emptyDir": {}}
        )
        mounts.append({"name": "hf-cache", "mountPath": HF_HOME})
    return volumes, mounts


def _probes(spec: GLMDeploymentSpec, port_name: str) -> dict[str, Any]:
    return {
        "startupProbe": {
            "httpGet": {"path": "/health", "port": port_name},
            "periodSeconds": STARTUP_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": math.ceil(spec.startup_timeout_seconds / STARTUP_PERIOD_S),
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": port_name},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/v1/models", "port": port_name},
            "periodSeconds": 5,
            "timeoutSeconds": 2,
            "failureThreshold": 3,
        },
    }


def _vllm_container(
    spec: GLMDeploymentSpec, role_name: str, role: RoleSpec, ports: RolePorts, mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    gpus = str(role.parallelism.world_size)
    memory = format_bytes(host_memory_bytes(spec, role))
    requests: dict[str, str] = {"cpu": canonical_cpu(role.resources.cpu), "memory": memory, GPU_RESOURCE: gpus}
    limits: dict[str, str] = {"memory": memory, GPU_RESOURCE: gpus}
    security: dict[str, Any] = {"allowPrivilegeEscalation": False}
    rdma = spec.kv_transfer.rdma
    if rdma is not None and ports.nixl:
        requests[rdma.resource] = limits[rdma.resource] = str(rdma.count)
        security["capabilities"] = {"add": ["IPC_LOCK"]}
    port_entries = [
        {"name": use.name, "containerPort": use.port, "protocol": "TCP"}
        for use in ports.uses
        if use.container == VLLM_CONTAINER and use.name
    ]
    http_port_name = next(str(e["name"]) for e in port_entries if e["containerPort"] == ports.vllm)
    return {
        "name": VLLM_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["vllm", "serve"],
        "args": vllm_args(spec, role_name, role, ports),
        "env": _env(spec, role_name, role, ports),
        "ports": port_entries,
        "resources": {"requests": requests, "limits": limits},
        "volumeMounts": mounts,
        "securityContext": security,
        **_probes(spec, http_port_name),
    }


def _sidecar(spec: GLMDeploymentSpec, ports: RolePorts) -> dict[str, Any]:
    flags = versions.SIDECAR_FLAGS
    return {
        "name": SIDECAR_CONTAINER,
        "image": versions.SIDECAR_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "args": [
            f"{flags['listen_port']}={ports.serving}",
            f"{flags['model_server_port']}={ports.vllm}",
            f"{flags['kv_connector']}={versions.SIDECAR_KV_CONNECTOR}",
            f"{flags['secure_proxy']}=false",
        ],
        "ports": [{"name": "http", "containerPort": ports.serving, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5},
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def _affinity(spec: GLMDeploymentSpec) -> dict[str, Any]:
    """User affinity with our required anti-affinity term (one GPU engine per node) appended."""
    affinity: dict[str, Any] = {key: value for key, value in spec.scheduling.affinity.items()}
    anti = dict(affinity.get("podAntiAffinity") or {})
    required = list(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    required.append({
        "labelSelector": {"matchExpressions": [{"key": names.LABEL_GPU_ENGINE, "operator": "Exists"}]},
        "topologyKey": "kubernetes.io/hostname",
    })
    anti["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["podAntiAffinity"] = anti
    return affinity


def _tolerations(spec: GLMDeploymentSpec) -> list[dict[str, Any]]:
    """The GPU taint toleration plus the user's, without duplicates."""
    tolerations: list[dict[str, Any]] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    for toleration in spec.scheduling.tolerations:
        entry = toleration.model_dump(by_alias=True, exclude_none=True)
        if entry not in tolerations:
            tolerations.append(entry)
    return tolerations


def _pod_spec(spec: GLMDeploymentSpec, role_name: str, role: RoleSpec, ports: RolePorts) -> dict[str, Any]:
    node_selector = {GPU_PRODUCT_LABEL: gpu_profile(spec).node_label_value, **spec.scheduling.node_selector}
    volumes, mounts = _volumes(spec, role)
    pod: dict[str, Any] = {
        "containers": [_vllm_container(spec, role_name, role, ports, mounts)],
        "volumes": volumes,
        "nodeSelector": node_selector,
        "tolerations": _tolerations(spec),
        "affinity": _affinity(spec),
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        # Service links inject e.g. VLLM_PORT for a Service named "vllm", which vLLM misreads.
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
    }
    if role_name == "decode":
        pod["initContainers"] = [_sidecar(spec, ports)]
    if spec.scheduling.priority_class_name:
        pod["priorityClassName"] = spec.scheduling.priority_class_name
    return pod


def render_role(
    cr_name: str, namespace: str, spec: GLMDeploymentSpec, role_name: str, role: RoleSpec
) -> list[dict[str, Any]]:
    """The headless Service and the StatefulSet of one engine role (in that order)."""
    ports = role_ports(spec, role_name, role)
    name = names.role_name(cr_name, role_name)
    labels = names.common_labels(cr_name, role_name)
    selector = names.selector_labels(cr_name, role_name)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [{"name": "http", "port": ports.serving, "targetPort": ports.serving, "protocol": "TCP"}],
        },
    }
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "serviceName": name,
            "replicas": role.replicas,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": names.engine_pod_labels(cr_name, role_name),
                    "annotations": {"kubectl.kubernetes.io/default-container": VLLM_CONTAINER},
                },
                "spec": _pod_spec(spec, role_name, role, ports),
            },
        },
    }
    return [service, statefulset]
