"""The llm-d prefix-aware router: endpoint picker (EPP), its RBAC and config, InferencePool, HTTPRoute.

Shapes follow the llm-d router charts at v0.10.0 (``reference/llm-d.md`` §1.1–1.3, §1.6, §2.4):
EPP Deployment with one active replica (``Recreate``; leader election when >1), ext-proc gRPC on
9002, health on 9003, metrics on 9090; an InferencePool selecting prefill *and* decode pods by
one shared label, ``targetPorts`` = the serving port, ``failureMode: FailOpen``.

Without a Gateway the router runs *standalone* as llm-d documents it: Envoy beside the EPP in the
same pod (listener 8081, ext_proc to the EPP on localhost, ORIGINAL_DST routing on the
``x-gateway-destination-endpoint`` header) and the EPP Service exposes port 80 → 8081. With a
Gateway, an HTTPRoute sends ``/`` to the InferencePool.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from glm_operator import versions
from glm_operator.api.spec import GLMDeploymentSpec
from glm_operator.plan.engine_args import max_model_len
from glm_operator.render import names
from glm_operator.render.monitoring import epp_metrics_args

EPP_GRPC_PORT = 9002
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
ENVOY_PORT = 8081
ENVOY_ADMIN_PORT = 19000
STANDALONE_SERVICE_PORT = 80
EPP_CONFIG_FILE = "epp-config.yaml"
ENVOY_CONFIG_FILE = "envoy.yaml"
#: Prefix-index entries (KV blocks) the router remembers per engine. llm-d's default, 31,250, is sized
#: for an 8B model on one H100 (~2M tokens at block 64). Seed system A keeps ~10M tokens per engine in
#: its CPU/host tiers (512 GiB at ~54.7 KB/token), i.e. ~150K blocks of 64 tokens; 262,144 entries
#: (16.7M tokens) cover it for ~30 MB of EPP memory per engine.
LRU_CAPACITY_PER_SERVER = 262_144
#: llm-d charts time out routed requests after 300 s; long-context prefills need more.
ROUTE_TIMEOUT = "3600s"


def epp_config(spec: GLMDeploymentSpec) -> dict[str, Any]:
    """The ``EndpointPickerConfig`` (llm-d router v0.10, ``llm-d.ai/v1alpha1``).

    Disaggregated: ``disagg-profile-handler`` with ``prefix-based-pd-decider`` and two profiles
    (prefill: prefill-filter + prefix-cache + queue; decode: decode-filter + prefix-cache + queue +
    kv-cache-utilization). Aggregated: ``single-profile-handler`` with one profile.
    The prefix producer hashes blocks of ``kvCache.blockSize`` tokens like the engines, with
    ``autoTune: false`` (auto-tune left the producer unpopulated in llm-d v0.8, modelplane PR #175),
    an LRU sized for long contexts (:data:`LRU_CAPACITY_PER_SERVER`),
    and matches prefixes up to ``maxModelLen`` tokens (agentic prompts share prefixes far beyond the
    default 131,072).
    """
    weights = spec.router.endpoint_picker.scorers
    decider = spec.router.endpoint_picker.pd_decider
    plugins: list[dict[str, Any]] = [
        {
            "type": "approx-prefix-cache-producer",
            "parameters": {
                "autoTune": False,
                "blockSizeTokens": spec.kv_cache.block_size,
                "maxPrefixTokensToMatch": max_model_len(spec),
                "lruCapacityPerServer": LRU_CAPACITY_PER_SERVER,
            },
        },
        {"type": "prefix-cache-scorer"},
        {"type": "queue-scorer"},
        {"type": "kv-cache-utilization-scorer"},
        {"type": "max-score-picker"},
    ]
    scorers = [
        {"pluginRef": "prefix-cache-scorer", "weight": weights.prefix_cache},
        {"pluginRef": "queue-scorer", "weight": weights.queue},
    ]
    kv_scorer = {"pluginRef": "kv-cache-utilization-scorer", "weight": weights.kv_cache_utilization}
    picker = {"pluginRef": "max-score-picker"}
    if spec.mode == "aggregated":
        plugins.append({"type": "single-profile-handler"})
        profiles = [{"name": "default", "plugins": [*scorers, kv_scorer, picker]}]
    else:
        plugins += [
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            {
                "type": "prefix-based-pd-decider",
                "parameters": {"nonCachedTokens": decider.non_cached_tokens, "promptTokens": decider.prompt_tokens},
            },
            {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "prefix-based-pd-decider"}}},
        ]
        profiles = [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, *scorers, picker]},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}, *scorers, kv_scorer, picker]},
        ]
    return {
        "apiVersion": versions.EPP_CONFIG_API_VERSION,
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": profiles,
    }


def envoy_config() -> dict[str, Any]:
    """Envoy bootstrap of the standalone router (llm-d ``llm-d-router-standalone`` chart shape)."""
    ext_proc = {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
        "grpc_service": {"envoy_grpc": {"cluster_name": "ext_proc"}, "timeout": "10s"},
        "failure_mode_allow": True,
        "message_timeout": "1000s",
        "processing_mode": {
            "request_header_mode": "SEND",
            "response_header_mode": "SEND",
            "request_body_mode": "FULL_DUPLEX_STREAMED",
            "response_body_mode": "FULL_DUPLEX_STREAMED",
            "request_trailer_mode": "SEND",
            "response_trailer_mode": "SEND",
        },
    }
    manager = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network."
        "http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "http",
        "route_config": {
            "name": "local_route",
            "virtual_hosts": [{
                "name": "backend",
                "domains": ["*"],
                "routes": [{
                    "match": {"prefix": "/"},
                    "route": {"cluster": "original_destination_cluster", "timeout": "86400s"},
                }],
            }],
        },
        "http_filters": [
            {"name": "envoy.filters.http.ext_proc", "typed_config": ext_proc},
            {
                "name": "envoy.filters.http.router",
                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
            },
        ],
    }
    http2 = {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": {}},
        }
    }
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": ENVOY_ADMIN_PORT}}},
        "static_resources": {
            "listeners": [{
                "name": "listener_0",
                "address": {"socket_address": {"address": "0.0.0.0", "port_value": ENVOY_PORT}},
                "filter_chains": [{
                    "filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}]
                }],
            }],
            "clusters": [
                {
                    "name": "original_destination_cluster",
                    "type": "ORIGINAL_DST",
                    "connect_timeout": "1000s",
                    "lb_policy": "CLUSTER_PROVIDED",
                    "original_dst_lb_config": {
                        "use_http_header": True,
                        "http_header_name": "x-gateway-destination-endpoint",
                    },
                },
                {
                    "name": "ext_proc",
                    "type": "STATIC",
                    "connect_timeout": "10s",
                    "lb_policy": "ROUND_ROBIN",
                    "typed_extension_protocol_options": http2,
                    "load_assignment": {
                        "cluster_name": "ext_proc",
                        "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                            "address": "127.0.0.1", "port_value": EPP_GRPC_PORT,
                        }}}}]}],
                    },
                },
            ]
        },
    }


def _dump(value: dict[str, Any]) -> str:
    return yaml.safe_dump(value, sort_keys=True, default_flow_style=False)


def _standalone(spec: GLMDeploymentSpec) -> bool:
    return spec.router.gateway is None


def endpoint(cr_name: str, namespace: str, spec: GLMDeploymentSpec) -> str:
    """Where clients send requests: the standalone router Service URL, or the Gateway."""
    gateway = spec.router.gateway
    if gateway is None:
        return f"http://{names.epp_name(cr_name)}.{namespace}.svc:{STANDALONE_SERVICE_PORT}"
    return f"gateway {gateway.namespace or namespace}/{gateway.name}"


def render_router(cr_name: str, namespace: str, spec: GLMDeploymentSpec) -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding, ConfigMap, Deployment, Service, InferencePool [, HTTPRoute]."""
    name = names.epp_name(cr_name)
    labels = names.common_labels(cr_name, "router")
    meta = {"name": name, "namespace": namespace, "labels": labels}
    epp_spec = spec.router.endpoint_picker
    standalone = _standalone(spec)

    config_data = {EPP_CONFIG_FILE: _dump(epp_config(spec))}
    if standalone:
        config_data[ENVOY_CONFIG_FILE] = _dump(envoy_config())
    config_hash = hashlib.sha256(_dump(config_data).encode()).hexdigest()[:16]

    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": [versions.INFERENCE_POOL_GROUP],
            "resources": ["inferencepools"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["llm-d.ai", "inference.networking.x-k8s.io"],
            "resources": ["inferenceobjectives", "inferencemodelrewrites"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    if epp_spec.replicas > 1:
        rules += [
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        ]

    args = [
        f"--pool-name={names.pool_name(cr_name)}",
        f"--pool-namespace={namespace}",
        f"--pool-group={versions.INFERENCE_POOL_GROUP}",
        "--zap-encoder=json",
        f"--config-file=/config/{EPP_CONFIG_FILE}",
        f"--grpc-port={EPP_GRPC_PORT}",
        f"--grpc-health-port={EPP_HEALTH_PORT}",
        f"--metrics-port={EPP_METRICS_PORT}",
        "--tracing=false",
        *epp_metrics_args(spec),
    ]
    if standalone or not epp_spec.secure_serving:
        # standalone: Envoy reaches the EPP on localhost inside the pod, plaintext gRPC
        args.append("--secure-serving=false")
    if epp_spec.replicas > 1:
        args.append("--ha-enable-leader-election")
    # with leader election the EPP serves separate liveness/readiness gRPC health services
    liveness, readiness = (
        ("liveness", "readiness") if epp_spec.replicas > 1 else ("inference-extension", "inference-extension")
    )
    containers: list[dict[str, Any]] = [{
        "name": "epp",
        "image": versions.EPP_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "env": [
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [
            {"name": "grpc", "containerPort": EPP_GRPC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": EPP_METRICS_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": {
            "grpc": {"port": EPP_HEALTH_PORT, "service": liveness}, "initialDelaySeconds": 5, "periodSeconds": 10,
        },
        "readinessProbe": {
            "grpc": {"port": EPP_HEALTH_PORT, "service": readiness}, "initialDelaySeconds": 5, "periodSeconds": 2,
        },
        "resources": {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"memory": "16Gi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
        "securityContext": _restricted(),
    }]
    if standalone:
        containers.append({
            "name": "envoy",
            "image": versions.ENVOY_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "args": [
                "--service-node", "envoy-sidecar", "--log-level", "warn", "--concurrency", "8",
                "--drain-strategy", "immediate", "--drain-time-s", "60", "-c", f"/config/{ENVOY_CONFIG_FILE}",
            ],
            "ports": [{"name": "http", "containerPort": ENVOY_PORT, "protocol": "TCP"}],
            "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5},
            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
            "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
            "securityContext": _restricted(read_only_root=False),
        })

    epp_selector = names.epp_selector_labels(cr_name)
    service_ports: list[dict[str, Any]] = [
        {"name": "grpc-ext-proc", "port": EPP_GRPC_PORT, "targetPort": EPP_GRPC_PORT, "protocol": "TCP",
         "appProtocol": "kubernetes.io/h2c"},
        {"name": "http-metrics", "port": EPP_METRICS_PORT, "targetPort": EPP_METRICS_PORT, "protocol": "TCP"},
    ]
    if standalone:
        service_ports.append(
            {"name": "http", "port": STANDALONE_SERVICE_PORT, "targetPort": ENVOY_PORT, "protocol": "TCP"}
        )

    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": True},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": config_data},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": epp_spec.replicas,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": epp_selector},
                "template": {
                    "metadata": {
                        "labels": {**labels, **epp_selector},
                        "annotations": {names.ANNOTATION_CONFIG_HASH: config_hash},
                    },
                    "spec": {
                        "serviceAccountName": name,
                        "terminationGracePeriodSeconds": 130,
                        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": containers,
                        "volumes": [{"name": "config", "configMap": {"name": name}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"type": "ClusterIP", "selector": epp_selector, "ports": service_ports},
        },
        {
            "apiVersion": versions.INFERENCE_POOL_API_VERSION,
            "kind": "InferencePool",
            "metadata": {"name": names.pool_name(cr_name), "namespace": namespace, "labels": labels},
            "spec": {
                "selector": {"matchLabels": {names.LABEL_POOL: cr_name}},
                "targetPorts": [{"number": spec.ports.serving}],
                "endpointPickerRef": {
                    "name": name,
                    "port": {"number": EPP_GRPC_PORT},
                    "failureMode": "FailOpen",
                },
            },
        },
    ]
    gateway = spec.router.gateway
    if gateway is not None:
        parent: dict[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway.name}
        if gateway.namespace:
            parent["namespace"] = gateway.namespace
        if gateway.section_name:
            parent["sectionName"] = gateway.section_name
        objects.append({
            "apiVersion": versions.GATEWAY_API_VERSION,
            "kind": "HTTPRoute",
            "metadata": {"name": names.pool_name(cr_name), "namespace": namespace, "labels": labels},
            "spec": {
                "parentRefs": [parent],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{
                        "group": versions.INFERENCE_POOL_GROUP,
                        "kind": "InferencePool",
                        "name": names.pool_name(cr_name),
                    }],
                    "timeouts": {"request": ROUTE_TIMEOUT},
                }],
            },
        })
    return objects


def _restricted(read_only_root: bool = True) -> dict[str, Any]:
    """Pod Security "restricted" container settings. Envoy keeps a writable root filesystem: its
    hot-restart and admin paths may write, and the llm-d charts do not make it read-only."""
    context: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    if read_only_root:
        context["readOnlyRootFilesystem"] = True
    return context
