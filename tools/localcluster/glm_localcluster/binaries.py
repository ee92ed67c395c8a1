"""The local cluster's binaries: built once from the pinned Go modules in ``tools/cluster/`` (see its README).

:func:`ensure_binaries` runs ``tools/cluster/build.sh``, which builds only what is missing for the pinned versions
into ``~/.cache/glm-operator/cluster`` (``$GLM_CLUSTER_CACHE``) and streams its progress lines to stderr.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

#: The repository root (this package lives in ``tools/localcluster/glm_localcluster``).
REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO_ROOT / "tools" / "cluster" / "build.sh"
#: Components and the binaries each provides (``tools/cluster/build.sh``).
COMPONENTS = {
    "kube": ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
    "etcd": ("etcd",),
    "kwok": ("kwok", "kwok-stages"),
    "crdgen": ("controller-gen", "gateway-annotations"),
}


class BuildError(RuntimeError):
    """A binary could not be built; the message names the component, the command and how to retry."""


def ensure_binaries(components: tuple[str, ...] = tuple(COMPONENTS)) -> dict[str, Path]:
    """Build what is missing of ``components`` and return ``{binary name: path}``.

    Raises:
        BuildError: ``go`` is missing or a ``go build`` failed (its output went to stderr).
    """
    if shutil.which("go") is None:
        raise BuildError("the local cluster builds from Go modules and 'go' is not on PATH: install Go >= 1.26")
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), *components], stdout=subprocess.PIPE, stderr=sys.stderr, text=True, check=False
    )
    if proc.returncode != 0:
        raise BuildError(
            f"building {' '.join(components)} failed (exit {proc.returncode}); the go output is above. "
            f"Retry with: bash tools/cluster/build.sh {' '.join(components)}"
        )
    found = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    paths = {name: Path(path) for name, path in found.items()}
    missing = [b for c in components for b in COMPONENTS[c] if b not in paths]
    if missing:
        raise BuildError(f"tools/cluster/build.sh did not report {', '.join(missing)}")
    return paths
