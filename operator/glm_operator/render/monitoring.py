"""PodMonitors (Prometheus Operator ``monitoring.coreos.com/v1``) for one GLMDeployment, when
``spec.monitoring.podMonitors`` is set.

- one PodMonitor per engine role (``<cr>-prefill``, ``<cr>-decode`` or ``<cr>-engine``) scraping
  vLLM's ``/metrics`` on the vLLM HTTP port by its container-port name. On decode pods that is the
  ``vllm`` port behind the P/D sidecar, not the sidecar's ``http`` port (``reference/llm-d.md``
  §1.4); the names come from the role's port plan (:func:`glm_operator.plan.ports.role_ports`);
- one PodMonitor ``<cr>-epp`` scraping the endpoint picker's ``metrics`` port (9090). The EPP
  authenticates ``/metrics`` by default (``--metrics-endpoint-auth``, llm-d-router v0.10.0
  ``pkg/epp/server/options.go``), which needs TokenReview RBAC the operator does not grant; with
  PodMonitors on, the router renderer turns that off (:func:`epp_metrics_args`).

Every PodMonitor copies the ``serving.glm.dev/deployment`` and ``serving.glm.dev/role`` pod labels
onto the series (``podTargetLabels``), so dashboards select by deployment and role
(``serving_glm_dev_deployment``, ``serving_glm_dev_role`` after Prometheus' label sanitising).
"""

from __future__ import annotations

from typing import Any, Final

from glm_operator.api.spec import GLMDeploymentSpec
from glm_operator.plan.ports import VLLM_CONTAINER, role_ports
from glm_operator.render import names

API_VERSION: Final = "monitoring.coreos.com/v1"
KIND: Final = "PodMonitor"
#: The EPP container's metrics port name (see :mod:`glm_operator.render.router`).
EPP_METRICS_PORT_NAME: Final = "metrics"
#: Pod labels copied onto every scraped series.
POD_TARGET_LABELS: Final = (names.LABEL_DEPLOYMENT, names.LABEL_ROLE)


def epp_metrics_args(spec: GLMDeploymentSpec) -> list[str]:
    """Extra EPP flags for scraping: ``--metrics-endpoint-auth=false`` when PodMonitors are on."""
    return ["--metrics-endpoint-auth=false"] if spec.monitoring.pod_monitors else []


def _pod_monitor(
    name: str, namespace: str, labels: dict[str, str], selector: dict[str, str], *, port: str, interval: str
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": selector},
            "podTargetLabels": list(POD_TARGET_LABELS),
            "podMetricsEndpoints": [{"port": port, "path": "/metrics", "interval": interval, "scheme": "http"}],
        },
    }


def render_pod_monitors(cr_name: str, namespace: str, spec: GLMDeploymentSpec) -> list[dict[str, Any]]:
    """The PodMonitors of one GLMDeployment (engine roles first, then the EPP); none when disabled."""
    if not spec.monitoring.pod_monitors:
        return []
    interval = f"{spec.monitoring.scrape_interval_seconds}s"
    extra = dict(spec.monitoring.labels)
    objects = []
    for role_name, role in spec.roles().items():
        ports = role_ports(spec, role_name, role)
        port_name = next(
            use.name for use in ports.uses if use.container == VLLM_CONTAINER and use.port == ports.vllm and use.name
        )
        objects.append(_pod_monitor(
            names.role_name(cr_name, role_name), namespace, {**extra, **names.common_labels(cr_name, role_name)},
            names.selector_labels(cr_name, role_name), port=port_name, interval=interval,
        ))
    objects.append(_pod_monitor(
        names.epp_name(cr_name), namespace, {**extra, **names.common_labels(cr_name, "router")},
        names.epp_selector_labels(cr_name), port=EPP_METRICS_PORT_NAME, interval=interval,
    ))
    return objects
