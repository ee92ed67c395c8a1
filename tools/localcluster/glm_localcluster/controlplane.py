"""Start and stop a real Kubernetes control plane on 127.0.0.1, the way envtest does, plus controllers and kwok.

Components (each a local process, logs in ``<root>/logs``): etcd (``--unsafe-no-fsync``), kube-apiserver (RBAC,
ServiceAccount tokens, an audit log of every ServiceAccount's request), kube-controller-manager (StatefulSet,
Deployment, garbage collector, tokens, PV binding, ...), kube-scheduler, kwok (fake nodes; pod IPs on the loopback
range 127.0.100.0/24 — traffic to private ranges is forbidden on our machines). Flags follow controller-runtime's
``pkg/internal/testing/controlplane`` and kubeadm's static pods.
"""

from __future__ import annotations

import json
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from glm_localcluster.kubeconfig import write_cert_kubeconfig
from glm_localcluster.nodes import DEFAULT_NODES, NodeSpec, node_object
from glm_localcluster.pki import Pki, make_pki
from glm_localcluster.processes import Supervisor, free_port, port_open

#: Service cluster IPs (the apiserver only allocates them; nothing routes there). The ``kubernetes`` Service gets .1.
SERVICE_RANGE = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
#: Pod IPs kwok assigns: loopback, so a process standing in for a pod can bind the pod's IP.
POD_CIDR = "127.0.100.0/24"
#: Kubernetes identities whose requests the audit log records (operators, routers, test clients use tokens).
AUDITED_GROUPS = ("system:serviceaccounts",)

Progress = Callable[[str], None]


class ControlPlaneError(RuntimeError):
    """The control plane did not come up; the message names the component and its log."""


def _audit_policy() -> dict[str, Any]:
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {"level": "Metadata", "userGroups": list(AUDITED_GROUPS)},
            {"level": "None"},
        ],
    }


@dataclass
class ControlPlane:
    """A running local control plane.

    Attributes:
        root: state directory (PKI, etcd data, kubeconfigs, logs, audit log).
        server: ``https://127.0.0.1:<port>`` of kube-apiserver.
        admin_kubeconfig: kubeconfig of user ``admin`` (group ``system:masters``).
        audit_log: JSON lines, one per request of a ServiceAccount (stage ResponseComplete).
    """

    root: Path
    bins: dict[str, Path]
    supervisor: Supervisor
    pki: Pki
    server: str
    admin_kubeconfig: Path
    audit_log: Path
    apiserver_argv: list[str] = field(default_factory=list)

    # -- clients ---------------------------------------------------------------------------------------------
    def api_client(self, kubeconfig: Path | None = None) -> client.ApiClient:
        """An official-client ``ApiClient`` for ``kubeconfig`` (default: admin)."""
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig or self.admin_kubeconfig), client_configuration=cfg)  # type: ignore[no-untyped-call]
        return client.ApiClient(configuration=cfg)

    # -- faults ----------------------------------------------------------------------------------------------
    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (etcd and the controllers keep running)."""
        self.supervisor.stop("kube-apiserver")

    def start_apiserver(self, timeout: float = 60.0) -> None:
        """Start kube-apiserver again on the same port and wait until it is ready."""
        self.supervisor.start("kube-apiserver", self.apiserver_argv)
        _wait_ready(self, timeout)

    # -- audit -----------------------------------------------------------------------------------------------
    def audit_events(self, user: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """Audit events (dicts) from byte offset ``since`` of the audit log, optionally of one ``user`` only."""
        try:
            with self.audit_log.open("rb") as fh:
                fh.seek(since)
                data = fh.read()
        except FileNotFoundError:
            return []
        # the API server may be writing the last line right now: only lines that end in a newline are complete
        complete = data[: data.rfind(b"\n") + 1]
        events = [json.loads(line) for line in complete.splitlines() if line.strip()]
        return [e for e in events if user is None or e.get("user", {}).get("username") == user]

    def audit_offset(self) -> int:
        """The audit log's current size (bytes): pass it to :meth:`audit_events` to see only newer requests."""
        try:
            return self.audit_log.stat().st_size
        except FileNotFoundError:
            return 0

    def stop(self) -> None:
        """Stop every component, newest first."""
        self.supervisor.stop()


def _get(url: str, ctx: ssl.SSLContext, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _wait_ready(plane: ControlPlane, timeout: float) -> None:
    ctx = ssl.create_default_context(cafile=str(plane.pki.ca.cert))
    ctx.load_cert_chain(str(plane.pki.admin.cert), str(plane.pki.admin.key))
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        plane.supervisor.check()
        try:
            code, body = _get(f"{plane.server}/readyz", ctx)
            if code == 200:
                return
            last = f"HTTP {code}: {body[-300:]}"
        except (OSError, urllib.error.URLError) as exc:
            last = str(exc)
        time.sleep(0.25)
    raise ControlPlaneError(f"kube-apiserver not ready after {timeout:.0f} s ({last}); see {plane.root}/logs")


def _wait(predicate: Callable[[], bool], what: str, timeout: float, plane: ControlPlane) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        plane.supervisor.check()
        if predicate():
            return
        time.sleep(0.25)
    raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}; logs in {plane.root}/logs")


def start(
    root: Path,
    bins: dict[str, Path],
    nodes: Iterable[NodeSpec] = DEFAULT_NODES,
    progress: Progress = print,
    timeout: float = 120.0,
) -> ControlPlane:
    """Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with ``nodes``.

    Returns once the API server is ready, every node is Ready and the ``default`` ServiceAccount exists (pods can be
    created). On failure every started process is stopped before the error propagates.

    Raises:
        ControlPlaneError: a component did not become ready within ``timeout`` seconds.
        glm_localcluster.processes.ProcessExitedError: a component exited (its log's tail is in the message).
    """
    root.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(root / "logs")
    pki = make_pki(root / "pki", SERVICE_IP)
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    plane = ControlPlane(
        root=root, bins=bins, supervisor=supervisor, pki=pki, server=server,
        admin_kubeconfig=write_cert_kubeconfig(root / "admin.kubeconfig", server, pki.ca.cert, cert=pki.admin.cert,
                                               key=pki.admin.key, name="admin"),
        audit_log=root / "audit.log",
    )
    try:
        _start_all(plane, etcd_port=etcd_port, peer_port=peer_port, api_port=api_port, nodes=list(nodes),
                   progress=progress, timeout=timeout)
    except BaseException:
        plane.stop()
        raise
    return plane


def _start_all(
    plane: ControlPlane, *, etcd_port: int, peer_port: int, api_port: int, nodes: list[NodeSpec],
    progress: Progress, timeout: float,
) -> None:
    root, bins, sup, pki = plane.root, plane.bins, plane.supervisor, plane.pki
    etcd_data = root / "etcd"
    shutil.rmtree(etcd_data, ignore_errors=True)
    progress(f"starting etcd on 127.0.0.1:{etcd_port}")
    sup.start("etcd", [
        str(bins["etcd"]), f"--data-dir={etcd_data}", "--unsafe-no-fsync",
        f"--listen-client-urls=http://127.0.0.1:{etcd_port}", f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=default=http://127.0.0.1:{peer_port}", "--log-level=warn",
    ])
    _wait(lambda: port_open(etcd_port), "etcd", timeout, plane)

    policy = root / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(_audit_policy(), sort_keys=False))
    plane.apiserver_argv = [
        str(bins["kube-apiserver"]),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--advertise-address=127.0.0.1", "--bind-address=127.0.0.1", f"--secure-port={api_port}",
        # v1.37 refuses a loopback advertise address for the endpoint reconciler of the `kubernetes` Service;
        # nothing on a local cluster reaches the API server through that Service.
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={pki.apiserver.cert}", f"--tls-private-key-file={pki.apiserver.key}",
        f"--client-ca-file={pki.ca.cert}",
        f"--service-cluster-ip-range={SERVICE_RANGE}", "--allow-privileged=true",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
        f"--audit-policy-file={policy}", f"--audit-log-path={plane.audit_log}", "--audit-log-format=json",
        "--audit-log-mode=blocking", "--audit-log-maxsize=0",
        "--profiling=false", "--v=0",
    ]
    progress(f"starting kube-apiserver on {plane.server}")
    sup.start("kube-apiserver", plane.apiserver_argv)
    _wait_ready(plane, timeout)

    def component_kubeconfig(name: str, pair: Any) -> Path:
        return write_cert_kubeconfig(root / f"{name}.kubeconfig", plane.server, pki.ca.cert, cert=pair.cert,
                                     key=pair.key, name=name)

    cm_kcfg = component_kubeconfig("kube-controller-manager", pki.controller_manager)
    progress("starting kube-controller-manager and kube-scheduler")
    sup.start("kube-controller-manager", [
        str(bins["kube-controller-manager"]), f"--kubeconfig={cm_kcfg}",
        f"--authentication-kubeconfig={cm_kcfg}", f"--authorization-kubeconfig={cm_kcfg}",
        "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
        f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca.cert}",
        "--use-service-account-credentials=true", f"--service-cluster-ip-range={SERVICE_RANGE}",
        "--controllers=*,-nodeipam", "--v=0",
    ])
    sched_kcfg = component_kubeconfig("kube-scheduler", pki.scheduler)
    sup.start("kube-scheduler", [
        str(bins["kube-scheduler"]), f"--kubeconfig={sched_kcfg}",
        f"--authentication-kubeconfig={sched_kcfg}", f"--authorization-kubeconfig={sched_kcfg}",
        "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}", "--v=0",
    ])
    stages = root / "kwok-stages.yaml"
    import subprocess  # noqa: PLC0415

    stages.write_text(subprocess.run([str(bins["kwok-stages"])], check=True, capture_output=True, text=True).stdout)
    progress(f"starting kwok with {len(nodes)} fake nodes (pod IPs in {POD_CIDR})")
    sup.start("kwok", [
        str(bins["kwok"]), f"--kubeconfig={plane.admin_kubeconfig}", "--manage-all-nodes=true",
        f"--cidr={POD_CIDR}", "--node-ip=127.0.0.1", f"--config={stages}",
        "--node-lease-duration-seconds=0", f"--server-address=127.0.0.1:{free_port()}",
    ])
    api = plane.api_client()
    core = client.CoreV1Api(api)
    for spec in nodes:
        core.create_node(node_object(spec))  # type: ignore[arg-type]

    def nodes_ready() -> bool:
        items = core.list_node().items
        ready = [n for n in items
                 if any(c.type == "Ready" and c.status == "True" for c in (n.status and n.status.conditions) or [])]
        return len(ready) == len(nodes)

    _wait(nodes_ready, f"{len(nodes)} nodes Ready", timeout, plane)

    def default_sa() -> bool:
        accounts = core.list_namespaced_service_account("default").items
        return any(sa.metadata is not None and sa.metadata.name == "default" for sa in accounts)

    _wait(default_sa, "the default ServiceAccount (controller-manager)", timeout, plane)
    progress(f"control plane ready: {plane.server} ({len(nodes)} nodes)")


def iter_logs(plane: ControlPlane) -> Iterator[Path]:
    """Every component log file."""
    yield from sorted((plane.root / "logs").glob("*.log"))
