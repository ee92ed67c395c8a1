"""Shared fixtures. KUBECONFIG is pointed at a private temp file before anything imports the
Kubernetes client (it reads the default location at import time)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

os.environ["KUBECONFIG"] = str(Path(tempfile.mkdtemp(prefix="glm-kcfg-")) / "config")
os.environ.setdefault("KUBECACHEDIR", tempfile.mkdtemp(prefix="glm-kcache-"))
# Operator knobs for fast, deterministic end-to-end tests (read when glm_operator.handlers is imported).
os.environ["GLM_RESYNC_SECONDS"] = "1"
os.environ["GLM_RETRY_DELAY_SECONDS"] = "0.5"
os.environ["GLM_KOPF_SCANNING"] = "off"
# No metrics server unless a test asks for one (several operators and sessions share this machine).
os.environ["GLM_METRICS_PORT"] = "0"
#: Bound every API call, so a test never waits on a connection the API server dropped while restarting or stopping.
os.environ["GLM_API_TIMEOUT_SECONDS"] = "5"

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
VALID_EXAMPLES = sorted(EXAMPLES.glob("*.yaml"))
INVALID_EXAMPLES = sorted((EXAMPLES / "invalid").glob("*.yaml"))


def load_cr(path: Path) -> dict[str, Any]:
    """The single GLMDeployment document of an example file."""
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def expectations(path: Path) -> dict[str, str]:
    """``# expected-field:`` / ``# expected-message:`` header comments of an invalid example."""
    found = {}
    for line in path.read_text().splitlines():
        if line.startswith("# expected-"):
            key, _, value = line[2:].partition(":")
            found[key.strip()] = value.strip()
    return found


def seed() -> dict[str, Any]:
    """A fresh copy of seed system A (examples/glm-5.3-pd.yaml) as a CR dict."""
    return load_cr(EXAMPLES / "glm-5.3-pd.yaml")


def refusal(cr: dict[str, Any]) -> list[Any]:
    """The findings with which rendering ``cr`` is refused (fails the test if it renders)."""
    from glm_operator.api.findings import SpecInvalidError  # noqa: PLC0415
    from glm_operator.api.load import parse  # noqa: PLC0415
    from glm_operator.render.manifests import render  # noqa: PLC0415

    with pytest.raises(SpecInvalidError) as info:
        render(parse(cr))
    findings: list[Any] = info.value.findings
    return findings


@pytest.fixture
def seed_cr() -> dict[str, Any]:
    """Seed system A as a CR dict."""
    return load_cr(EXAMPLES / "glm-5.3-pd.yaml")
