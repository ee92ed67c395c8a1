"""Kubeconfig files for the local control plane (written with PyYAML, read by kubectl, Helm, kwok and the client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CLUSTER = "glm-local"


def _document(server: str, ca: Path, user: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": f"{name}@{CLUSTER}", "context": {"cluster": CLUSTER, "user": name}}],
        "current-context": f"{name}@{CLUSTER}",
    }


def write_cert_kubeconfig(path: Path, server: str, ca: Path, *, cert: Path, key: Path, name: str) -> Path:
    """A kubeconfig authenticating with a client certificate (``cert``/``key`` PEM files). Returns ``path``."""
    doc = _document(server, ca, {"client-certificate": str(cert), "client-key": str(key)}, name)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def write_token_kubeconfig(path: Path, server: str, ca: Path, *, token: str, name: str) -> Path:
    """A kubeconfig holding only a bearer ``token`` (e.g. a ServiceAccount's, so its RBAC applies). Returns ``path``."""
    path.write_text(yaml.safe_dump(_document(server, ca, {"token": token}, name), sort_keys=False))
    path.chmod(0o600)
    return path
