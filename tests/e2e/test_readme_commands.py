"""The README's local-cluster commands work as written: every line of the code block after the
``<!-- tested: local cluster -->`` marker runs, in order, in bash against the session's cluster (as admin, with the
project's kubectl and Helm first on PATH), with the operator watching the namespace those lines use."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from glm_localcluster.stack import Stack
from glm_localcluster.weights import weights_volume
from tests.conftest import ROOT
from tests.e2e.conftest import Cluster, operator_in_process

MARKER = "<!-- tested: local cluster -->"


def readme_cluster_lines() -> list[str]:
    """The command lines of the first code block after :data:`MARKER` (comments and ``export KUBECONFIG`` dropped)."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index(MARKER):].split("```")[1]
    lines = [line.split("  #")[0].strip() for line in block.splitlines()[1:]]
    return [line for line in lines if line and not line.startswith("export KUBECONFIG=")]


def test_readme_has_the_local_cluster_lines() -> None:
    lines = readme_cluster_lines()
    assert "kubectl apply --server-side -k examples/gitops/overlays/production" in lines
    assert any(line.startswith("helm list") for line in lines)


async def test_readme_local_cluster_lines_run_as_written(
    stack: Stack, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        **os.environ,
        "KUBECONFIG": str(stack.plane.admin_kubeconfig),
        "PATH": os.pathsep.join([str(stack.kubectl.parent), str(stack.helm.parent), os.environ["PATH"]]),
    }
    outputs = []
    # the README's namespace: the operator watches it and the overlay's weights claim is bound
    async with operator_in_process(stack, "serving", monkeypatch):
        for line in readme_cluster_lines():
            result = await asyncio.to_thread(
                subprocess.run, ["bash", "-o", "pipefail", "-c", line], cwd=ROOT, env=env,
                capture_output=True, text=True, check=False, timeout=120,
            )
            assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
            outputs.append(result.stdout + result.stderr)
            if line.startswith("kubectl create namespace serving"):
                await asyncio.to_thread(stack.kubectl_apply, weights_volume("serving", "glm-weights"))
        joined = "".join(outputs)
        assert "NVIDIA-H200" in joined and "glm-operator" in joined
        assert "spec.prefill.parallelism" in joined, "the CEL refusal is not shown"
        cluster.namespace = "serving"
        cr = await cluster.wait_reconciled("glm-5-3", 1)
        assert cr["metadata"]["labels"]["environment"] == "production"
        children = await cluster.children("glm-5-3")
        assert {("StatefulSet", "glm-5-3-decode"), ("PodMonitor", "glm-5-3-epp")} <= set(children)
        assert children[("StatefulSet", "glm-5-3-decode")]["spec"]["replicas"] == 2
