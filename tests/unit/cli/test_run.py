"""``glmctl run`` refuses an unusable kubeconfig with one line and exit code 2 (no traceback, no retry loop)."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from glm_operator.cli import app, configure_logging


@pytest.fixture
def no_incluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "no such file"), ("{not: [yaml", ""), ("apiVersion: v1\nkind: Config\n", "")],
    ids=["missing", "not-yaml", "no-context"],
)
def test_unusable_kubeconfig_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_incluster: None, content: str | None, expected: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    monkeypatch.setenv("KUBECONFIG", str(path))
    result = CliRunner().invoke(app, ["run"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    assert str(path) in lines[0] and "fix:" in lines[0] and expected in lines[0]


def test_unreadable_kubeconfig_option(tmp_path: Path, no_incluster: None) -> None:
    result = CliRunner().invoke(app, ["run", "--kubeconfig", str(tmp_path / "absent")])
    assert result.exit_code == 2
    assert f"{tmp_path / 'absent'}" in result.output


def test_logging_level_from_verbose_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        monkeypatch.setenv("GLM_LOG_LEVEL", "warning")
        assert configure_logging(verbose=False) == logging.WARNING
        assert configure_logging(verbose=True) == logging.DEBUG
        monkeypatch.setenv("GLM_LOG_LEVEL", "loud")
        with pytest.raises(ValueError, match="GLM_LOG_LEVEL='LOUD'"):
            configure_logging(verbose=False)
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]


@pytest.fixture
def refusing_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that answers every request 401 Unauthorized (a wrong or expired token)."""

    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","code":401}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "wrong"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def test_refused_credentials_are_one_line_and_exit_2(
    tmp_path: Path, refusing_server: str, no_incluster: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLM_API_TIMEOUT_SECONDS", "2")
    result = CliRunner().invoke(app, ["run", "--kubeconfig", str(_kubeconfig(tmp_path / "k", refusing_server))])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "HTTP 401" in lines[0] and "fix:" in lines[0]


def test_unreachable_api_server_is_one_line_and_exit_2(
    tmp_path: Path, no_incluster: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setenv("GLM_API_TIMEOUT_SECONDS", "2")
    result = CliRunner().invoke(app, ["run", "--kubeconfig", str(_kubeconfig(tmp_path / "k", dead))])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "cannot reach the API server" in lines[0] and dead in lines[0]
