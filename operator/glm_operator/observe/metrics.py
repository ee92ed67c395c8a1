"""The operator's own Prometheus metrics (prometheus-client), served on ``$GLM_METRICS_PORT``.

Exported (all prefixed ``glm_operator_``; the maintained table of every metric name the dashboard
may query is ``observability/metrics.yaml``):

- ``glm_operator_reconcile_duration_seconds{result}`` (histogram): wall time of one reconcile of one
  GLMDeployment, in seconds. ``result`` is one of :data:`RESULTS`: ``changed`` (children applied or
  pruned), ``unchanged`` (nothing written but maybe status), ``invalid`` (spec refused),
  ``failed`` (an API error; kopf retries).
- ``glm_operator_reconcile_errors_total{reason}`` (counter): reconciles that did not converge, by
  :data:`ERROR_REASONS`: ``InvalidSpec`` (the Ready condition's reason), ``ApplyFailed`` (a child
  could not be applied or pruned), ``ApiError`` (listing children or writing status raised),
  ``Unexpected`` (any other exception, a bug).
- ``glm_operator_managed_deployments`` (gauge): GLMDeployments this process watches.
- ``glm_operator_capacity_<field>{namespace,name}`` (gauges): one per numeric field of
  ``status.capacity`` (:class:`glm_operator.api.status.CapacityStatus`), the camelCase field name
  in snake case: ``maxContextTokens`` → ``glm_operator_capacity_max_context_tokens`` (tokens),
  ``kvBytesPerGpu`` → ``…_kv_bytes_per_gpu`` (bytes), ``kvBytesPerToken``, ``modelMaxContextTokens``,
  ``maxConcurrentAtMaxContext`` (requests). A numeric field added to the status model later is
  exported without touching this module; strings (``kvPerGpu``) and per-role objects are not.
  Label cardinality is one series per CR and field.
- ``process_*`` / ``python_*`` from prometheus-client's process and platform collectors.

The metrics live in their own :data:`REGISTRY` (not prometheus-client's global one), so importing
this module twice or running several operators in one test process never raises
``Duplicated timeseries``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Final
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from glm_operator.api import reasons
from glm_operator.api.status import CapacityStatus

log = logging.getLogger(__name__)

PREFIX: Final = "glm_operator"
PORT_ENV: Final = "GLM_METRICS_PORT"
#: Default metrics port (the chart's ``metrics.port``); ``GLM_METRICS_PORT=0`` disables the server.
DEFAULT_PORT: Final = 8080
#: Listen address of the metrics server (env ``GLM_METRICS_ADDRESS``).
DEFAULT_ADDRESS: Final = "0.0.0.0"  # scraped from other pods

RESULTS: Final = ("changed", "unchanged", "invalid", "failed")
ERROR_REASONS: Final = (reasons.INVALID_SPEC, reasons.APPLY_FAILED, reasons.API_ERROR, reasons.UNEXPECTED)
#: Reconcile duration buckets, seconds: one reconcile is ~10 LISTs plus up to ~15 server-side
#: applies; 5 ms (nothing to do, fast API server) to 60 s (the API client's default request timeout).
DURATION_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

REGISTRY: Final = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

RECONCILE_DURATION: Final = Histogram(
    f"{PREFIX}_reconcile_duration_seconds",
    "Wall time of one reconcile of one GLMDeployment, seconds, by result.",
    ["result"],
    buckets=DURATION_BUCKETS,
    registry=REGISTRY,
)
RECONCILE_ERRORS: Final = Counter(
    f"{PREFIX}_reconcile_errors",
    "Reconciles that did not converge, by reason.",
    ["reason"],
    registry=REGISTRY,
)
MANAGED_DEPLOYMENTS: Final = Gauge(
    f"{PREFIX}_managed_deployments",
    "GLMDeployments watched by this operator process.",
    registry=REGISTRY,
)
for _result in RESULTS:  # export every series from the start (0 instead of absent)
    RECONCILE_DURATION.labels(result=_result)
for _reason in ERROR_REASONS:
    RECONCILE_ERRORS.labels(reason=_reason)


def snake(name: str) -> str:
    """``maxContextTokens`` → ``max_context_tokens`` (camelCase status field → metric name part)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


#: Numeric ``status.capacity`` fields that are bookkeeping, not capacity (no gauge).
NOT_CAPACITY = frozenset({"plannedGeneration"})


def capacity_metric_names() -> list[str]:
    """The gauge names of every numeric field the status model declares under ``status.capacity``
    (strings such as ``kvPerGpu``, per-role objects and :data:`NOT_CAPACITY` are not exported)."""
    return sorted(
        f"{PREFIX}_capacity_{snake(field.alias or name)}" for name, field in CapacityStatus.model_fields.items()
        if set(typing.get_args(field.annotation) or (field.annotation,)) - {type(None)} <= {int, float}
        and (field.alias or name) not in NOT_CAPACITY
    )


class _CapacityCollector(Collector):
    """Per-CR gauges from the last ``status.capacity`` each reconcile wrote, computed at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._capacity: dict[tuple[str, str], dict[str, float]] = {}
        self._known: set[tuple[str, str]] = set()

    def seen(self, namespace: str, name: str) -> None:
        with self._lock:
            self._known.add((namespace, name))
            MANAGED_DEPLOYMENTS.set(len(self._known))

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._known.discard((namespace, name))
            self._capacity.pop((namespace, name), None)
            MANAGED_DEPLOYMENTS.set(len(self._known))

    def set_capacity(self, namespace: str, name: str, capacity: Mapping[str, Any] | None) -> None:
        numeric = {
            key: float(value) for key, value in (capacity or {}).items()
            if isinstance(value, int | float) and not isinstance(value, bool) and key not in NOT_CAPACITY
        }
        with self._lock:
            if numeric:
                self._capacity[(namespace, name)] = numeric
            else:
                self._capacity.pop((namespace, name), None)

    def clear(self) -> None:
        with self._lock:
            self._capacity.clear()
            self._known.clear()
            MANAGED_DEPLOYMENTS.set(0)

    def describe(self) -> Iterator[Metric]:
        return iter(())  # names depend on the status fields present; nothing to pre-register

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snapshot = {key: dict(values) for key, values in self._capacity.items()}
        families: dict[str, GaugeMetricFamily] = {}
        for (namespace, name), values in sorted(snapshot.items()):
            for field_name, value in sorted(values.items()):
                metric = f"{PREFIX}_capacity_{snake(field_name)}"
                family = families.get(metric)
                if family is None:
                    family = families[metric] = GaugeMetricFamily(
                        metric, f"status.capacity.{field_name} of each GLMDeployment.", labels=["namespace", "name"]
                    )
                family.add_metric([namespace, name], value)
        yield from families.values()


CAPACITY: Final = _CapacityCollector()
REGISTRY.register(CAPACITY)


def deployment_seen(namespace: str, name: str) -> None:
    """Count a GLMDeployment as managed (idempotent)."""
    CAPACITY.seen(namespace, name)


def deployment_gone(namespace: str, name: str) -> None:
    """Drop a deleted GLMDeployment from the managed count and its capacity series."""
    CAPACITY.forget(namespace, name)


def record_reconcile(
    namespace: str,
    name: str,
    seconds: float,
    *,
    changed: bool,
    invalid: bool,
    apply_error: bool,
    status: Mapping[str, Any] | None,
) -> None:
    """Record one finished reconcile (it returned an outcome).

    Args:
        seconds: its wall time.
        changed: children were applied or pruned.
        invalid: the spec was refused (``InvalidSpec``).
        apply_error: a child could not be applied or pruned (``ApplyFailed``; kopf retries).
        status: the CR's status afterwards; its ``capacity`` feeds the capacity gauges.
    """
    if invalid:
        result = "invalid"
        RECONCILE_ERRORS.labels(reason=reasons.INVALID_SPEC).inc()
    elif apply_error:
        result = "failed"
        RECONCILE_ERRORS.labels(reason=reasons.APPLY_FAILED).inc()
    else:
        result = "changed" if changed else "unchanged"
    RECONCILE_DURATION.labels(result=result).observe(seconds)
    CAPACITY.seen(namespace, name)
    CAPACITY.set_capacity(namespace, name, (status or {}).get("capacity"))


def record_exception(seconds: float, exc: BaseException) -> None:
    """Record a reconcile that raised: ``ApiError`` for Kubernetes API/transport errors, else ``Unexpected``."""
    module = type(exc).__module__
    api_error = module.startswith(("kubernetes.", "urllib3.")) or isinstance(exc, OSError)
    RECONCILE_ERRORS.labels(reason=reasons.API_ERROR if api_error else reasons.UNEXPECTED).inc()
    RECONCILE_DURATION.labels(result="failed").observe(seconds)


class MetricsServer:
    """The HTTP server of :data:`REGISTRY` (``/metrics``), one per operator run."""

    def __init__(self) -> None:
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int | None:
        """The bound port while serving (useful with port 0 → any free port in tests), else ``None``."""
        return None if self._server is None else int(self._server.server_port)

    def start(self, port: int, address: str = DEFAULT_ADDRESS) -> None:
        """Serve on ``address:port`` in a daemon thread (restarting if already serving)."""
        self.stop()
        self._server, self._thread = start_http_server(port, addr=address, registry=REGISTRY)
        log.info("metrics on http://%s:%s/metrics", address, self.port)

    def stop(self) -> None:
        """Stop serving (no-op when not serving)."""
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)


SERVER: Final = MetricsServer()


def port_from_env() -> int:
    """``$GLM_METRICS_PORT`` (default :data:`DEFAULT_PORT`); ``0`` means no metrics server.

    Raises:
        ValueError: not an integer in 0..65535 (names the variable and value).
    """
    raw = os.environ.get(PORT_ENV, "")
    if raw == "":
        return DEFAULT_PORT
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"{PORT_ENV}={raw!r} is not a port number; use 0 (off) or 1..65535, e.g. {DEFAULT_PORT}")
    return port


def start_from_env() -> int | None:
    """Start :data:`SERVER` per ``$GLM_METRICS_PORT`` / ``$GLM_METRICS_ADDRESS``; returns the port, or
    ``None`` when disabled or the port cannot be bound (logged as a warning: the operator runs on
    without metrics). Clears per-CR series from an earlier run in this process.

    Raises:
        ValueError: ``$GLM_METRICS_PORT`` is not a port number.
    """
    CAPACITY.clear()
    port = port_from_env()
    if port == 0:
        SERVER.stop()
        return None
    address = os.environ.get("GLM_METRICS_ADDRESS", DEFAULT_ADDRESS)
    try:
        SERVER.start(port, address)
    except OSError as exc:  # metrics are not worth stopping the operator for (e.g. port taken in `make run`)
        log.warning("metrics disabled: cannot listen on %s:%s (%s); set %s", address, port, exc, PORT_ENV)
        return None
    return SERVER.port
