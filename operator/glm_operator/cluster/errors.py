"""One error taxonomy for everything that can fail while talking to the cluster.

:func:`classify` turns any exception a :class:`~glm_operator.cluster.port.ClusterPort` call raised
into a :class:`Failure`:

- **transient** — retried with exponential back-off, the CR shows ``Degraded=True`` meanwhile:
  HTTP 408/409/425/429/5xx, 401 (a rotated token is re-read), connection refused/reset, DNS errors,
  TLS handshakes cut short, connect/read timeouts (``urllib3`` ``MaxRetryError``/``TimeoutError``/
  ``ProtocolError``, ``socket``/``OSError``, ``TimeoutError``, ``http.client.HTTPException``), and
  any other exception (a bug: ``Unexpected``, logged with its traceback);
- **permanent** — a configuration problem a retry does not fix by itself: HTTP 400/403/404/405/
  410/415/422 (RBAC, a missing CRD, an object the server rejects) and an unusable kubeconfig. The
  scheduler does not back off on these; the next change of the CR or a child, or the periodic
  resync, tries again.

:func:`to_kopf` is the only place that maps a :class:`Failure` to ``kopf.TemporaryError`` /
``kopf.PermanentError``. (Spec problems are not failures: parsing refuses them with
:class:`~glm_operator.api.findings.SpecInvalidError` before any request.)
"""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from typing import Any, Final

from glm_operator.api import reasons

#: HTTP statuses a retry may fix (after back-off).
TRANSIENT_STATUSES: Final = frozenset({401, 408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Failure:
    """A classified failure.

    Attributes:
        transient: retry with back-off (``True``) or wait for a change (``False``).
        reason: a :mod:`glm_operator.api.reasons` constant for conditions, Events and logs.
        message: one line for people: what failed and, for permanent failures, what to fix.
        status: the HTTP status when the API server answered, else ``None``.
        expected: ``False`` only for :data:`~glm_operator.api.reasons.UNEXPECTED` (log the traceback).
    """

    transient: bool
    reason: str
    message: str
    status: int | None = None
    expected: bool = True


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _is_api_exception(exc: BaseException) -> bool:
    # kubernetes.client.exceptions.ApiException (and its subclasses) without importing the client here
    return any(cls.__name__ == "ApiException" and cls.__module__.startswith("kubernetes.") for cls in type(exc).__mro__)


def _is_transport_error(exc: BaseException) -> bool:
    module = type(exc).__module__
    return (
        module.startswith(("urllib3.", "aiohttp."))
        or isinstance(exc, OSError | TimeoutError | http.client.HTTPException)
    )


def _is_config_error(exc: BaseException) -> bool:
    return type(exc).__name__ == "ConfigException" and type(exc).__module__.startswith("kubernetes.")


def _body_excerpt(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    return body[:300] if isinstance(body, str) else ""


def classify(exc: BaseException, *, what: str = "") -> Failure:
    """Classify one exception.

    Args:
        exc: what a cluster call raised.
        what: what was being done, e.g. ``"apply StatefulSet/glm-decode"``; prefixes the message.

    Returns:
        A :class:`Failure` (never raises).
    """
    prefix = f"cannot {what}: " if what else ""
    if _is_api_exception(exc):
        status = _status_of(exc)
        detail = f"HTTP {status} {getattr(exc, 'reason', '') or ''}".rstrip()
        body = _body_excerpt(exc)
        message = f"{prefix}{detail}" + (f": {body}" if body else "")
        if status is None or status in TRANSIENT_STATUSES or status >= 500:
            return Failure(True, reasons.API_UNAVAILABLE if status != 409 else reasons.APPLY_FAILED, message, status)
        if status == 403:
            message += "; grant the operator's ServiceAccount this permission (the chart's RBAC)"
        return Failure(False, reasons.API_REJECTED, message, status)
    if _is_config_error(exc):
        return Failure(False, reasons.API_REJECTED, f"{prefix}kubeconfig/in-cluster config unusable: {exc}")
    if _is_transport_error(exc):
        cause = exc.reason if hasattr(exc, "reason") and isinstance(exc.reason, BaseException) else exc
        return Failure(True, reasons.API_UNAVAILABLE,
                       f"{prefix}API server unreachable: {type(cause).__name__}: {cause}".rstrip(": "))
    return Failure(True, reasons.UNEXPECTED, f"{prefix}unexpected {type(exc).__name__}: {exc}", expected=False)


def describe_apply(exc: BaseException, obj: dict[str, Any]) -> Failure:
    """:func:`classify` for a failed server-side apply of ``obj``, naming the CRD to install when the
    kind is missing (404 on a Gateway API / GAIE / Prometheus Operator kind)."""
    what = f"{obj['kind']}/{obj['metadata']['name']}"
    failure = classify(exc, what=f"apply {what}")
    if failure.status == 404 and obj["kind"] in {"InferencePool", "HTTPRoute"}:
        return Failure(False, reasons.API_REJECTED,
                       f"cannot apply {what}: the {obj['apiVersion']} {obj['kind']} CRD is not installed; install the "
                       "Gateway API Inference Extension (and Gateway API for HTTPRoute) CRDs", 404)
    if failure.status == 404 and obj["kind"] == "PodMonitor":
        return Failure(False, reasons.API_REJECTED,
                       f"cannot apply {what}: the {obj['apiVersion']} PodMonitor CRD is not installed; install the "
                       "Prometheus Operator CRDs or set spec.monitoring.podMonitors: false", 404)
    if failure.reason == reasons.API_UNAVAILABLE and failure.status is not None:
        return Failure(True, reasons.APPLY_FAILED, failure.message, failure.status)
    return failure


def to_kopf(failure: Failure, *, delay: float) -> Exception:
    """The kopf exception for ``failure``: ``kopf.TemporaryError(delay=delay)`` when transient,
    else ``kopf.PermanentError``. kopf is imported here, lazily, so the rest of the cluster layer
    (and its unit tests) does not need it."""
    import kopf  # noqa: PLC0415

    if failure.transient:
        return kopf.TemporaryError(f"{failure.reason}: {failure.message}", delay=delay)
    return kopf.PermanentError(f"{failure.reason}: {failure.message}")
