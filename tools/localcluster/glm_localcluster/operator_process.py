"""The operator as a local process (``glmctl run``) holding only its chart ServiceAccount's token."""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from glm_localcluster.processes import Managed, free_port
from glm_localcluster.stack import Stack


@dataclass
class OperatorProcess:
    """A running operator: its process, liveness URL and metrics port."""

    managed: Managed
    liveness_url: str
    metrics_port: int

    def healthy(self) -> bool:
        """Whether the liveness endpoint answers 200."""
        try:
            with urllib.request.urlopen(self.liveness_url, timeout=2) as resp:
                return int(resp.status) == 200
        except (OSError, urllib.error.URLError):
            return False


def start_operator(stack: Stack, name: str = "operator", env: Mapping[str, str] | None = None,
                   args: tuple[str, ...] = (), timeout: float = 60.0) -> OperatorProcess:
    """Start ``glmctl run`` with ``stack.operator_kubeconfig`` and wait for its liveness endpoint.

    Raises:
        glm_localcluster.processes.ProcessExitedError: it exited (its log's tail is in the message).
        TimeoutError: the liveness endpoint did not answer within ``timeout`` seconds.
    """
    live_port, metrics_port = free_port(), free_port()
    liveness = f"http://127.0.0.1:{live_port}/healthz"
    managed = stack.plane.supervisor.start(
        name,
        [sys.executable, "-m", "glm_operator.cli", "run", "--liveness", liveness, *args],
        env={"KUBECONFIG": str(stack.operator_kubeconfig), "GLM_METRICS_PORT": str(metrics_port),
             "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    proc = OperatorProcess(managed, liveness, metrics_port)
    deadline = time.monotonic() + timeout
    while not proc.healthy():
        managed.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the operator's liveness endpoint {liveness} did not answer in {timeout:.0f} s; "
                               f"log: {managed.log}")
        time.sleep(0.2)
    return proc
