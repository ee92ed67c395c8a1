"""The operator as users run it: `kopf run` / `glmctl run` subprocesses driven by real kubectl, and `make run`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from glm_operator.devcluster.emulator import EmulatorServer, write_kubeconfig
from tests.conftest import EXAMPLES, ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]
BIN = Path(sys.executable).parent


def _env(kubeconfig: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return env


def _wait(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def emulated(tmp_path: Path) -> Iterator[tuple[EmulatorServer, Path]]:
    with EmulatorServer() as server:
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, server.url)
        yield server, kubeconfig


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--validate=false", *args] if args[0] == "apply" else ["kubectl", *args],
        env=_env(kubeconfig), capture_output=True, text=True, timeout=60, check=False,
    )


@pytest.mark.parametrize("command", ["kopf", "glmctl"])
def test_operator_process_reconciles_what_kubectl_applies(
    emulated: tuple[EmulatorServer, Path], command: str
) -> None:
    server, kubeconfig = emulated
    crd = _kubectl(kubeconfig, "apply", "-f", str(ROOT / "crds" / "glmdeployment.yaml"))
    assert crd.returncode == 0, crd.stderr
    argv = (
        [str(BIN / "kopf"), "run", "--standalone", "--all-namespaces", "-m", "glm_operator.handlers"]
        if command == "kopf"
        else [str(BIN / "glmctl"), "run"]
    )
    operator = subprocess.Popen(argv, env=_env(kubeconfig), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        applied = _kubectl(kubeconfig, "apply", "-f", str(EXAMPLES / "glm-5.3-pd.yaml"))
        assert applied.returncode == 0, applied.stderr
        assert "glmdeployment.serving.glm.dev/glm-5-3 created" in applied.stdout

        def both_engines() -> bool:
            out = _kubectl(kubeconfig, "get", "statefulsets", "-o", "json")
            names = {i["metadata"]["name"] for i in json.loads(out.stdout or "{}").get("items", [])}
            return {"glm-5-3-prefill", "glm-5-3-decode"} <= names

        _wait(both_engines, "both StatefulSets")

        def observed() -> bool:
            out = _kubectl(kubeconfig, "get", "glmd", "glm-5-3", "-o", "jsonpath={.status.observedGeneration}")
            return out.stdout.strip() == "1"

        _wait(observed, "status.observedGeneration 1")
        listing = _kubectl(kubeconfig, "get", "glmd")
        assert listing.returncode == 0 and "glm-5-3" in listing.stdout, listing.stderr

        deleted = _kubectl(kubeconfig, "delete", "glmd", "glm-5-3")
        assert deleted.returncode == 0, deleted.stderr

        def cleaned() -> bool:
            out = _kubectl(kubeconfig, "get", "statefulsets", "-o", "json")
            return not json.loads(out.stdout or "{}").get("items")

        _wait(cleaned, "children to be cleaned up")
    finally:
        operator.send_signal(signal.SIGINT)
        try:
            output, _ = operator.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            operator.kill()
            output, _ = operator.communicate()
    assert operator.returncode == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert server.emulator.request_log, "the operator never reached the emulator"


def test_make_run_once_prints_the_reconciled_seed_deployment() -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    result = subprocess.run(
        ["make", "--no-print-directory", "run", "RUN_ONCE=1"],
        cwd=ROOT, env=_env(None), capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    for child in ("glm-5-3-prefill", "glm-5-3-decode", "glm-5-3-epp", "InferencePool", "StatefulSet"):
        assert child in out, f"{child} missing from the report"
    assert "observedGeneration: 1" in out
    assert "kubectl --server http://127.0.0.1:" in out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_dev_session_stops_on_ctrl_c_and_sigterm(signum: signal.Signals) -> None:
    session = subprocess.Popen(
        [str(BIN / "glmctl"), "dev", "--example", str(EXAMPLES / "glm-5.3-pd.yaml")],
        env=_env(None), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    watchdog = threading.Timer(120, session.kill)  # a session that never gets ready must not hang the test
    watchdog.start()
    try:
        assert session.stdout is not None
        for line in session.stdout:
            if "Ctrl-C to stop" in line:
                break
        else:
            pytest.fail("the session ended before it was ready")
        session.send_signal(signum)
        output, _ = session.communicate(timeout=20)
    finally:
        watchdog.cancel()
        if session.poll() is None:
            session.kill()
            session.communicate()
    assert session.returncode == 0, output[-2000:]
    assert "stopped" in output


def test_dev_session_fails_with_a_reason_for_an_invalid_example(tmp_path: Path) -> None:
    bad = EXAMPLES / "invalid" / "pcp-with-dp.yaml"
    result = subprocess.run(
        [str(BIN / "glmctl"), "dev", "--once", "--example", str(bad)],
        env=_env(None), capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 1
    assert "spec.prefill.parallelism.data" in result.stdout
