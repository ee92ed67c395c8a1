"""The error taxonomy: every failure a cluster call can raise is transient or permanent, with a reason."""

from __future__ import annotations

import socket

import kopf
import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from glm_operator.api import reasons
from glm_operator.cluster.errors import classify, describe_apply, to_kopf

POOL = urllib3.HTTPConnectionPool("api.example", 6443)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 401])
def test_retryable_http_statuses_are_transient(status: int) -> None:
    failure = classify(ApiException(status=status, reason="x"), what="list children")
    assert failure.transient
    assert failure.status == status
    assert failure.message.startswith(f"cannot list children: HTTP {status}")


@pytest.mark.parametrize("status", [400, 403, 404, 405, 410, 415, 422])
def test_configuration_http_statuses_are_permanent(status: int) -> None:
    failure = classify(ApiException(status=status, reason="nope"))
    assert not failure.transient
    assert failure.reason == reasons.API_REJECTED


def test_forbidden_says_to_fix_rbac() -> None:
    assert "RBAC" in classify(ApiException(status=403, reason="Forbidden")).message


@pytest.mark.parametrize(
    "exc",
    [
        urllib3.exceptions.MaxRetryError(POOL, "/api", urllib3.exceptions.NewConnectionError(POOL, "refused")),
        urllib3.exceptions.ReadTimeoutError(POOL, "/api", "read timed out"),
        urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")),
        TimeoutError("timed out"),
        ConnectionRefusedError(111, "Connection refused"),
        socket.gaierror(-2, "Name or service not known"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_connection_errors_and_timeouts_are_transient(exc: BaseException) -> None:
    failure = classify(exc)
    assert failure.transient
    assert failure.reason == reasons.API_UNAVAILABLE
    assert failure.expected
    assert "unreachable" in failure.message


def test_unusable_kubeconfig_is_permanent() -> None:
    failure = classify(ConfigException("Invalid kube-config file. No configuration found."))
    assert not failure.transient
    assert "kubeconfig" in failure.message


def test_a_bug_is_retried_but_marked_unexpected() -> None:
    failure = classify(KeyError("spec"))
    assert failure.transient
    assert failure.reason == reasons.UNEXPECTED
    assert not failure.expected


def test_apply_of_a_kind_without_crd_names_the_crd_to_install() -> None:
    obj = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": {"name": "m"}}
    failure = describe_apply(ApiException(status=404, reason="Not Found"), obj)
    assert not failure.transient
    assert "Prometheus Operator CRDs" in failure.message
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "d"}}
    failure = describe_apply(ApiException(status=500, reason="boom"), sts)
    assert failure.transient and failure.reason == reasons.APPLY_FAILED
    assert failure.message.startswith("cannot apply StatefulSet/d: HTTP 500")


def test_kopf_mapping_happens_in_one_place() -> None:
    temporary = to_kopf(classify(ApiException(status=503)), delay=7.0)
    assert isinstance(temporary, kopf.TemporaryError)
    assert temporary.delay == 7.0
    assert isinstance(to_kopf(classify(ApiException(status=403)), delay=7.0), kopf.PermanentError)
