"""``make run`` without a cluster: emulator + CRD + operator + the example CR, then a report.

1. start the local API emulator on 127.0.0.1 (:class:`~glm_operator.devcluster.emulator.EmulatorServer`);
2. write a kubeconfig for it and register the GLMDeployment CRD from ``crds/`` (generated);
3. run the real kopf operator (all handlers of :mod:`glm_operator.handlers`) in this process;
4. create the example CR and wait for the first complete reconcile (every rendered child exists and
   ``status.observedGeneration`` equals the CR's generation);
5. print each child (kind/name), the CR's status and the ``kubectl --server …`` line; with ``once``
   return 0 (or 1 with the reason), otherwise keep serving until Ctrl-C so further ``kubectl apply``
   calls are reconciled live.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from glm_operator.api.crd import build_crd
from glm_operator.api.findings import SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.api.spec import API_GROUP, API_VERSION, PLURAL
from glm_operator.cluster.apiclient import make_api_client
from glm_operator.devcluster.emulator import EmulatorServer, write_kubeconfig
from glm_operator.observe import metrics
from glm_operator.render.manifests import render

console = Console(soft_wrap=True)


def _children(api: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    from glm_operator.cluster.kinds import CHILD_KINDS  # noqa: PLC0415
    from glm_operator.cluster.reconcile import child_selector  # noqa: PLC0415

    found: list[dict[str, Any]] = []
    for kind in CHILD_KINDS:
        found += kind.list(api, namespace, child_selector(name))
    return found


def _first_reconcile_done(cr: dict[str, Any] | None, live: list[dict[str, Any]], wanted: set[tuple[str, str]]) -> bool:
    if cr is None:
        return False
    status = cr.get("status") or {}
    have = {(o["kind"], o["metadata"]["name"]) for o in live}
    return status.get("observedGeneration") == cr["metadata"].get("generation") and wanted <= have


def _report(server_url: str, kubeconfig: Path, cr: dict[str, Any], live: list[dict[str, Any]], elapsed: float) -> None:
    table = Table(title=f"children of GLMDeployment {cr['metadata']['namespace']}/{cr['metadata']['name']}")
    table.add_column("kind")
    table.add_column("name")
    table.add_column("owner")
    uid = cr["metadata"]["uid"]
    for obj in sorted(live, key=lambda o: (o["kind"], o["metadata"]["name"])):
        owned = any(r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or [])
        table.add_row(obj["kind"], obj["metadata"]["name"], "✓ controller" if owned else "—")
    console.print(table)
    console.print(f"[bold]status[/] (first reconcile {elapsed * 1000:.0f} ms after apply):")
    console.print(yaml.safe_dump(cr.get("status") or {}, sort_keys=False), highlight=False, markup=False)
    console.print("Talk to the emulator with kubectl:", highlight=False)
    console.print(f"  kubectl --server {server_url} get glmd,statefulsets,services", highlight=False)
    console.print(f"  kubectl --server {server_url} apply --validate=false -f my-glmdeployment.yaml", highlight=False)
    console.print(f"  (or export KUBECONFIG={kubeconfig} while this runs)", highlight=False)
    if metrics.SERVER.port is not None:
        console.print(f"Operator metrics: http://127.0.0.1:{metrics.SERVER.port}/metrics", highlight=False)


async def _stop_when_orphaned(stop: asyncio.Event, period: float = 1.0) -> None:
    """Set ``stop`` once this process is re-parented (its parent, e.g. ``make``, was killed)."""
    parent = os.getppid()
    while os.getppid() == parent:
        await asyncio.sleep(period)
    console.print("parent process gone; stopping")
    stop.set()


async def _drive(example: Path, once: bool, timeout: float, server: EmulatorServer, kubeconfig: Path) -> int:
    import kopf  # noqa: PLC0415
    from kubernetes import client  # noqa: PLC0415

    from glm_operator.cluster.reconcile import read_deployment  # noqa: PLC0415

    doc = yaml.safe_load(example.read_text())
    try:
        rendered = render(parse(doc))
    except SpecInvalidError as exc:
        console.print(f"[red]{example} is invalid:[/]\n{exc.summary()}")
        return 1
    wanted = {(o["kind"], o["metadata"]["name"]) for o in rendered.objects}
    namespace = doc["metadata"].get("namespace") or "default"
    name = doc["metadata"]["name"]

    from glm_operator import handlers  # noqa: F401, PLC0415  (importing registers the kopf handlers)

    api = make_api_client()
    crd: Any = build_crd()  # the client accepts a plain dict body
    await asyncio.to_thread(client.ApiextensionsV1Api(api).create_custom_resource_definition, crd)

    stop = asyncio.Event()
    ready = asyncio.Event()
    operator = asyncio.create_task(
        kopf.operator(standalone=True, clusterwide=True, stop_flag=stop, ready_flag=ready)
    )
    try:
        await asyncio.wait_for(ready.wait(), timeout=30)
        custom = client.CustomObjectsApi(api)
        started = time.monotonic()
        await asyncio.to_thread(
            custom.create_namespaced_custom_object, API_GROUP, API_VERSION, namespace, PLURAL, doc
        )
        cr: dict[str, Any] | None = None
        live: list[dict[str, Any]] = []
        while time.monotonic() - started < timeout:
            cr = await asyncio.to_thread(read_deployment, api, namespace, name)
            live = await asyncio.to_thread(_children, api, namespace, name)
            if _first_reconcile_done(cr, live, wanted):
                break
            await asyncio.sleep(0.05)
        else:
            console.print(f"[red]no complete reconcile within {timeout:.0f} s[/]; CR status:")
            console.print(yaml.safe_dump((cr or {}).get("status") or {}), markup=False)
            return 1
        assert cr is not None
        _report(server.url, kubeconfig, cr, live, time.monotonic() - started)
        if once:
            return 0
        console.print("Operator running; apply more CRs with kubectl. Ctrl-C to stop.")
        # kopf handles SIGINT/SIGTERM itself: it stops the operator task, which ends this session.
        # `make` does not forward SIGTERM to its children, so also stop when the parent goes away.
        orphan_watch = asyncio.create_task(_stop_when_orphaned(stop))
        with contextlib.suppress(asyncio.CancelledError):
            await operator
        orphan_watch.cancel()
        console.print("stopped")
        return 0
    finally:
        stop.set()
        operator.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await operator


def run_dev_session(*, example: Path, once: bool, port: int, timeout: float) -> int:
    """Run the whole local session; returns the process exit code (0 ok, 1 failure)."""
    if not example.is_file():
        console.print(f"[red]error:[/] example {example} not found")
        return 1
    os.environ.setdefault("GLM_KOPF_SCANNING", "off")
    with (
        tempfile.TemporaryDirectory(prefix="glm-dev-") as workdir,
        EmulatorServer(host="127.0.0.1", port=port) as server,
    ):
        kubeconfig = Path(workdir) / "kubeconfig"
        write_kubeconfig(kubeconfig, server.url)
        os.environ["KUBECONFIG"] = str(kubeconfig)
        console.print(f"Kubernetes API emulator on {server.url} (kubeconfig {kubeconfig})", highlight=False)
        try:
            return asyncio.run(_drive(example, once, timeout, server, kubeconfig))
        except KeyboardInterrupt:
            console.print("stopped")
            return 0
