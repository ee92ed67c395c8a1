"""Compute the GLMDeployment status from the rendered result and the live children.

Pure functions. Conditions follow ``metav1.Condition`` conventions: ``lastTransitionTime``
changes only when a condition's ``status`` flips, so an unchanged world yields an identical status
and the operator writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from glm_operator.api import reasons
from glm_operator.api.findings import Finding
from glm_operator.api.quantity import GIB
from glm_operator.plan.capacity import Plan
from glm_operator.render import names

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
PLANNED = "Planned"

#: Longest pod message (the scheduler's "0/N nodes are available: ..." can be long) quoted in a condition.
POD_MESSAGE_LIMIT: Final = 200
#: Container ``state.waiting`` reasons of a normal start (every other reason is a problem worth reporting).
STARTING_REASONS: Final = frozenset({"ContainerCreating", "PodInitializing"})


def _truncate(text: str, limit: int = POD_MESSAGE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def pod_problem(pod: dict[str, Any]) -> tuple[str, str] | None:
    """``(reason, message)`` of why one pod does not start, or ``None``.

    A pod whose ``PodScheduled`` condition is ``False`` (reason ``Unschedulable``: no node fits, a claim is
    missing, ...), or a container (init containers first) waiting for a reason other than a normal start
    (``ImagePullBackOff``, ``CrashLoopBackOff``, ``CreateContainerConfigError``, ...). Messages are truncated to
    :data:`POD_MESSAGE_LIMIT` characters."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("reason") or "Unschedulable"), _truncate(str(cond.get("message") or ""))
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = str(waiting.get("reason") or "")
            if reason and reason not in STARTING_REASONS:
                detail = _truncate(str(waiting.get("message") or ""))
                return reason, f"container {container.get('name', '?')}" + (f": {detail}" if detail else "")
    return None


def role_problems(pods: Iterable[dict[str, Any]] | None) -> dict[str, tuple[str, str, str]]:
    """``{role: (pod name, reason, message)}``: the first problem (pods by name) of each role's pods.

    A pod's role is its ``app.kubernetes.io/component`` label (the component of its workload: ``prefill``,
    ``decode``, ``engine``, ``router``)."""
    found: dict[str, tuple[str, str, str]] = {}
    for pod in sorted(pods or (), key=lambda p: str((p.get("metadata") or {}).get("name") or "")):
        meta = pod.get("metadata") or {}
        role = str((meta.get("labels") or {}).get(names.LABEL_COMPONENT) or "")
        if not role or role in found:
            continue
        problem = pod_problem(pod)
        if problem is not None:
            found[role] = (str(meta.get("name") or ""), *problem)
    return found


def condition(
    previous: Iterable[dict[str, Any]],
    ctype: str,
    *,
    status: bool,
    reason: str,
    message: str,
    generation: int,
    now: str,
) -> dict[str, Any]:
    """One condition dict; keeps the previous ``lastTransitionTime`` unless ``status`` flips."""
    value = "True" if status else "False"
    old = next((c for c in previous if c.get("type") == ctype), None)
    since = old["lastTransitionTime"] if old and old.get("status") == value and old.get("lastTransitionTime") else now
    return {
        "type": ctype,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def workload_ready(workload: dict[str, Any] | None, desired: int) -> bool:
    """A StatefulSet/Deployment is ready when its controller has seen the latest spec
    (``status.observedGeneration >= metadata.generation``), every replica runs the latest template
    (``updatedReplicas``; for StatefulSets ``currentRevision == updateRevision``) and ``desired``
    replicas are ready. Ready pods of the *old* template during a rollout do not count."""
    if workload is None:
        return False
    status = workload.get("status") or {}
    generation = int((workload.get("metadata") or {}).get("generation") or 0)
    if int(status.get("observedGeneration") or 0) < generation:
        return False
    if int(status.get("updatedReplicas") or 0) < desired:
        return False
    current, update = status.get("currentRevision"), status.get("updateRevision")
    if current is not None and update is not None and current != update:
        return False
    return int(status.get("readyReplicas") or 0) >= desired


def replica_counts(workload: dict[str, Any] | None, desired: int) -> dict[str, int]:
    """``{replicas, readyReplicas}`` of a StatefulSet/Deployment (0 ready when it does not exist yet)."""
    status = (workload or {}).get("status") or {}
    return {"replicas": desired, "readyReplicas": int(status.get("readyReplicas") or 0)}


def healthy_status(
    *,
    previous: dict[str, Any],
    generation: int,
    workloads: dict[str, tuple[dict[str, Any] | None, int]],
    endpoint: str,
    plan: Plan,
    warnings: list[Finding],
    now: str,
    apply_error: str | None = None,
    apply_reason: str = reasons.APPLY_FAILED,
    pods: Iterable[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Status after a successful render.

    ``observedGeneration`` becomes ``generation`` only when ``apply_error`` is ``None`` (every child
    of this spec was applied and pruned); while a failure keeps the children from being applied it
    stays at the last generation that was, and ``Degraded=True`` says why.

    Args:
        previous: the current ``status`` of the CR (may be empty).
        generation: ``metadata.generation`` of the spec that was rendered.
        workloads: ``{"prefill"|"decode"|"engine"|"router": (live workload or None, desired replicas)}``.
        plan: the capacity plan the children were rendered for (``status.capacity`` and ``Planned``).
        apply_error: set when applying children (or reading them) failed: ``Degraded=True``,
            ``Progressing=False/Blocked``, ``Ready=False``.
        apply_reason: the ``Degraded`` reason for ``apply_error`` (a :mod:`glm_operator.api.reasons`
            constant: ``ApplyFailed``, ``ApiUnavailable``, ``ApiRejected``, ``Unexpected``).
        pods: the CR's pods (plain dicts: ``metadata.name/labels``, ``status.conditions``, container statuses);
            the first problem of a role that is not ready (:func:`role_problems`) is named in ``Ready``'s message,
            briefly in ``Progressing``'s.
    """
    conditions = previous.get("conditions") or []
    counts = {role: replica_counts(live, desired) for role, (live, desired) in workloads.items()}
    unready = [role for role, (live, desired) in workloads.items() if not workload_ready(live, desired)]
    problems = {role: problem for role, problem in role_problems(pods).items() if role in unready}
    not_ready = [
        f"{role} {counts[role]['readyReplicas']}/{counts[role]['replicas']}"
        + ("" if counts[role]["readyReplicas"] < workloads[role][1] else " (rolling out)")
        + (f" (pod {problems[role][0]} {problems[role][1]}: {problems[role][2]})" if role in problems else "")
        for role in unready
    ]
    ready = not not_ready and apply_error is None
    summary = ", ".join(f"{role} {c['readyReplicas']}/{c['replicas']}" for role, c in counts.items())
    if ready:
        ready_cond = condition(
            conditions, READY, status=True, reason=reasons.ALL_REPLICAS_READY, message=f"ready: {summary}",
            generation=generation, now=now,
        )
    else:
        waiting = f"waiting for {', '.join(not_ready)}" if not_ready else summary
        ready_cond = condition(
            conditions, READY, status=False, reason=reasons.REPLICAS_NOT_READY if apply_error is None else apply_reason,
            message=waiting if apply_error is None else f"{waiting}; {apply_error}",
            generation=generation, now=now,
        )
    progressing = condition(
        conditions, PROGRESSING, status=not ready and apply_error is None,
        reason=reasons.COMPLETE if ready else (reasons.BLOCKED if apply_error else reasons.ROLLING_OUT),
        message=f"ready: {summary}" + "".join(
            f"; pod {name} {reason}" for name, reason, _ in problems.values()
        ),
        generation=generation, now=now,
    )
    warning_text = "; ".join(str(w) for w in warnings)
    if apply_error is not None:
        degraded = condition(
            conditions, DEGRADED, status=True, reason=apply_reason, message=apply_error, generation=generation, now=now
        )
    else:
        degraded = condition(
            conditions, DEGRADED, status=False, reason=reasons.AS_EXPECTED,
            message=f"not degraded; warnings: {warning_text}" if warning_text else "",
            generation=generation, now=now,
        )
    planned = condition(
        conditions, PLANNED, status=True,
        reason=reasons.CONTEXT_LIMITED_BY_KV if plan.max_model_len_source == "kvBudget" else reasons.PLANNED,
        message=plan_summary(plan), generation=generation, now=now,
    )
    status: dict[str, Any] = {
        "conditions": [ready_cond, progressing, degraded, planned],
        "endpoint": endpoint,
        "capacity": {"plannedGeneration": generation, **capacity_status(plan)},
        **counts,
    }
    observed = generation if apply_error is None else previous.get("observedGeneration")
    if observed is not None:
        status["observedGeneration"] = observed
    return status


def failed_status(*, previous: dict[str, Any], generation: int, reason: str, message: str, now: str) -> dict[str, Any]:
    """Status when the operator could not even look at the children (listing them failed).

    Keeps everything of ``previous`` but the conditions: ``Degraded=True`` with ``reason``,
    ``Progressing=False/Blocked``, ``Ready=False`` with ``reason``. ``observedGeneration`` does not move.
    """
    conditions = previous.get("conditions") or []
    status = {k: v for k, v in previous.items() if k != "conditions"}
    status["conditions"] = [
        condition(conditions, READY, status=False, reason=reason, message=message, generation=generation, now=now),
        condition(conditions, PROGRESSING, status=False, reason=reasons.BLOCKED, message=message,
                  generation=generation, now=now),
        condition(conditions, DEGRADED, status=True, reason=reason, message=message, generation=generation, now=now),
        *[c for c in conditions if c.get("type") == PLANNED],
    ]
    return status


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / GIB:.1f}Gi"


def capacity_status(plan: Plan) -> dict[str, Any]:
    """``status.capacity`` (camelCase, integers in bytes/tokens) from a :class:`Plan`."""
    tokens = plan.max_model_len
    out: dict[str, Any] = {
        "maxContextTokens": tokens,
        "maxContextSource": plan.max_model_len_source,
        "modelMaxContextTokens": plan.model_max_context,
        "kvBytesPerToken": plan.kv.total,
        "kvBytesPerGpu": int(plan.min_kv_budget_bytes_per_gpu),
        "kvPerGpu": _gib(plan.min_kv_budget_bytes_per_gpu),
        "maxConcurrentAtMaxContext": plan.serving_role.concurrency(tokens),
    }
    for name, rp in plan.roles.items():
        out[name] = {
            "weightsBytesPerGpu": int(rp.weights_bytes_per_gpu),
            "kvBudgetBytesPerGpu": int(rp.kv_budget_bytes_per_gpu),
            "maxRequestTokens": rp.max_context_tokens,
            "maxConcurrentAtMaxContext": rp.concurrency(tokens),
            "hostPoolBytesPerRank": rp.host_pool_bytes_per_rank,
            "hostMemoryBytes": rp.host_memory_bytes,
        }
    return out


def plan_summary(plan: Plan) -> str:
    """One line for the ``Planned`` condition: max context and where it comes from, KV per GPU and
    concurrency per role."""
    source = {"spec": "spec.model.maxModelLen", "model": "the model's limit",
              "kvBudget": f"the KV budget; the model allows {plan.model_max_context:,}"}[plan.max_model_len_source]
    roles = "; ".join(
        f"{name}: {_gib(rp.kv_budget_bytes_per_gpu)} KV per GPU, {rp.concurrency(plan.max_model_len)} request(s) "
        "at max context" + (f", {_gib(rp.host_pool_bytes_per_rank)} host pool per rank" if rp.hisparse else "")
        for name, rp in plan.roles.items()
    )
    return f"max context {plan.max_model_len:,} tokens ({source}); {plan.kv.total:,} B/token KV; {roles}"


def invalid_status(
    *,
    previous: dict[str, Any],
    generation: int,
    findings: list[Finding],
    now: str,
    running: dict[str, tuple[dict[str, Any] | None, int]] | None = None,
    running_generation: int | None = None,
    restore_error: str | None = None,
    restore_reason: str = reasons.APPLY_FAILED,
) -> dict[str, Any]:
    """Status for a spec that cannot be rendered: ``Ready=False``, ``Planned=False`` and
    ``Degraded=True`` with reason ``InvalidSpec`` (or ``CapacityExceeded`` on ``Planned``).

    The workloads keep the last valid spec (``capacity.plannedGeneration``); ``running`` gives their
    live state (same shape as ``workloads`` of :func:`healthy_status`) so the per-role counts say what
    is running. ``observedGeneration`` becomes ``generation``: the operator has finished acting on it
    (refused it) unless ``restore_error`` says restoring a missing child of the last valid spec failed.
    """
    conditions = previous.get("conditions") or []
    message = "; ".join(str(f) for f in findings)
    status = {k: v for k, v in previous.items() if k not in {"conditions", "observedGeneration"}}
    if running is not None:
        status.update({role: replica_counts(live, desired) for role, (live, desired) in running.items()})
    observed = generation if restore_error is None else previous.get("observedGeneration")
    if observed is not None:
        status["observedGeneration"] = observed
    capacity = [f for f in findings if f.reason == reasons.CAPACITY_EXCEEDED]
    planned = condition(
        conditions, PLANNED, status=False,
        reason=reasons.CAPACITY_EXCEEDED if capacity else reasons.INVALID_SPEC,
        message="; ".join(str(f) for f in capacity) if capacity else "not planned: the spec is invalid",
        generation=generation, now=now,
    )
    kept = (f"children keep the spec of generation {running_generation}" if running_generation is not None
            else "children unchanged")
    degraded_message = message if restore_error is None else f"{message}; {restore_error}"
    status["conditions"] = [
        condition(conditions, READY, status=False, reason=reasons.INVALID_SPEC, message=message,
                  generation=generation, now=now),
        condition(
            conditions, PROGRESSING, status=False, reason=reasons.INVALID_SPEC, message=f"spec rejected; {kept}",
            generation=generation, now=now,
        ),
        condition(conditions, DEGRADED, status=True,
                  reason=reasons.INVALID_SPEC if restore_error is None else restore_reason,
                  message=degraded_message, generation=generation, now=now),
        planned,
    ]
    return status


def workload_roles(objects: list[dict[str, Any]], cr_name: str) -> dict[str, tuple[str, str, int]]:
    """``{role: (kind, name, desired replicas)}`` of the StatefulSets/Deployment among rendered objects."""
    roles: dict[str, tuple[str, str, int]] = {}
    for obj in objects:
        if obj["kind"] not in {"StatefulSet", "Deployment"}:
            continue
        component = obj["metadata"]["labels"].get("app.kubernetes.io/component", "")
        if obj["metadata"]["labels"].get(names.LABEL_DEPLOYMENT) == cr_name:
            roles[component] = (obj["kind"], obj["metadata"]["name"], int(obj["spec"]["replicas"]))
    return roles


def status_patch(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """A JSON merge patch turning ``previous`` into ``new`` at the top level of ``status``, or ``None``
    when nothing changed (so an unchanged resync makes no write). Keys that disappear become ``None``."""
    patch: dict[str, Any] = {k: v for k, v in new.items() if previous.get(k) != v}
    patch.update({k: None for k in previous if k not in new and k != "kopf"})
    return patch or None
