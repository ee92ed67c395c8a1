"""Per-CR scheduling of reconciles: serialisation, coalescing, echo suppression, retries, resync.

:class:`ReconcileScheduler` is the one path every reconcile takes, whatever started it (a kopf
create/update/resume handler, a child watch event, the periodic resync, or a retry), so every
transient failure is retried the same way: exponential back-off (:class:`Backoff`, base
``GLM_RETRY_DELAY_SECONDS``, cap ``GLM_RETRY_MAX_DELAY_SECONDS``, ±20 % jitter) until a reconcile
succeeds. Permanent failures (RBAC, a missing CRD) are not retried on a timer: the next change of
the CR or a child, or the next resync, tries again.

- Reconciles of one CR are serialised; requests that arrive while one runs are queued and cause at
  most one more run, and none when every queued request was a child event echoing the running
  reconcile's own writes (the ``resourceVersion`` it left, :attr:`ReconcileScheduler.seen_versions`).
- A queued request's re-run is a run like any other: its failure is retried too.

No kopf import: the scheduler is given async callables to run one reconcile, to read a CR's newest
body and to report; tests drive it with a fake cluster and a fake ``sleep``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from glm_operator.cluster.env import env_seconds
from glm_operator.cluster.errors import classify
from glm_operator.cluster.reconcile import Outcome

log = logging.getLogger(__name__)

RETRY_DELAY_ENV: Final = "GLM_RETRY_DELAY_SECONDS"
RETRY_MAX_DELAY_ENV: Final = "GLM_RETRY_MAX_DELAY_SECONDS"
RESYNC_ENV: Final = "GLM_RESYNC_SECONDS"

#: ``(apiVersion, kind, namespace, name)`` of a child.
ChildRef = tuple[str, str, str, str]
#: A child watch event: (child, its resourceVersion or ``None`` when deleted).
Trigger = tuple[ChildRef, str | None]

#: Runs one reconcile of a CR body (in a worker thread) and returns its outcome; never raises for
#: cluster failures (they are in ``Outcome.failure``).
RunFn = Callable[[dict[str, Any]], Awaitable[Outcome]]
#: Reads the newest body of CR ``(namespace, name)``, ``None`` when it is gone; may raise cluster errors.
ReadFn = Callable[[str, str], Awaitable[dict[str, Any] | None]]
#: Reports one outcome: ``(body, outcome, seconds until the retry or None)``.
ReportFn = Callable[[dict[str, Any], Outcome, float | None], None]
SleepFn = Callable[[float], Awaitable[None]]


def resync_seconds_from_env() -> float:
    """``$GLM_RESYNC_SECONDS``: seconds between passes over every known CR (default 300).

    Raises:
        ValueError: not a positive number.
    """
    return env_seconds(RESYNC_ENV, 300.0)


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off: attempt ``n`` (1-based) waits ``min(cap, base * 2**(n-1))`` seconds,
    times a uniform factor in ``[1 - jitter, 1 + jitter]``, and never more than ``cap``.

    Attributes:
        base: first delay, seconds (``GLM_RETRY_DELAY_SECONDS``, default 5).
        cap: longest delay, seconds (``GLM_RETRY_MAX_DELAY_SECONDS``, default 300, at least ``base``).
        jitter: relative spread so that many CRs failing together do not retry in lock-step.
    """

    base: float = 5.0
    cap: float = 300.0
    jitter: float = 0.2

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number ``attempt`` (>= 1); ``rng`` returns a float in [0, 1)."""
        raw = min(self.cap, self.base * 2.0 ** max(0, attempt - 1))
        return float(min(self.cap, raw * (1 - self.jitter + 2 * self.jitter * rng())))

    @classmethod
    def from_env(cls) -> Backoff:
        """From ``$GLM_RETRY_DELAY_SECONDS`` and ``$GLM_RETRY_MAX_DELAY_SECONDS``.

        Raises:
            ValueError: a variable is set but not a positive number.
        """
        base = env_seconds(RETRY_DELAY_ENV, cls.base)
        cap = max(base, env_seconds(RETRY_MAX_DELAY_ENV, cls.cap))
        return cls(base=base, cap=cap)


def _deleting(body: dict[str, Any]) -> bool:
    return bool((body.get("metadata") or {}).get("deletionTimestamp"))


@dataclass
class ReconcileScheduler:
    """Schedules every reconcile of every CR.

    Args:
        run: runs one reconcile (:data:`RunFn`).
        read: reads a CR's newest body (:data:`ReadFn`), for queued re-runs, retries and resyncs.
        report: called after every run with the delay of the retry it scheduled (or ``None``).
        backoff: the retry policy.
        sleep: ``asyncio.sleep`` (a fake in tests).
        rng: jitter source, ``random.random`` (a constant in tests).
    """

    run: RunFn
    read: ReadFn
    report: ReportFn = lambda body, outcome, retry_in: None
    backoff: Backoff = field(default_factory=Backoff)
    sleep: SleepFn = asyncio.sleep
    rng: Callable[[], float] = random.random
    #: uid → (namespace, name) of every CR seen (the resync's work list).
    known: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: child → resourceVersion the last reconcile left (echo suppression).
    seen_versions: dict[ChildRef, str] = field(default_factory=dict)
    #: uid → failed attempts in a row (reset by a success or a permanent failure).
    attempts: dict[str, int] = field(default_factory=dict)
    #: uid → the pending retry.
    retries: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    #: uid → the CR as the API server returned it after our last write to it, until the watch shows it too.
    written: dict[str, dict[str, Any]] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _pending: dict[str, list[Trigger | None]] = field(default_factory=dict)

    def is_running(self, uid: str) -> bool:
        """Whether a reconcile of CR ``uid`` is running now."""
        lock = self._locks.get(uid)
        return lock is not None and lock.locked()

    async def request(self, body: dict[str, Any], trigger: Trigger | None = None) -> Outcome | None:
        """Reconcile CR ``body`` now, or queue the request behind the running reconcile of that CR.

        Returns:
            The outcome of the last run this call made, or ``None`` when the request was queued (the
            running reconcile then runs once more, unless every queued ``trigger`` was the echo of
            its own writes; that run's failures are retried like any other).
        """
        meta = body["metadata"]
        uid = meta["uid"]
        self.known[uid] = (meta["namespace"], meta["name"])
        lock = self._locks.setdefault(uid, asyncio.Lock())
        if lock.locked():
            self._pending.setdefault(uid, []).append(trigger)
            return None
        async with lock:
            outcome = await self._run_once(self._freshest(body))
            while self._needs_rerun(self._pending.pop(uid, [])):
                try:
                    fresh = await self.read(meta["namespace"], meta["name"])
                except Exception as exc:
                    self._read_failed(uid, meta["namespace"], meta["name"], exc)
                    break
                if fresh is None or fresh["metadata"].get("uid") != uid or _deleting(fresh):
                    break
                body = fresh
                outcome = await self._run_once(self._freshest(body))
        return outcome

    async def child_changed(self, owner: tuple[str, str, str], child: ChildRef, version: str | None) -> bool:
        """A child of CR ``owner`` = ``(uid, namespace, name)`` changed (``version``) or was deleted
        (``None``). Returns whether a reconcile was run or queued (``False`` for an echo)."""
        if version is None:
            self.seen_versions.pop(child, None)
        elif self.seen_versions.get(child) == version:
            return False  # the echo of our own apply, or an object the last reconcile already checked
        uid, namespace, name = owner
        if self.is_running(uid):
            # decided after the running reconcile: most such events are the echo of its own writes
            self._pending.setdefault(uid, []).append((child, version))
            return True
        try:
            body = await self.read(namespace, name)
        except Exception as exc:
            self._read_failed(uid, namespace, name, exc)
            return True
        if body is None or body["metadata"].get("uid") != uid or _deleting(body):
            return False  # the owner is gone; the garbage collector removes the child
        await self.request(body, (child, version))
        return True

    async def resync(self) -> None:
        """One pass over every known CR (each read from ``read``, reconciled through :meth:`request`)."""
        for uid, (namespace, name) in list(self.known.items()):
            try:
                body = await self.read(namespace, name)
            except Exception as exc:
                self._read_failed(uid, namespace, name, exc)
                continue
            if body is None or body["metadata"].get("uid") != uid:
                continue
            if not _deleting(body):
                await self.request(body)

    async def resync_forever(self, interval: float) -> None:
        """:meth:`resync` every ``interval`` seconds until cancelled."""
        while True:
            await self.sleep(interval)
            try:
                await self.resync()
            except Exception:  # a bug in one pass must not end the resync
                log.exception("resync pass failed")

    def forget(self, uid: str) -> None:
        """The CR was deleted: drop its state and cancel its retry."""
        self.known.pop(uid, None)
        self.written.pop(uid, None)
        self._pending.pop(uid, None)
        self.attempts.pop(uid, None)
        lock = self._locks.get(uid)
        if lock is not None and not lock.locked():
            del self._locks[uid]
        task = self.retries.pop(uid, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def drain(self) -> None:
        """Wait until no retry is pending (tests; with a fake ``sleep`` every retry runs at once)."""
        while self.retries:
            await asyncio.gather(*list(self.retries.values()), return_exceptions=True)

    async def close(self) -> None:
        """Cancel every pending retry."""
        tasks = list(self.retries.values())
        self.retries.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- internals ------------------------------------------------------------------------------
    def _freshest(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body``, or the CR as our last write left it when that is newer (the watch lags our writes).

        resourceVersions are compared as integers, which etcd's revisions are (Kubernetes calls them opaque: when
        one is not an integer, ``body`` wins). Once the watch shows a version at least as new, the copy is dropped.
        """
        uid = body["metadata"]["uid"]
        ours = self.written.get(uid)
        if ours is None:
            return body
        try:
            newer = int(ours["metadata"]["resourceVersion"]) > int(body["metadata"].get("resourceVersion") or 0)
        except (KeyError, ValueError):
            newer = False
        if newer:
            return ours
        del self.written[uid]
        return body

    async def _run_once(self, body: dict[str, Any]) -> Outcome:
        uid = body["metadata"]["uid"]
        outcome = await self.run(body)
        if outcome.written is not None:
            self.written[uid] = outcome.written
        self.seen_versions.update(outcome.seen_versions)
        retry_in = None
        if outcome.failure is not None and outcome.failure.transient:
            retry_in = self._schedule_retry(uid, body["metadata"]["namespace"], body["metadata"]["name"])
        else:
            self._settled(uid)
        self.report(body, outcome, retry_in)
        return outcome

    def _settled(self, uid: str) -> None:
        self.attempts.pop(uid, None)
        task = self.retries.pop(uid, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def _schedule_retry(self, uid: str, namespace: str, name: str) -> float:
        attempt = self.attempts[uid] = self.attempts.get(uid, 0) + 1
        delay = self.backoff.delay(attempt, self.rng)
        old = self.retries.get(uid)
        if old is not None and old is not asyncio.current_task():
            old.cancel()
        self.retries[uid] = asyncio.create_task(self._retry_after(uid, namespace, name, delay),
                                                name=f"glm-retry-{namespace}/{name}")
        return delay

    def _read_failed(self, uid: str, namespace: str, name: str, exc: BaseException) -> None:
        failure = classify(exc, what=f"read GLMDeployment {namespace}/{name}")
        delay = self._schedule_retry(uid, namespace, name)
        log.warning("%s/%s: %s: %s; retrying in %.1f s", namespace, name, failure.reason, failure.message, delay)

    async def _retry_after(self, uid: str, namespace: str, name: str, delay: float) -> None:
        await self.sleep(delay)
        if self.retries.get(uid) is asyncio.current_task():
            del self.retries[uid]  # from here on a new failure schedules a new retry
        if uid not in self.known:
            return  # deleted meanwhile
        try:
            body = await self.read(namespace, name)
        except Exception as exc:
            self._read_failed(uid, namespace, name, exc)
            return
        if body is None or body["metadata"].get("uid") != uid:
            self.forget(uid)
            return
        if not _deleting(body):
            await self.request(body)

    def _needs_rerun(self, triggers: list[Trigger | None]) -> bool:
        """Whether queued requests need another reconcile: any non-event request, or any child event
        whose resourceVersion is not the one the last reconcile left."""
        return any(t is None or self.seen_versions.get(t[0]) != t[1] for t in triggers)
