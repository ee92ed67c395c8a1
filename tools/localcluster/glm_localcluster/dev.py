"""``glmctl dev`` / ``make run``: the local cluster, the chart, the operator as a process, and an example CR.

1. build what is missing (first time only) and start the control plane with fake H200 nodes;
2. install the CRDs and ``helm install`` the chart; the operator runs locally with the chart ServiceAccount's token;
3. create the weights claim the example mounts and ``kubectl apply`` the example;
4. wait for the GLMDeployment's ``Ready=True`` (pods of both roles Running and Ready on the fake nodes) and print
   ``kubectl get glmd`` and the pods; ``once`` then exits 0, otherwise the stack serves until Ctrl-C / SIGTERM.
Every process started here is stopped on exit, whatever the cause.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from rich.console import Console

from glm_localcluster.binaries import BuildError
from glm_localcluster.controlplane import ControlPlaneError
from glm_localcluster.operator_process import start_operator
from glm_localcluster.processes import ProcessExitedError
from glm_localcluster.stack import CommandFailedError, Stack, bring_up
from glm_localcluster.weights import claims_of, weights_volume

console = Console(soft_wrap=True, highlight=False)


def _ready(stack: Stack, namespace: str, name: str) -> tuple[bool, str]:
    proc = stack.run("kubectl", ["get", "glmd", name, "-n", namespace, "-o", "yaml"], check=False)
    if proc.returncode != 0:
        return False, proc.stderr.strip()
    status = (yaml.safe_load(proc.stdout) or {}).get("status") or {}
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return ready.get("status") == "True", f"Ready={ready.get('status')} ({ready.get('reason')}: {ready.get('message')})"


def provision_claims(stack: Stack, done: set[tuple[str, str]]) -> None:
    """Pre-bind a volume for every claim a GLMDeployment in the cluster mounts and ``done`` lacks (a stand-in for a
    storage provisioner: pods with a missing claim are never scheduled). Adds what it created to ``done``."""
    proc = stack.run("kubectl", ["get", "glmd", "-A", "-o", "json"], check=False)
    if proc.returncode != 0:
        return
    for cr in json.loads(proc.stdout).get("items") or []:
        for ns, claim in claims_of(cr):
            if (ns, claim) not in done:
                stack.kubectl_apply(weights_volume(ns, claim))
                done.add((ns, claim))


def run_dev(example: Path, once: bool, timeout: float, state_dir: Path | None = None) -> int:
    """Bring the stack up, apply ``example``, wait for Ready; returns the process exit code.

    Without ``state_dir`` the cluster lives in a new temporary directory, removed when the session ends well (kept,
    with its logs, when it fails).
    """
    stop = threading.Event()
    polling = threading.Event()  # set once the session only polls (kubectl calls): a signal then just sets ``stop``

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()
        if not polling.is_set():
            raise KeyboardInterrupt  # interrupt the bring-up (builds, waits) at once
        # while polling, an exception could land between fork and exec of a kubectl child and orphan it

    signal.signal(signal.SIGTERM, _on_signal)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background job keeps ignoring Ctrl-C
        signal.signal(signal.SIGINT, _on_signal)
    stack: Stack | None = None
    started = time.monotonic()
    code = 1
    claims: set[tuple[str, str]] = set()
    try:
        cr: dict[str, Any] = yaml.safe_load(example.read_text())
        stack = bring_up(state_dir, progress=lambda line: console.print(f"[dim]·[/] {line}"))
        operator = start_operator(stack)
        console.print(f"[dim]·[/] operator running as {stack.operator_user} (log: {operator.managed.log})")
        kcfg = stack.plane.admin_kubeconfig
        tools = f"{stack.kubectl.parent}:{stack.helm.parent}"
        console.print(f"[dim]·[/] kubeconfig (admin): {kcfg} — while this runs:\n  export KUBECONFIG={kcfg}\n"
                      f"  export PATH={tools}:$PATH   # this project's kubectl v1.37.2 and helm v3.19.0")
        namespace, name = cr["metadata"].get("namespace", "default"), cr["metadata"]["name"]
        console.print(f"[dim]·[/] kubectl apply -f {example}")
        console.print(stack.run("kubectl", ["apply", "-f", str(example)]).stdout.strip())
        deadline, state = time.monotonic() + timeout, ""
        polling.set()
        while not stop.is_set():
            operator.managed.check()
            provision_claims(stack, claims)
            ok, state = _ready(stack, namespace, name)
            if ok:
                break
            if time.monotonic() > deadline:
                console.print(f"[red]GLMDeployment {namespace}/{name} not Ready after {timeout:.0f} s: {state}[/]")
                console.print(stack.run("kubectl", ["get", "pods", "-n", namespace, "-o", "wide"], check=False).stdout)
                console.print(f"operator log: {operator.managed.log}")
                return code
            time.sleep(0.5)
        if stop.is_set():
            code = 0  # the user stopped it while it waited
            return code
        console.print(f"[green]GLMDeployment {namespace}/{name} is Ready[/] ({time.monotonic() - started:.0f} s "
                      "after start)")
        for args in (["get", "glmd", "-A", "-o", "wide"], ["get", "statefulsets,pods", "-n", namespace, "-o", "wide"]):
            console.print(f"$ kubectl {' '.join(args)}")
            console.print(stack.run("kubectl", args).stdout.rstrip())
        console.print(f"operator metrics: http://127.0.0.1:{operator.metrics_port}/metrics")
        code = 0
        if once:
            return code
        console.print(f"The cluster keeps running (export KUBECONFIG={kcfg}); Ctrl-C stops every process it started.")
        while not stop.is_set():
            stack.plane.supervisor.check()
            provision_claims(stack, claims)
            time.sleep(1)
        return code
    except KeyboardInterrupt:
        code = 0  # the user stopped it (Ctrl-C or SIGTERM): every process is stopped below
        return code
    except (BuildError, ControlPlaneError, CommandFailedError, ProcessExitedError, TimeoutError) as exc:
        console.print(f"[red]glmctl dev: {exc}[/]")
        return code
    finally:
        if stack is not None:
            console.print("[dim]·[/] stopping the operator and the control plane")
            stack.stop()
            if state_dir is None and code == 0:
                shutil.rmtree(stack.plane.root, ignore_errors=True)  # PKI keys and data of a finished session
            elif code != 0:
                console.print(f"[dim]·[/] logs kept in {stack.plane.root / 'logs'}")
