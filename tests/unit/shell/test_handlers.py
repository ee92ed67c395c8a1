"""The kopf shell's settings, as the real API server reads them."""

from __future__ import annotations

import pytest

from glm_operator.handlers import watch_timeouts


def test_watch_timeouts_are_whole_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    # kube-apiserver parses ?timeoutSeconds= as an integer: "300.0" is refused with HTTP 400 and every watch fails
    monkeypatch.setenv("GLM_WATCH_SERVER_TIMEOUT_SECONDS", "12.7")
    server, client, connect = watch_timeouts()
    assert (server, client, connect) == (12, 42, 10)
    assert all(isinstance(v, int) for v in (server, client, connect))


def test_watch_timeout_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GLM_WATCH_SERVER_TIMEOUT_SECONDS", raising=False)
    assert watch_timeouts()[0] == 300
