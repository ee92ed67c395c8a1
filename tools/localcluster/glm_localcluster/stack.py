"""The whole local stack the operator runs against: control plane + CRDs + our Helm chart + the operator's identity.

:func:`bring_up` returns a :class:`Stack` whose ``operator_kubeconfig`` holds only a token of the chart's
ServiceAccount, so an operator started with it is held to the chart's RBAC by the real apiserver. The chart is
installed with ``replicaCount=0``: the operator runs as a local process (``glmctl run``), not as a pod on a fake node.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from glm_localcluster import controlplane
from glm_localcluster.binaries import REPO_ROOT, ensure_binaries
from glm_localcluster.crds import generated_crds
from glm_localcluster.helm import default_dir, ensure_helm
from glm_localcluster.kubeconfig import write_token_kubeconfig
from glm_localcluster.nodes import DEFAULT_NODES, NodeSpec

CHART = REPO_ROOT / "charts" / "glm-operator"
RELEASE = "glm-operator"
OPERATOR_NAMESPACE = "glm-system"
#: Lifetime of the operator's token (seconds); a dev session or test run is far shorter.
TOKEN_SECONDS = 24 * 3600


class CommandFailedError(RuntimeError):
    """kubectl or helm exited non-zero; the message has the command and its stderr."""


@dataclass
class Stack:
    """A running local stack.

    Attributes:
        plane: the control plane (processes, admin kubeconfig, audit log).
        kubectl, helm: the binaries the stack was set up with (built/pinned by the project).
        operator_kubeconfig: token-only kubeconfig of ``system:serviceaccount:glm-system:glm-operator``.
        operator_user: that ServiceAccount's user name, as it appears in the audit log.
    """

    plane: controlplane.ControlPlane
    kubectl: Path
    helm: Path
    operator_kubeconfig: Path
    operator_user: str

    def run(self, tool: str, args: Sequence[str], *, check: bool = True, stdin: str | None = None,
            kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``kubectl`` or ``helm`` (``tool``) against the cluster as admin (or ``kubeconfig``).

        Raises:
            CommandFailedError: ``check`` and the command exited non-zero.
        """
        binary = self.kubectl if tool == "kubectl" else self.helm
        kcfg = str(kubeconfig or self.plane.admin_kubeconfig)
        proc = subprocess.run(
            [str(binary), f"--kubeconfig={kcfg}", *args], input=stdin, capture_output=True, text=True, check=False,
        )
        if check and proc.returncode != 0:
            raise CommandFailedError(f"{tool} {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return proc

    def kubectl_apply(self, docs: list[dict[str, Any]]) -> None:
        """``kubectl apply --server-side`` of ``docs`` (as admin)."""
        self.run("kubectl", ["apply", "--server-side", "-f", "-"], stdin=yaml.safe_dump_all(docs, sort_keys=False))

    def stop(self) -> None:
        """Stop every process of the stack."""
        self.plane.stop()


def operator_token(api: client.ApiClient, namespace: str, service_account: str, seconds: int = TOKEN_SECONDS) -> str:
    """A bound token for ``namespace/service_account`` from the TokenRequest API."""
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
        audiences=["https://kubernetes.default.svc.cluster.local"], expiration_seconds=seconds,
    ))
    resp = client.CoreV1Api(api).create_namespaced_service_account_token(service_account, namespace, request)
    if resp.status is None or not resp.status.token:
        raise RuntimeError(f"TokenRequest for {namespace}/{service_account} returned no token")
    return str(resp.status.token)


def _wait_listable(stack: Stack, resources: list[str], timeout: float = 60.0) -> None:
    """Wait until every resource can be listed: an Established CRD still answers 429 "storage is (re)initializing"
    until its watch cache is ready, which the operator's first watches would otherwise see."""
    deadline = time.monotonic() + timeout
    while True:
        proc = stack.run("kubectl", ["get", ",".join(resources), "-A", "-o", "name"], check=False)
        if proc.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise CommandFailedError(f"cannot list {', '.join(resources)} after {timeout:.0f} s: {proc.stderr.strip()}")
        time.sleep(0.2)


def bring_up(
    root: Path | None = None,
    *,
    nodes: Sequence[NodeSpec] = DEFAULT_NODES,
    chart_values: Sequence[str] = (),
    progress: controlplane.Progress = print,
) -> Stack:
    """Build what is missing, start the control plane, install the CRDs and the chart, mint the operator's token.

    Args:
        root: state directory (default: a new temporary directory).
        nodes: the fake nodes.
        chart_values: extra ``--set`` values for the chart (``key=value``).
        progress: called with one line per step.

    Raises:
        glm_localcluster.binaries.BuildError, controlplane.ControlPlaneError, CommandFailedError: with what failed.
    """
    root = root or Path(tempfile.mkdtemp(prefix="glm-localcluster-"))
    bins = ensure_binaries()
    helm = ensure_helm(default_dir())
    plane = controlplane.start(root, bins, nodes, progress=progress)
    try:
        stack = Stack(plane=plane, kubectl=bins["kubectl"], helm=helm, operator_kubeconfig=root / "operator.kubeconfig",
                      operator_user=f"system:serviceaccount:{OPERATOR_NAMESPACE}:{RELEASE}")
        progress("installing the InferencePool, HTTPRoute and PodMonitor CRDs (controller-gen from their Go types)")
        extra_crds = generated_crds(bins["controller-gen"], bins["gateway-annotations"])
        stack.kubectl_apply(extra_crds)
        chart = CHART.relative_to(REPO_ROOT)
        progress(f"helm install {RELEASE} {chart} -n {OPERATOR_NAMESPACE} (the operator runs as a local process)")
        sets = ["--set", "replicaCount=0", *(arg for v in chart_values for arg in ("--set", v))]
        stack.run("helm", ["install", RELEASE, str(CHART), "--namespace", OPERATOR_NAMESPACE, "--create-namespace",
                           "--wait", "--timeout", "2m", *sets])
        resources = ["glmdeployments.serving.glm.dev", *(crd["metadata"]["name"] for crd in extra_crds)]
        stack.run("kubectl", ["wait", "--for=condition=Established", "--timeout=60s",
                              *(f"crd/{name}" for name in resources)])
        _wait_listable(stack, resources)
        token = operator_token(plane.api_client(), OPERATOR_NAMESPACE, RELEASE)
        write_token_kubeconfig(stack.operator_kubeconfig, plane.server, plane.pki.ca.cert, token=token, name=RELEASE)
    except BaseException:
        plane.stop()
        raise
    return stack
