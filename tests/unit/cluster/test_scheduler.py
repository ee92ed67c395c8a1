"""ReconcileScheduler on the fake cluster with a fake sleep: every reconcile, whatever started it, is
retried with back-off until it succeeds. No wall-clock timing: the fake sleep records the delays."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from glm_operator.cluster.drift import object_key
from glm_operator.cluster.reconcile import Outcome, reconcile
from glm_operator.cluster.scheduler import Backoff, ReconcileScheduler
from tests.conftest import seed
from tests.unit.cluster.fake_cluster import FakeCluster

NAME = "glm-5-3"
DECODE = ("apps/v1", "StatefulSet", "default", "glm-5-3-decode")
POOL = urllib3.HTTPConnectionPool("api.example", 6443)


@dataclass
class Harness:
    """A scheduler over a fake cluster; ``delays`` are the back-off sleeps it asked for."""

    fake: FakeCluster
    scheduler: ReconcileScheduler
    delays: list[float] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    use_index: bool = False

    @property
    def owner(self) -> tuple[str, str, str]:
        cr = self.fake.cr("default", NAME)
        return cr["metadata"]["uid"], "default", NAME


def make(
    *, use_index: bool = False, gate: asyncio.Event | None = None, after_first: Callable[[], None] | None = None
) -> Harness:
    """``use_index``: children and CR come from the fake's memory without calls (as from the watch
    index). ``gate``: the first run waits for it (to queue requests behind a running reconcile);
    ``after_first`` is called when the first run is done."""
    fake = FakeCluster()
    cr = seed()
    cr["metadata"]["namespace"] = "default"
    fake.add_cr(cr)
    harness: Harness

    async def run(body: dict[str, Any]) -> Outcome:
        if gate is not None and not harness.outcomes:
            await gate.wait()
        live = None
        if harness.use_index:
            live = {object_key(o): o for o in fake.objects.values() if o["kind"] != "GLMDeployment"}
        outcome = reconcile(fake, body, live=live)
        harness.outcomes.append(outcome)
        if after_first is not None and len(harness.outcomes) == 1:
            after_first()
        return outcome

    async def read(namespace: str, name: str) -> dict[str, Any] | None:
        if harness.use_index:
            return fake.cr(namespace, name)
        return fake.read_deployment(namespace, name)

    async def sleep(seconds: float) -> None:
        harness.delays.append(seconds)
        await asyncio.sleep(0)

    scheduler = ReconcileScheduler(run=run, read=read, backoff=Backoff(base=1.0, cap=8.0), sleep=sleep,
                                   rng=lambda: 0.5)
    harness = Harness(fake=fake, scheduler=scheduler, use_index=use_index)
    return harness


async def _created(h: Harness) -> None:
    outcome = await h.scheduler.request(h.fake.cr("default", NAME))
    assert outcome is not None and outcome.failure is None
    h.delays.clear()


async def test_reconcile_started_by_a_child_event_is_retried_with_backoff() -> None:
    h = make()
    await _created(h)
    h.fake.remove("StatefulSet", "glm-5-3-decode")
    h.fake.fail("apply", ApiException(status=500, reason="Internal Server Error"), times=3,
                match="StatefulSet/glm-5-3-decode")
    assert await h.scheduler.child_changed(h.owner, DECODE, None)
    assert h.outcomes[-1].failure is not None  # was dropped: the StatefulSet came back after the next resync
    await h.scheduler.drain()
    assert ("StatefulSet", "glm-5-3-decode") in h.fake.children()
    assert h.delays == [1.0, 2.0, 4.0]
    assert h.scheduler.attempts == {}
    assert h.fake.cr("default", NAME)["status"]["observedGeneration"] == 1


async def test_reconcile_started_by_the_resync_is_retried() -> None:
    h = make()
    await _created(h)
    h.fake.remove("StatefulSet", "glm-5-3-decode")
    h.fake.fail("apply", urllib3.exceptions.ReadTimeoutError(POOL, "/apis", "read timed out"),
                match="StatefulSet/glm-5-3-decode")
    await h.scheduler.resync()
    await h.scheduler.drain()
    assert ("StatefulSet", "glm-5-3-decode") in h.fake.children()
    assert h.delays == [1.0]


async def test_failure_of_a_queued_rerun_is_retried() -> None:
    gate = asyncio.Event()
    fake_holder: list[FakeCluster] = []

    def break_status() -> None:  # the queued re-run (not the first run) has work to do and hits 503s
        fake_holder[0].remove("StatefulSet", "glm-5-3-decode")
        fake_holder[0].fail("apply", ApiException(status=503, reason="Service Unavailable"), times=2,
                            match="StatefulSet/glm-5-3-decode")

    h = make(gate=gate, after_first=break_status)
    fake_holder.append(h.fake)
    first = asyncio.create_task(h.scheduler.request(h.fake.cr("default", NAME)))
    while not h.scheduler.is_running(h.owner[0]):
        await asyncio.sleep(0)
    # a kopf handler arrives while the first reconcile runs: its request is queued (and its handler
    # returned success, so nothing else would retry the re-run)
    assert await h.scheduler.request(h.fake.cr("default", NAME)) is None
    gate.set()
    await first
    assert [o.failure is None for o in h.outcomes] == [True, False]
    await h.scheduler.drain()
    assert h.outcomes[-1].failure is None
    assert h.delays == [1.0, 2.0]
    assert ("StatefulSet", "glm-5-3-decode") in h.fake.children()


async def test_connection_error_reading_the_cr_is_retried() -> None:
    h = make()
    await _created(h)
    h.fake.remove("StatefulSet", "glm-5-3-decode")
    refused = urllib3.exceptions.MaxRetryError(POOL, "/apis", urllib3.exceptions.NewConnectionError(POOL, "refused"))
    h.fake.fail("read_deployment", refused, times=2)
    await h.scheduler.resync()
    await h.scheduler.drain()
    assert ("StatefulSet", "glm-5-3-decode") in h.fake.children()
    assert h.delays == [1.0, 2.0]


async def test_permanent_failure_is_not_retried_on_a_timer() -> None:
    h = make()
    h.fake.fail("apply", ApiException(status=403, reason="Forbidden"), times=100)
    outcome = await h.scheduler.request(h.fake.cr("default", NAME))
    assert outcome is not None and outcome.failure is not None and not outcome.failure.transient
    assert h.scheduler.retries == {}


async def test_echo_of_our_own_write_runs_nothing() -> None:
    h = make()
    await _created(h)
    version = h.fake.children()[("StatefulSet", "glm-5-3-decode")]["metadata"]["resourceVersion"]
    before = h.fake.count()
    assert not await h.scheduler.child_changed(h.owner, DECODE, version)
    assert h.fake.count() == before


async def test_idle_resync_from_the_index_makes_no_request() -> None:
    h = make(use_index=True)
    await _created(h)
    before = h.fake.count()
    await h.scheduler.resync()
    await h.scheduler.resync()
    assert h.fake.calls[before:] == []


async def test_resync_on_a_lagging_index_does_not_write_again() -> None:
    # Measured with 200 CRs on 2 cores: the watch fed the index seconds behind the operator's own writes, so every
    # resync saw the status and annotation from before its last write and wrote them again (~30 PATCH pairs per CR).
    h = make(use_index=True)
    stale = h.fake.cr("default", NAME)  # the index still holds the body from before the first reconcile

    async def lagging_read(namespace: str, name: str) -> dict[str, Any] | None:
        return stale

    h.scheduler.read = lagging_read
    await _created(h)
    writes = h.fake.count("patch_status", "annotate")
    assert writes == 2
    for _ in range(3):
        await h.scheduler.resync()
    assert h.fake.count("patch_status", "annotate") == writes
    # a newer body (a user's change) still wins over what the operator wrote
    newer = h.fake.cr("default", NAME)
    newer["metadata"]["resourceVersion"] = str(int(newer["metadata"]["resourceVersion"]) + 100)
    newer["metadata"]["generation"] = 2
    stale = newer
    await h.scheduler.resync()
    assert h.fake.cr("default", NAME)["status"]["observedGeneration"] == 2


async def test_a_deleted_cr_cancels_its_retry() -> None:
    h = make()
    h.fake.fail("apply", ApiException(status=500), times=100)
    await h.scheduler.request(h.fake.cr("default", NAME))
    assert h.scheduler.retries
    h.scheduler.forget(h.owner[0])
    assert h.scheduler.retries == {}


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = Backoff(base=2.0, cap=30.0, jitter=0.2)
    assert [policy.delay(n, lambda: 0.5) for n in range(1, 7)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert policy.delay(1, lambda: 0.0) == pytest.approx(1.6)
    assert policy.delay(1, lambda: 0.999999) == pytest.approx(2.4, rel=1e-5)
    assert policy.delay(10, lambda: 0.999999) == 30.0


def test_backoff_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLM_RETRY_DELAY_SECONDS", "0.5")
    monkeypatch.setenv("GLM_RETRY_MAX_DELAY_SECONDS", "60")
    assert Backoff.from_env() == Backoff(base=0.5, cap=60.0)
    monkeypatch.setenv("GLM_RETRY_MAX_DELAY_SECONDS", "soon")
    with pytest.raises(ValueError, match="GLM_RETRY_MAX_DELAY_SECONDS='soon'"):
        Backoff.from_env()
