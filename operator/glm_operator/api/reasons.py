"""Every ``reason`` the operator writes: status condition reasons, Event reasons and the metric labels
of ``glm_operator_reconcile_errors_total``. One module, so a reason is spelled once.

CamelCase strings, as ``metav1.Condition.reason`` requires. Pure constants (no imports), usable
from every layer.
"""

from __future__ import annotations

from typing import Final

# --- spec problems (permanent until the spec changes) -------------------------------------------
#: The spec was refused by the schema or a rule; children keep the last valid spec.
INVALID_SPEC: Final = "InvalidSpec"
#: A capacity rule refused the spec (``Planned=False``); a kind of :data:`INVALID_SPEC`.
CAPACITY_EXCEEDED: Final = "CapacityExceeded"

# --- failures talking to the cluster ------------------------------------------------------------
#: A child could not be applied or pruned (``Degraded=True``; retried with back-off).
APPLY_FAILED: Final = "ApplyFailed"
#: The API server could not be reached, timed out or answered 429/5xx while reading, applying or
#: writing status (``Degraded=True``; retried with back-off).
API_UNAVAILABLE: Final = "ApiUnavailable"
#: The API server refused a request for a reason a retry does not fix soon: RBAC (403), a missing
#: CRD (404 on apply), an object it rejects (400/422). Fixed by configuration, not by waiting.
API_REJECTED: Final = "ApiRejected"
#: An exception the operator did not expect (a bug); retried with back-off, logged with traceback.
UNEXPECTED: Final = "Unexpected"

# --- condition reasons ---------------------------------------------------------------------------
ALL_REPLICAS_READY: Final = "AllReplicasReady"
REPLICAS_NOT_READY: Final = "ReplicasNotReady"
COMPLETE: Final = "Complete"
ROLLING_OUT: Final = "RollingOut"
BLOCKED: Final = "Blocked"
AS_EXPECTED: Final = "AsExpected"
PLANNED: Final = "Planned"
CONTEXT_LIMITED_BY_KV: Final = "ContextLimitedByKV"

# --- metric label of reconciles that raised (kept for the dashboard's series) --------------------
#: ``glm_operator_reconcile_errors_total{reason="ApiError"}``: a Kubernetes API/transport failure.
API_ERROR: Final = "ApiError"
