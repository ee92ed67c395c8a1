"""The operator's Prometheus metrics: what each reconcile records, capacity gauges per status field,
the HTTP server and its port setting."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from glm_operator.observe import metrics


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    metrics.CAPACITY.clear()
    yield
    metrics.CAPACITY.clear()
    metrics.SERVER.stop()


def _value(name: str, labels: dict[str, str] | None = None) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, labels or {})


def test_reconcile_results_and_error_reasons_are_counted() -> None:
    def count(result: str) -> float:
        return _value("glm_operator_reconcile_duration_seconds_count", {"result": result}) or 0.0

    def errors(reason: str) -> float:
        return _value("glm_operator_reconcile_errors_total", {"reason": reason}) or 0.0

    before = {r: count(r) for r in metrics.RESULTS}
    errors_before = {r: errors(r) for r in metrics.ERROR_REASONS}
    status = {"capacity": {"maxContextTokens": 1048576}}
    metrics.record_reconcile("ns", "a", 0.2, changed=True, invalid=False, apply_error=False, status=status)
    metrics.record_reconcile("ns", "a", 0.01, changed=False, invalid=False, apply_error=False, status=status)
    metrics.record_reconcile("ns", "b", 0.01, changed=False, invalid=True, apply_error=False, status={})
    metrics.record_reconcile("ns", "c", 0.3, changed=True, invalid=False, apply_error=True, status={})
    metrics.record_exception(0.1, OSError("connection reset"))
    metrics.record_exception(0.1, KeyError("bug"))
    assert {r: count(r) - before[r] for r in metrics.RESULTS} == {
        "changed": 1, "unchanged": 1, "invalid": 1, "failed": 3
    }
    assert {r: errors(r) - errors_before[r] for r in metrics.ERROR_REASONS} == {
        "InvalidSpec": 1, "ApplyFailed": 1, "ApiError": 1, "Unexpected": 1
    }
    # the 0.2 s reconcile falls into the 0.25 s bucket, not the 0.1 s one
    le = {"result": "changed"}
    assert (_value("glm_operator_reconcile_duration_seconds_bucket", {**le, "le": "0.25"}) or 0) - (
        _value("glm_operator_reconcile_duration_seconds_bucket", {**le, "le": "0.1"}) or 0
    ) >= 1


def test_capacity_gauges_follow_every_numeric_status_field() -> None:
    metrics.record_reconcile(
        "serving", "glm", 0.1, changed=True, invalid=False, apply_error=False,
        # a future field (kvBytesPerGpu) is exported without code changes; non-numbers are not
        status={"capacity": {"maxContextTokens": 1048576, "kvBytesPerGpu": 7_172_259_840, "note": "x", "ok": True}},
    )
    labels = {"namespace": "serving", "name": "glm"}
    assert _value("glm_operator_capacity_max_context_tokens", labels) == 1048576
    assert _value("glm_operator_capacity_kv_bytes_per_gpu", labels) == 7_172_259_840
    assert _value("glm_operator_capacity_note", labels) is None
    assert _value("glm_operator_capacity_ok", labels) is None
    assert _value("glm_operator_managed_deployments") == 1
    metrics.deployment_seen("serving", "other")
    assert _value("glm_operator_managed_deployments") == 2
    metrics.deployment_gone("serving", "glm")
    assert _value("glm_operator_capacity_max_context_tokens", labels) is None
    assert _value("glm_operator_managed_deployments") == 1


def test_capacity_metric_names_come_from_the_status_model() -> None:
    assert "glm_operator_capacity_max_context_tokens" in metrics.capacity_metric_names()
    assert metrics.snake("kvBytesPerGpu") == "kv_bytes_per_gpu"
    assert metrics.snake("maxConcurrentAtMaxContext") == "max_concurrent_at_max_context"


def test_server_serves_the_registry_on_a_free_port() -> None:
    metrics.record_reconcile(
        "default", "glm-5-3", 0.1, changed=False, invalid=False, apply_error=False,
        status={"capacity": {"maxContextTokens": 202752}},
    )
    metrics.SERVER.start(0, "127.0.0.1")
    port = metrics.SERVER.port
    assert port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {"glm_operator_reconcile_duration_seconds", "glm_operator_reconcile_errors",
            "glm_operator_managed_deployments", "glm_operator_capacity_max_context_tokens"} <= set(families)
    (sample,) = families["glm_operator_capacity_max_context_tokens"].samples
    assert sample.labels == {"namespace": "default", "name": "glm-5-3"} and sample.value == 202752
    metrics.SERVER.stop()
    assert metrics.SERVER.port is None


@pytest.mark.parametrize(("raw", "expected"), [("", 8080), ("0", 0), ("9100", 9100)])
def test_port_from_env(monkeypatch: pytest.MonkeyPatch, raw: str, expected: int) -> None:
    monkeypatch.setenv("GLM_METRICS_PORT", raw)
    assert metrics.port_from_env() == expected


@pytest.mark.parametrize("raw", ["http", "-1", "70000"])
def test_bad_port_is_refused_with_the_variable_name(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("GLM_METRICS_PORT", raw)
    with pytest.raises(ValueError, match="GLM_METRICS_PORT"):
        metrics.port_from_env()


def test_port_zero_starts_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLM_METRICS_PORT", "0")
    assert metrics.start_from_env() is None
    assert metrics.SERVER.port is None


def test_a_taken_port_disables_metrics_instead_of_stopping_the_operator(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("GLM_METRICS_PORT", str(taken.getsockname()[1]))
        monkeypatch.setenv("GLM_METRICS_ADDRESS", "127.0.0.1")
        assert metrics.start_from_env() is None
    assert metrics.SERVER.port is None
    assert "metrics disabled" in caplog.text
