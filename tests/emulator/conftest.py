"""Fixtures shared by the emulator tests: a served emulator and a kubectl pointed at it."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from glm_operator.devcluster.emulator import EmulatorServer, write_kubeconfig

KUBECTL = shutil.which("kubectl")


@pytest.fixture
def srv() -> Iterator[EmulatorServer]:
    """An emulator served on a free port of 127.0.0.1."""
    with EmulatorServer(host="127.0.0.1", port=0) as server:
        yield server


@pytest.fixture
def kubectl_env(tmp_path: pathlib.Path, srv: EmulatorServer) -> dict[str, str]:
    """Environment for kubectl: a kubeconfig for ``srv`` and a private discovery cache."""
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, srv.url)
    return {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(tmp_path / "kube-cache")}


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    """Run kubectl; its stdout (fail the test on a non-zero exit)."""
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr}"
    return done.stdout
