"""The operator's API client never waits forever on a server that accepted a connection but
stopped answering (CI once hung 300 s in teardown on exactly this: a LIST to a server that was
shutting down)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
import yaml

from glm_operator.cluster.apiclient import make_api_client
from glm_operator.cluster.reconcile import read_deployment


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections and never sends a byte."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(sock.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    sock.close()


@pytest.fixture
def silent_kubeconfig(silent_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``$KUBECONFIG`` pointing at the silent server; returns its URL."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "silent",
        "clusters": [{"name": "silent", "cluster": {"server": silent_server}}],
        "users": [{"name": "silent", "user": {"token": "t"}}],
        "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "silent"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    return silent_server


def test_request_to_a_silent_server_times_out(silent_kubeconfig: str) -> None:
    api = make_api_client(timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises((urllib3.exceptions.MaxRetryError, urllib3.exceptions.TimeoutError)):
        read_deployment(api, "default", "anything")
    assert time.monotonic() - started < 5


def test_explicit_per_call_timeout_wins(silent_kubeconfig: str) -> None:
    api = make_api_client(timeout_seconds=60)
    started = time.monotonic()
    with pytest.raises((urllib3.exceptions.MaxRetryError, urllib3.exceptions.TimeoutError)):
        api.call_api("GET", f"{silent_kubeconfig}/version", _request_timeout=0.3)
    assert time.monotonic() - started < 5


def test_timeout_from_environment(silent_kubeconfig: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLM_API_TIMEOUT_SECONDS", "7.5")
    assert make_api_client().default_timeout_seconds == 7.5
    for bad in ("soon", "0", "-3", "nan"):
        monkeypatch.setenv("GLM_API_TIMEOUT_SECONDS", bad)
        with pytest.raises(ValueError, match=f"GLM_API_TIMEOUT_SECONDS='{bad}'"):
            make_api_client()
