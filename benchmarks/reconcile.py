"""Operator benchmark on the real local cluster (``make bench``): convergence, API requests, idle cost.

Brings up the local Kubernetes of :mod:`glm_localcluster` (etcd, kube-apiserver, controller-manager, scheduler, kwok
with enough fake 8×H200 nodes for two engines per CR), starts the operator as a subprocess (``glmctl run``) with only
the chart ServiceAccount's token, then for each CR count (default 1, 50, 200), in a namespace of its own:

1. ``kubectl apply --server-side`` of N copies of the seed CR (examples/glm-5.3-pd.yaml), clock started just before;
2. time to all children applied: per CR, the API server's timestamp (audit log) of the operator's first successful
   write of its last expected child; the phase's figure is the slowest CR;
3. time to ``Ready``: the admin lists the CRs every 0.25 s; the phase's figure is when the last one showed Ready=True;
   time to quiet: the operator's last write before it made none for 3 s (at most ``--settle-timeout`` after Ready);
4. the operator's API requests and writes (audit log, user = the operator's ServiceAccount) from the apply until
   quiet, per CR (requests naming a CR's object or one of its children are that CR's; LISTs and
   WATCHes are shared and divided by N in the ``/CR`` column);
5. an idle window spanning at least two resyncs (``GLM_RESYNC_SECONDS``, default 5 here): the operator's requests
   and writes (goal 0 and 0), the resync reconciles it ran meanwhile (its ``/metrics``), its CPU seconds
   (utime+stime of /proc/<pid>/stat) and its RSS (VmRSS of /proc/<pid>/status).

The namespace is deleted (and its deletion awaited) before the next count, so each idle window sees only its own CRs.
Also reported: the cold start of the control plane itself (``bring_up``, per step) and of the operator.
Prints a table and writes JSON (``--json``, default benchmarks/results/reconcile.json). No pass/fail thresholds:
the issue's goals (200 CRs Ready in < 15 s, idle 0 requests and ≈ 0 CPU) are shown beside the numbers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from rich.console import Console
from rich.table import Table

from glm_localcluster.nodes import NodeSpec
from glm_localcluster.operator_process import OperatorProcess, start_operator
from glm_localcluster.stack import Stack, bring_up
from glm_localcluster.weights import weights_volume
from glm_operator.api.load import parse
from glm_operator.api.spec import API_GROUP, API_VERSION, PLURAL
from glm_operator.cluster.kinds import kind_of
from glm_operator.render.manifests import render

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "reconcile.json"
SEED = ROOT / "examples" / "glm-5.3-pd.yaml"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: Requests that are not one CR's: the operator's LISTs and WATCHes (and anything without an object name).
SHARED = ""


# --------------------------------------------------------------------------------------------------------------------
# Pure helpers (unit-tested in tests/unit/benchmarks/test_reconcile.py)
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProcSample:
    """One reading of a process: resident memory and CPU time so far."""

    rss_bytes: int
    cpu_seconds: float


def parse_vmrss(status_text: str) -> int:
    """Bytes of ``VmRSS`` in the text of ``/proc/<pid>/status``.

    Raises:
        ValueError: no ``VmRSS`` line (e.g. a zombie).
    """
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            value, unit = line.split()[1:3]
            if unit.lower() != "kb":
                raise ValueError(f"unexpected VmRSS unit {unit!r}")
            return int(value) * 1024
    raise ValueError("no VmRSS line in /proc/<pid>/status")


def parse_cpu_ticks(stat_text: str) -> int:
    """``utime + stime`` (clock ticks) from the text of ``/proc/<pid>/stat``.

    The second field (the command) is in parentheses and may contain spaces or parentheses, so fields are counted
    from the last ``)``: utime and stime are fields 14 and 15 of the whole line.
    """
    rest = stat_text[stat_text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state): field n is rest[n - 3]
    return int(rest[14 - 3]) + int(rest[15 - 3])


def proc_sample(pid: int, proc: Path = Path("/proc")) -> ProcSample:
    """RSS and CPU seconds (user + system) of ``pid`` now."""
    ticks = parse_cpu_ticks((proc / str(pid) / "stat").read_text())
    rss = parse_vmrss((proc / str(pid) / "status").read_text())
    return ProcSample(rss_bytes=rss, cpu_seconds=ticks / os.sysconf("SC_CLK_TCK"))


def audit_time(event: dict[str, Any]) -> float:
    """Epoch seconds of an audit event's ``stageTimestamp`` (RFC 3339, microseconds, ``Z``)."""
    stamp: str = event.get("stageTimestamp") or event["requestReceivedTimestamp"]
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def is_write(event: dict[str, Any]) -> bool:
    """A write (create/update/patch/delete) other than an Event."""
    return event.get("verb") in WRITE_VERBS and (event.get("objectRef") or {}).get("resource") != "events"


def succeeded(event: dict[str, Any]) -> bool:
    """The API server answered 2xx."""
    return 200 <= int((event.get("responseStatus") or {}).get("code", 0)) < 300


def owner_of(name: str | None, crs: Iterable[str]) -> str:
    """The CR an object name belongs to: the CR itself or a child ``<cr>-…``/``<cr>.…`` (longest match wins).

    Returns :data:`SHARED` for no name (LIST, WATCH) or a name of no CR.
    """
    if not name:
        return SHARED
    best = SHARED
    for cr in crs:
        if (name == cr or name.startswith((f"{cr}-", f"{cr}."))) and len(cr) > len(best):
            best = cr
    return best


@dataclass
class RequestCounts:
    """API requests of one kind of traffic: ``requests`` excludes WATCH (counted in ``watches``);
    ``writes`` excludes Events (counted in ``events``)."""

    requests: int = 0
    writes: int = 0
    events: int = 0
    watches: int = 0
    errors: int = 0
    forbidden: int = 0
    by_verb: dict[str, int] = field(default_factory=dict)
    writes_by_resource: dict[str, int] = field(default_factory=dict)

    def add(self, event: dict[str, Any]) -> None:
        """Count one audit event."""
        verb = str(event.get("verb"))
        if verb == "watch":
            self.watches += 1
            return
        self.requests += 1
        self.by_verb[verb] = self.by_verb.get(verb, 0) + 1
        if (event.get("objectRef") or {}).get("resource") == "events" and verb in WRITE_VERBS:
            self.events += 1
        elif is_write(event):
            self.writes += 1
            ref = event.get("objectRef") or {}
            key = "/".join(str(part) for part in (ref.get("resource"), ref.get("subresource")) if part)
            self.writes_by_resource[key] = self.writes_by_resource.get(key, 0) + 1
        code = int((event.get("responseStatus") or {}).get("code", 0))
        if code >= 400:
            self.errors += 1
        if code == 403:
            self.forbidden += 1


def count_requests(events: Iterable[dict[str, Any]]) -> RequestCounts:
    """Totals over ``events``."""
    counts = RequestCounts()
    for event in events:
        counts.add(event)
    return counts


def per_cr_counts(events: Iterable[dict[str, Any]], crs: Sequence[str]) -> dict[str, RequestCounts]:
    """Counts per CR name (see :func:`owner_of`), plus :data:`SHARED` for requests of no single CR."""
    out: dict[str, RequestCounts] = {name: RequestCounts() for name in (*crs, SHARED)}
    for event in events:
        out[owner_of((event.get("objectRef") or {}).get("name"), crs)].add(event)
    return out


def children_applied_at(
    events: Iterable[dict[str, Any]], expected: dict[str, set[tuple[str, str]]]
) -> dict[str, float | None]:
    """Per CR: when (epoch s) the operator's first successful write of its last expected child completed.

    ``expected`` maps a CR name to its children as ``(resource plural, name)``; ``None`` if one was never written.
    """
    first: dict[tuple[str, str], float] = {}
    for event in events:
        ref = event.get("objectRef") or {}
        if not (is_write(event) and succeeded(event)) or ref.get("subresource"):
            continue
        key = (str(ref.get("resource")), str(ref.get("name")))
        when = audit_time(event)
        if key not in first or when < first[key]:
            first[key] = when
    out: dict[str, float | None] = {}
    for cr, children in expected.items():
        times = [first.get(child) for child in children]
        out[cr] = None if any(t is None for t in times) else max(t for t in times if t is not None)
    return out


def reconcile_total(metrics_text: str, name: str = "glm_operator_reconcile_duration_seconds_count") -> float:
    """Sum of a Prometheus counter's samples (every label set) in a ``/metrics`` text."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in {"{", " "}:
            total += float(line.rsplit(maxsplit=1)[1])
    return total


def ready_status(cr: dict[str, Any]) -> bool:
    """Whether a GLMDeployment's ``Ready`` condition is True."""
    conditions = (cr.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def seed_copies(seed: dict[str, Any], namespace: str, count: int) -> list[dict[str, Any]]:
    """``count`` copies of ``seed`` named ``glm-000``, ``glm-001``, … in ``namespace``."""
    width = max(3, len(str(count - 1)))
    docs = []
    for i in range(count):
        doc = json.loads(json.dumps(seed))
        doc["metadata"] = {**doc["metadata"], "name": f"glm-{i:0{width}d}", "namespace": namespace}
        docs.append(doc)
    return docs


# --------------------------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------------------------
@dataclass
class Phase:
    """The measurements of one CR count."""

    crs: int
    apply_seconds: float = 0.0
    children_seconds: float | None = None
    children_median_seconds: float | None = None
    ready_seconds: float | None = None
    ready_count: int = 0
    quiet_seconds: float | None = None
    converge_requests: dict[str, Any] = field(default_factory=dict)
    requests_per_cr: float = 0.0
    writes_per_cr: float = 0.0
    max_requests_one_cr: int = 0
    max_writes_one_cr: int = 0
    shared_requests: int = 0
    converge_cpu_seconds: float = 0.0
    settle_seconds: float = 0.0
    idle_window_seconds: float = 0.0
    idle_requests: int = 0
    idle_writes: int = 0
    idle_by_verb: dict[str, int] = field(default_factory=dict)
    idle_writes_by_resource: dict[str, int] = field(default_factory=dict)
    idle_reconciles: float | None = None
    idle_cpu_seconds: float = 0.0
    rss_mib: float = 0.0
    rss_max_mib: float = 0.0
    cleanup_seconds: float | None = None
    notes: list[str] = field(default_factory=list)


def _expected_children(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(kind_of(o).plural, o["metadata"]["name"]) for o in render(parse(doc)).objects}


def _read_new(path: Path, offset: int) -> tuple[int, list[dict[str, Any]]]:
    """Complete JSON lines of ``path`` after byte ``offset``, and the offset after the last of them."""
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    return offset + end, [json.loads(line) for line in data[:end].splitlines() if line.strip()]


def _wait(predicate: Callable[[], bool], timeout: float, interval: float = 0.25,
          check: Callable[[], None] | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check is not None:
            check()
        if predicate():
            return True
        time.sleep(interval)
    return False


def _metrics(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return reconcile_total(resp.read().decode())
    except OSError:
        return None


def run_phase(stack: Stack, operator: OperatorProcess, count: int, seed: dict[str, Any], *, resync: float,
              window: float, timeout: float, settle_timeout: float, cleanup: bool, log: Callable[[str], None]) -> Phase:
    """Apply ``count`` CRs, measure convergence, requests and an idle window; delete the namespace if ``cleanup``."""


    plane, user, pid = stack.plane, stack.operator_user, operator.managed.popen.pid
    phase = Phase(crs=count)
    namespace = f"bench-{count}"
    stack.kubectl_apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                         *weights_volume(namespace, "glm-weights")])
    docs = seed_copies(seed, namespace, count)
    names = [d["metadata"]["name"] for d in docs]
    expected = {d["metadata"]["name"]: _expected_children(d) for d in docs}
    custom = client.CustomObjectsApi(plane.api_client())
    time.sleep(1.0)  # let the operator see the namespace's objects before the clock starts

    mark, before = plane.audit_offset(), proc_sample(pid)
    log(f"{count} CRs: kubectl apply --server-side ({namespace})")
    t0 = time.time()
    stack.run("kubectl", ["apply", "--server-side", "-f", "-"], stdin=yaml.safe_dump_all(docs, sort_keys=False))
    phase.apply_seconds = time.time() - t0

    ready_at: dict[str, float] = {}

    def all_ready() -> bool:
        resp = custom.list_namespaced_custom_object(API_GROUP, API_VERSION, namespace, PLURAL,
                                                    _preload_content=False)
        now = time.time()
        for item in json.loads(resp.data)["items"]:  # type: ignore[attr-defined]
            if item["metadata"]["name"] not in ready_at and ready_status(item):
                ready_at[item["metadata"]["name"]] = now
        return len(ready_at) == count

    if not _wait(all_ready, timeout, check=operator.managed.check):
        phase.notes.append(f"only {len(ready_at)} of {count} CRs Ready after {timeout:.0f} s")
    phase.ready_count = len(ready_at)
    if len(ready_at) == count:
        phase.ready_seconds = max(ready_at.values()) - t0

    # quiet: the operator made no write for 3 s (capped by settle_timeout)
    settle_start, last, quiet_since, offset, writes = time.monotonic(), -1, time.monotonic(), mark, 0
    while time.monotonic() - quiet_since < 3.0:
        if time.monotonic() - settle_start > settle_timeout:
            phase.notes.append(f"the operator still wrote {settle_timeout:.0f} s after the last CR was Ready: the idle "
                               "window below is not idle")
            break
        offset, new = _read_new(plane.audit_log, offset)
        writes += sum(1 for e in new if e.get("user", {}).get("username") == user and is_write(e))
        if writes != last:
            last, quiet_since = writes, time.monotonic()
        time.sleep(0.5)
    phase.settle_seconds = time.monotonic() - settle_start
    after = proc_sample(pid)
    phase.converge_cpu_seconds = after.cpu_seconds - before.cpu_seconds

    events = plane.audit_events(user, mark)
    applied = children_applied_at(events, expected)
    done = [t - t0 for t in applied.values() if t is not None]
    if len(done) == count:
        phase.children_seconds = max(done)
        phase.children_median_seconds = sorted(done)[len(done) // 2]
    else:
        phase.notes.append(f"children of only {len(done)} of {count} CRs all applied")
    last_write = max((audit_time(e) for e in events if is_write(e)), default=None)
    phase.quiet_seconds = None if last_write is None else last_write - t0
    total = count_requests(events)
    per_cr = per_cr_counts(events, names)
    shared = per_cr.pop(SHARED)
    phase.converge_requests = asdict(total)
    phase.requests_per_cr = total.requests / count
    phase.writes_per_cr = total.writes / count
    phase.max_requests_one_cr = max(c.requests for c in per_cr.values())
    phase.max_writes_one_cr = max(c.writes for c in per_cr.values())
    phase.shared_requests = shared.requests
    if total.forbidden:
        phase.notes.append(f"{total.forbidden} requests refused with 403 (chart RBAC)")

    # idle window: at least two resyncs
    log(f"{count} CRs: idle window of {window:.0f} s (resync every {resync:g} s)")
    reconciles0 = _metrics(operator.metrics_port)
    mark, before, t_idle = plane.audit_offset(), proc_sample(pid), time.monotonic()
    rss = [before.rss_bytes]
    while time.monotonic() - t_idle < window:
        time.sleep(min(1.0, window - (time.monotonic() - t_idle)))
        rss.append(proc_sample(pid).rss_bytes)
    after = proc_sample(pid)
    phase.idle_window_seconds = time.monotonic() - t_idle
    reconciles1 = _metrics(operator.metrics_port)
    idle = count_requests(plane.audit_events(user, mark))
    phase.idle_requests, phase.idle_writes, phase.idle_by_verb = idle.requests, idle.writes, idle.by_verb
    phase.idle_writes_by_resource = idle.writes_by_resource
    phase.idle_cpu_seconds = after.cpu_seconds - before.cpu_seconds
    phase.rss_mib = after.rss_bytes / 2**20
    phase.rss_max_mib = max(rss) / 2**20
    if reconciles0 is not None and reconciles1 is not None:
        phase.idle_reconciles = reconciles1 - reconciles0

    if cleanup:
        log(f"{count} CRs: deleting namespace {namespace} (garbage collection, pods on kwok)")
        started = time.monotonic()
        stack.run("kubectl", ["delete", "namespace", namespace, "--wait=false"])

        def gone() -> bool:
            proc = stack.run("kubectl", ["get", "namespace", namespace], check=False)
            return bool(proc.returncode != 0)

        if _wait(gone, 180, interval=1.0):
            phase.cleanup_seconds = time.monotonic() - started
        else:
            phase.notes.append("namespace still terminating after 180 s")
    return phase


def _table(result: dict[str, Any]) -> Table:

    def sec(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    cp = result["control_plane"]
    table = Table(title=f"glm-operator on the local cluster ({result['machine']['cpus']} CPUs, {result['date']}); "
                        f"control plane cold start {cp['bring_up_seconds']:.1f} s with {cp['nodes']} nodes, "
                        f"operator start {cp['operator_start_seconds']:.1f} s")
    for header in ("CRs", "kubectl apply s", "→ children s", "→ Ready s", "→ quiet s", "req/CR", "writes/CR",
                   "busy CPU s", "idle req", "idle writes", "idle reconciles", "idle CPU s", "RSS MiB"):
        table.add_column(header, justify="right")
    for p in result["phases"]:
        table.add_row(
            str(p["crs"]), sec(p["apply_seconds"]), sec(p["children_seconds"]),
            sec(p["ready_seconds"]) if p["ready_seconds"] is not None else f"{p['ready_count']}/{p['crs']} Ready",
            sec(p["quiet_seconds"]), f"{p['requests_per_cr']:.1f}", f"{p['writes_per_cr']:.1f}",
            f"{p['converge_cpu_seconds']:.1f}",
            str(p["idle_requests"]), str(p["idle_writes"]),
            "—" if p["idle_reconciles"] is None else f"{p['idle_reconciles']:.0f}",
            f"{p['idle_cpu_seconds']:.2f} / {p['idle_window_seconds']:.0f} s", f"{p['rss_mib']:.0f}",
        )
    return table


def measure_restart(stack: Stack, operator: OperatorProcess, count: int, *, resync: float,
                    log: Callable[[str], None], quiet: float = 3.0, timeout: float = 120.0) -> dict[str, Any]:
    """Restart the operator with ``count`` converged CRs: its requests (by verb) and writes until it is quiet.

    Goal (issue 8): the initial LISTs and watches only, no write. Returns a dict with ``operator`` (the new one).
    """
    log(f"{count} CRs: restarting the operator")
    stack.plane.supervisor.stop(operator.managed.name)
    mark, started = stack.plane.audit_offset(), time.monotonic()
    operator = start_operator(stack, name="operator-bench-restarted", env={"GLM_RESYNC_SECONDS": f"{resync:g}"})
    last = [time.monotonic(), -1]

    def settled() -> bool:
        seen = len(stack.plane.audit_events(stack.operator_user, mark))
        if seen != last[1]:
            last[:] = [time.monotonic(), seen]
        return time.monotonic() - last[0] >= quiet

    _wait(settled, timeout, interval=0.25)
    counts = count_requests(stack.plane.audit_events(stack.operator_user, mark))
    log(f"{count} CRs: restart made {counts.requests} requests ({dict(counts.by_verb)}), {counts.writes} writes")
    return {"operator": operator, "crs": count, "requests": counts.requests, "writes": counts.writes,
            "by_verb": dict(counts.by_verb), "quiet_after_seconds": round(last[0] - started, 2)}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit code (1 only when the cluster or operator could not be started)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reconcile", description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,50,200", help="CR counts, comma-separated (default 1,50,200)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"result file (default {DEFAULT_JSON})")
    parser.add_argument("--resync", type=float, default=5.0, help="GLM_RESYNC_SECONDS of the operator (default 5)")
    parser.add_argument("--idle-window", type=float, default=None,
                        help="idle window, seconds (default 2.5 × resync: spans at least two resync passes)")
    parser.add_argument("--gpu-nodes", type=int, default=None, help="fake 8×H200 nodes (default 2 × largest count)")
    parser.add_argument("--timeout", type=float, default=180.0, help="per count: seconds to wait for Ready")
    parser.add_argument("--settle-timeout", type=float, default=240.0,
                        help="per count: seconds to wait, after Ready, for the operator to stop writing (default 240)")
    parser.add_argument("--state-dir", type=Path, default=None, help="cluster state directory (default: temporary)")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",") if c.strip()]
    window = args.idle_window or 2.5 * args.resync



    console = Console(soft_wrap=True, highlight=False)
    if not console.is_terminal:  # piped (make bench | tee): keep the table's 12 columns readable
        console = Console(soft_wrap=True, highlight=False, width=170)
    t_start = time.monotonic()

    def log(line: str) -> None:
        console.print(f"[dim]{time.monotonic() - t_start:6.1f} s ·[/] {line}")

    gpu_nodes = args.gpu_nodes or 2 * max(counts)
    cpu_nodes = math.ceil(max(counts) / 100) + 1  # one EPP pod per CR, 110 pods per node
    nodes = [NodeSpec(f"h200-{i}") for i in range(gpu_nodes)] + [
        NodeSpec(f"cpu-{i}", product=None, gpus=0, memory="4Ti", cpu="1000", rdma=0) for i in range(cpu_nodes)
    ]
    steps: list[tuple[float, str]] = []

    def progress(line: str) -> None:
        steps.append((time.monotonic() - t_start, line))
        log(line)

    seed: dict[str, Any] = yaml.safe_load(SEED.read_text())
    started = time.monotonic()
    stack = bring_up(args.state_dir, nodes=nodes, progress=progress)
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_at_start": os.getloadavg()},
        "seed": str(SEED.relative_to(ROOT)),
        "resync_seconds": args.resync,
        "goals": {"ready_200_seconds": 15, "idle_requests": 0, "idle_writes": 0, "idle_cpu_seconds": "≈ 0"},
        "control_plane": {"bring_up_seconds": time.monotonic() - started, "nodes": len(nodes), "gpu_nodes": gpu_nodes,
                          "steps": [{"at_seconds": round(t - (started - t_start), 2), "step": s} for t, s in steps]},
        "phases": [],
    }
    try:
        started = time.monotonic()
        operator = start_operator(stack, name="operator-bench", env={"GLM_RESYNC_SECONDS": f"{args.resync:g}"})
        result["control_plane"]["operator_start_seconds"] = time.monotonic() - started
        log(f"operator pid {operator.managed.popen.pid} as {stack.operator_user} (log {operator.managed.log})")
        for i, count in enumerate(counts):
            phase = run_phase(stack, operator, count, seed, resync=args.resync, window=window, timeout=args.timeout,
                              settle_timeout=args.settle_timeout,
                              cleanup=i < len(counts) - 1, log=log)
            result["phases"].append(asdict(phase))
            for note in phase.notes:
                log(f"[yellow]{count} CRs: {note}[/]")
        result["restart"] = measure_restart(stack, operator, counts[-1], resync=args.resync, log=log)
        operator = result["restart"].pop("operator")
        log_text = operator.managed.log.read_text(errors="replace")
        result["machine"]["loadavg_at_end"] = os.getloadavg()
        result["operator_log"] = {"path": str(operator.managed.log), "errors": log_text.count(" ERROR "),
                                  "tracebacks": log_text.count("Traceback")}
    finally:
        stack.stop()
    console.print(_table(result))
    console.print(f"goals: 200 CRs Ready < 15 s after the control plane is up; idle 0 requests, 0 writes, CPU ≈ 0; "
                  f"operator log: {result['operator_log']['errors']} ERROR lines, "
                  f"{result['operator_log']['tracebacks']} tracebacks; load average at start/end "
                  f"{result['machine']['loadavg_at_start'][0]:.1f}/{result['machine']['loadavg_at_end'][0]:.1f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
