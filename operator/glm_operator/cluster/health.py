"""Liveness of the operator's connection to the API server, for kopf's ``/healthz`` probe.

Watch events prove the connection works (:meth:`ApiHealth.touch`, called from every index
handler). In a quiet cluster, when no event arrived for :attr:`ApiHealth.quiet_seconds` (or for half
the bound, if that is shorter), the probe makes one cheap request (``GET /version``). The operator is
unhealthy when neither succeeded for longer than :attr:`ApiHealth.bound_seconds`
(``GLM_LIVENESS_BOUND_SECONDS``, default 120), so Kubernetes restarts a pod whose watches are dead
instead of leaving it "alive" for ever.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from glm_operator.cluster.errors import classify

BOUND_ENV: Final = "GLM_LIVENESS_BOUND_SECONDS"


class ApiUnreachableError(Exception):
    """The API server has not answered for longer than the bound (the message says since when and why)."""


@dataclass
class ApiHealth:
    """Seconds since the last proof of a working API connection.

    Attributes:
        bound_seconds: how long without contact is still healthy.
        quiet_seconds: after this long without a watch event the probe pings the API server (or after half of
            ``bound_seconds`` when that is shorter, so that a quiet cluster never outlives the bound unpinged).
        clock: ``time.monotonic`` (a fake in tests).
    """

    bound_seconds: float = 120.0
    quiet_seconds: float = 30.0
    clock: Callable[[], float] = time.monotonic
    last_contact: float = field(default=-1.0)
    last_error: str = ""

    def __post_init__(self) -> None:
        if self.last_contact < 0:
            self.last_contact = self.clock()  # the operator just started: give the watches time

    def touch(self) -> None:
        """A watch event or a successful request arrived."""
        self.last_contact = self.clock()

    async def check(self, ping: Callable[[], Awaitable[object]]) -> float:
        """Raise when the API server was unreachable for longer than the bound.

        Args:
            ping: one cheap request (e.g. ``GET /version`` in a thread); any exception is a failure.

        Returns:
            Seconds since the last contact (after a successful ping: 0).

        Raises:
            ApiUnreachableError: no contact for more than :attr:`bound_seconds`.
        """
        if self.clock() - self.last_contact >= min(self.quiet_seconds, self.bound_seconds / 2):
            try:
                await ping()
            except Exception as exc:
                self.last_error = classify(exc, what="reach the API server").message
            else:
                self.touch()
                self.last_error = ""
        age = self.clock() - self.last_contact
        if age > self.bound_seconds:
            raise ApiUnreachableError(
                f"no answer from the API server for {age:.0f} s (bound {self.bound_seconds:g} s, {BOUND_ENV}): "
                f"{self.last_error or 'no watch event and no successful request'}"
            )
        return age
