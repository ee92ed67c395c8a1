"""``glmctl run`` refuses an unusable kubeconfig with one line and exit code 2 (no traceback, no retry loop)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
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
