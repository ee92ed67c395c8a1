"""The README's Helm and GitOps commands for the emulator work as written: every README line that
uses ``"$SERVER"`` runs, in order, in bash against the emulator with the operator running."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from kubernetes import client

from tests.chart.conftest import helm_binary
from tests.conftest import ROOT
from tests.e2e.conftest import Cluster


def readme_emulator_lines() -> list[str]:
    """The README lines that talk to the emulator (they use ``"$SERVER"``)."""
    return [line.split("  #")[0].strip() for line in (ROOT / "README.md").read_text().splitlines()
            if '"$SERVER"' in line]


def test_readme_has_the_helm_and_gitops_emulator_lines() -> None:
    lines = readme_emulator_lines()
    assert any(line.startswith("helm template glm-operator charts/glm-operator") for line in lines)
    assert any("apply --validate=false -k examples/gitops/overlays/production" in line for line in lines)


async def test_readme_helm_and_gitops_sections_against_the_emulator(cluster: Cluster) -> None:
    env = {
        **os.environ,
        "SERVER": cluster.server.url,
        "PATH": os.pathsep.join([str(helm_binary().parent), str(Path(sys.prefix) / "bin"), os.environ["PATH"]]),
    }
    outputs = []
    for line in readme_emulator_lines():
        result = await asyncio.to_thread(
            subprocess.run, ["bash", "-o", "pipefail", "-c", line], cwd=ROOT, env=env,
            capture_output=True, text=True, check=False, timeout=120,
        )
        assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
        outputs.append(result.stdout)
    assert "glmdeployments.serving.glm.dev" in "".join(outputs)
    # the chart's objects landed
    deployment = await cluster.call(client.AppsV1Api(cluster.api).read_namespaced_deployment,
                                    "glm-operator", "glm-system")
    assert deployment.spec.template.spec.containers[0].args[0] == "run"
    # the kustomized CR was reconciled by the operator: children in namespace serving, status written
    cr = await cluster.wait_reconciled("glm-5-3", 1, ns="serving")
    assert cr["metadata"]["labels"]["environment"] == "production"
    children = await cluster.children("glm-5-3", ns="serving")
    assert {("StatefulSet", "glm-5-3-decode"), ("PodMonitor", "glm-5-3-epp")} <= set(children)
    assert children[("StatefulSet", "glm-5-3-decode")]["spec"]["replicas"] == 2
