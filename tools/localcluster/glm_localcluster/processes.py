"""Child processes of the local cluster: started in their own process group, logged to a file, stopped together.

Every process gets ``PR_SET_PDEATHSIG=SIGKILL`` (Linux), so a parent killed with SIGKILL still leaves no process
behind; :meth:`Supervisor.stop` sends SIGTERM to each group in reverse start order, then SIGKILL after a grace period.
Linux sends that signal when the *thread* that forked the child exits, so every process is started from one
long-lived thread of the module (:data:`_SPAWNER`), never from a short-lived worker (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

_PR_SET_PDEATHSIG = 1
#: The one thread that forks every child (lives as long as the interpreter).
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="glm-localcluster-spawner")


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` now (the kernel's choice; a small race remains until it is bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


class ProcessExitedError(RuntimeError):
    """A component exited while the cluster needed it; the message names it, its exit code and its log's tail."""


@dataclass
class Managed:
    """One started component."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines of its log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def check(self) -> None:
        """Raise :class:`ProcessExitedError` if the process is gone."""
        code = self.popen.poll()
        if code is not None:
            raise ProcessExitedError(f"{self.name} exited with code {code}; last lines of {self.log}:\n{self.tail()}")


@dataclass
class Supervisor:
    """Starts components and stops them all, in reverse order."""

    log_dir: Path
    started: list[Managed] = field(default_factory=list)

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Managed:
        """Start ``argv`` with stdout+stderr appended to ``log_dir/<name>.log``."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with log.open("ab") as out:
            popen: subprocess.Popen[bytes] = _SPAWNER.submit(
                subprocess.Popen,
                list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})}, start_new_session=True, preexec_fn=_die_with_parent,
            ).result()
        managed = Managed(name, popen, log)
        self.started.append(managed)
        return managed

    def check(self) -> None:
        """Raise :class:`ProcessExitedError` for the first component that is no longer running."""
        for managed in self.started:
            managed.check()

    def stop(self, name: str | None = None, grace_seconds: float = 10.0) -> None:
        """Stop one component (by name) or all, newest first: SIGTERM to its group, SIGKILL after ``grace_seconds``."""
        targets = [m for m in reversed(self.started) if name is None or m.name == name]
        for managed in targets:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(managed.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        for managed in targets:
            try:
                managed.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(managed.popen.pid, signal.SIGKILL)
                managed.popen.wait()
            self.started.remove(managed)
