"""ApiHealth: liveness fails when the API server is unreachable for longer than the bound."""

from __future__ import annotations

import pytest
import urllib3

from glm_operator.cluster.health import ApiHealth, ApiUnreachableError

POOL = urllib3.HTTPConnectionPool("api.example", 6443)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_unreachable_api_server_fails_liveness_after_the_bound() -> None:
    clock = Clock()
    health = ApiHealth(bound_seconds=120, quiet_seconds=30, clock=clock)
    pings: list[float] = []

    async def down() -> None:
        pings.append(clock.now)
        raise urllib3.exceptions.MaxRetryError(POOL, "/version", urllib3.exceptions.NewConnectionError(POOL, "x"))

    clock.now += 10
    assert await health.check(down) == 10  # recent watch contact: no ping
    assert pings == []
    clock.now += 100
    assert await health.check(down) == 110  # quiet: pinged, failed, still within the bound
    assert len(pings) == 1
    clock.now += 20
    with pytest.raises(ApiUnreachableError, match=r"130 s.*unreachable"):
        await health.check(down)


async def test_watch_events_or_a_successful_ping_keep_it_alive() -> None:
    clock = Clock()
    health = ApiHealth(bound_seconds=120, quiet_seconds=30, clock=clock)

    async def up() -> None:
        return None

    clock.now += 500
    assert await health.check(up) == 0
    clock.now += 200
    health.touch()
    assert await health.check(up) == 0


async def test_a_bound_shorter_than_the_quiet_period_pings_before_it_expires() -> None:
    """With GLM_LIVENESS_BOUND_SECONDS=5 an idle operator (no watch event) whose API server answers stays alive: the
    probe pings once half the bound passed without contact, not only after the 30 s quiet period."""
    clock = Clock()
    health = ApiHealth(bound_seconds=5, quiet_seconds=30, clock=clock)
    pings: list[float] = []

    async def up() -> None:
        pings.append(clock.now)

    for _ in range(10):
        clock.now += 4
        assert await health.check(up) <= 4
    assert pings
