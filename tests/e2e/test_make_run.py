"""`make run` / `glmctl dev` as a user runs them: a real local cluster, the chart, the operator process, the example
CR Ready with pods on fake H200 nodes; every process it started is gone when it exits (normally, Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}


def _processes_under(state_dir: Path) -> list[str]:
    """Command lines of live processes that mention ``state_dir`` (every component gets paths inside it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(state_dir) in cmdline:
            found.append(cmdline[:200])
    return found


def test_make_run_once_shows_the_seed_ready_on_fake_h200_nodes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = subprocess.run(
        ["make", "--no-print-directory", "run", "RUN_ONCE=1", f"STATE_DIR={state}"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600, check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "GLMDeployment default/glm-5-3 is Ready" in out
    assert re.search(r"glm-5-3\s+True\s+disaggregated\s+1048576\s+15.0Gi", out), out[-2000:]
    for pod in ("glm-5-3-prefill-0", "glm-5-3-decode-0"):
        assert re.search(rf"pod/{pod}\s+\S+\s+Running\s+0\s+\S+\s+127\.0\.100\.\d+\s+h200-\d", out), out[-2000:]
    assert f"export KUBECONFIG={state}/admin.kubeconfig" in out
    assert _processes_under(state) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_dev_session_stops_every_process_on_ctrl_c_and_sigterm(tmp_path: Path, signum: signal.Signals) -> None:
    state = tmp_path / "state"
    session = subprocess.Popen(
        [str(BIN / "glmctl"), "dev", "--state-dir", str(state), "--example", str(EXAMPLES / "glm-5.3-pd.yaml")],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    watchdog = threading.Timer(300, session.kill)  # a session that never gets ready must not hang the test
    watchdog.start()
    try:
        assert session.stdout is not None
        for line in session.stdout:
            if "Ctrl-C stops every process" in line:
                break
        else:
            pytest.fail("the session ended before it was ready")
        assert len(_processes_under(state)) >= 6  # etcd, apiserver, controller-manager, scheduler, kwok, operator
        session.send_signal(signum)
        output, _ = session.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if session.poll() is None:
            session.kill()
            session.communicate()
    assert session.returncode == 0, output[-2000:]
    assert "stopping the operator and the control plane" in output
    assert "Traceback" not in output
    assert _processes_under(state) == []


def test_dev_session_refuses_an_invalid_example_before_starting_anything(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bad = EXAMPLES / "invalid" / "pcp-with-dp.yaml"
    result = subprocess.run(
        [str(BIN / "glmctl"), "dev", "--once", "--state-dir", str(state), "--example", str(bad)],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 2
    assert "spec.prefill.parallelism.data" in result.stdout + result.stderr
    assert not state.exists()
