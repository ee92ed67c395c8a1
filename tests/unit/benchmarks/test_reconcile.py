"""The pure helpers of ``benchmarks/reconcile.py``: /proc parsing, audit events → per-CR counts and times."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from benchmarks.reconcile import (
    SHARED,
    children_applied_at,
    count_requests,
    owner_of,
    parse_cpu_ticks,
    parse_vmrss,
    per_cr_counts,
    proc_sample,
    ready_status,
    reconcile_total,
    seed_copies,
)

STATUS = "Name:\tpython\nVmPeak:\t  300000 kB\nVmRSS:\t  108544 kB\nThreads:\t9\n"
# the command may hold spaces and parentheses: fields are counted after the last ')'
STAT = "4103 (python (glm) x) S 1 4103 4103 0 -1 4194560 9000 0 0 0 1234 56 0 0 20 0 9 0 100 300000000 26500"


def _event(verb: str, resource: str | None = None, name: str | None = None, *, code: int = 200,
           subresource: str | None = None, at: str = "2026-01-01T00:00:01.500000Z") -> dict[str, Any]:
    ref: dict[str, Any] = {}
    if resource:
        ref = {"resource": resource, "namespace": "bench-3", **({"name": name} if name else {})}
        if subresource:
            ref["subresource"] = subresource
    return {"verb": verb, "objectRef": ref, "responseStatus": {"code": code}, "stageTimestamp": at}


def test_vmrss_in_bytes() -> None:
    assert parse_vmrss(STATUS) == 108544 * 1024
    with pytest.raises(ValueError, match="VmRSS"):
        parse_vmrss("Name:\tzombie\n")


def test_cpu_ticks_are_utime_plus_stime() -> None:
    assert parse_cpu_ticks(STAT) == 1234 + 56


def test_proc_sample_of_this_process() -> None:
    sample = proc_sample(os.getpid())
    assert sample.rss_bytes > 0 and sample.cpu_seconds > 0


def test_proc_sample_from_a_fake_proc(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "status").write_text(STATUS)
    (tmp_path / "42" / "stat").write_text(STAT)
    sample = proc_sample(42, tmp_path)
    assert sample.rss_bytes == 108544 * 1024
    assert sample.cpu_seconds == pytest.approx(1290 / os.sysconf("SC_CLK_TCK"))


def test_owner_is_the_longest_matching_cr_name() -> None:
    crs = ["glm-1", "glm-10"]
    assert owner_of("glm-1", crs) == "glm-1"
    assert owner_of("glm-1-prefill", crs) == "glm-1"
    assert owner_of("glm-10-epp", crs) == "glm-10"
    assert owner_of("glm-10.17a2b3", crs) == "glm-10"  # an Event about the CR
    assert owner_of("glm-100-epp", crs) == SHARED
    assert owner_of(None, crs) == SHARED


def test_counts_split_requests_writes_events_watches() -> None:
    events = [
        _event("list", "statefulsets"),
        _event("watch", "statefulsets"),
        _event("patch", "statefulsets", "glm-0-prefill"),
        _event("patch", "glmdeployments", "glm-0", subresource="status"),
        _event("create", "events", "glm-0.abc"),
        _event("get", "glmdeployments", "glm-1", code=404),
        _event("patch", "roles", "glm-1-epp", code=403),
    ]
    total = count_requests(events)
    assert (total.requests, total.writes, total.events, total.watches) == (6, 3, 1, 1)
    assert (total.errors, total.forbidden) == (2, 1)
    assert total.by_verb == {"list": 1, "patch": 3, "create": 1, "get": 1}
    per_cr = per_cr_counts(events, ["glm-0", "glm-1"])
    assert (per_cr["glm-0"].requests, per_cr["glm-0"].writes, per_cr["glm-0"].events) == (3, 2, 1)
    assert (per_cr["glm-1"].requests, per_cr["glm-1"].writes) == (2, 1)
    assert (per_cr[SHARED].requests, per_cr[SHARED].watches) == (1, 1)


def test_children_applied_at_is_the_first_successful_write_of_the_last_child() -> None:
    expected = {
        "glm-0": {("statefulsets", "glm-0-prefill"), ("services", "glm-0-prefill")},
        "glm-1": {("statefulsets", "glm-1-prefill")},
    }
    events = [
        _event("patch", "statefulsets", "glm-0-prefill", code=500, at="2026-01-01T00:00:01Z"),
        _event("patch", "statefulsets", "glm-0-prefill", at="2026-01-01T00:00:03.250000Z"),
        _event("patch", "services", "glm-0-prefill", at="2026-01-01T00:00:02Z"),
        _event("patch", "statefulsets", "glm-0-prefill", at="2026-01-01T00:00:09Z"),  # a later re-apply
        _event("patch", "glmdeployments", "glm-1", subresource="status", at="2026-01-01T00:00:02Z"),
    ]
    applied = children_applied_at(events, expected)
    t0 = children_applied_at([_event("patch", "services", "x", at="2026-01-01T00:00:00Z")],
                             {"x": {("services", "x")}})["x"]
    assert t0 is not None and applied["glm-0"] is not None
    assert applied["glm-0"] - t0 == pytest.approx(3.25)
    assert applied["glm-1"] is None


def test_reconcile_total_sums_every_label_set() -> None:
    text = (
        "# TYPE glm_operator_reconcile_duration_seconds histogram\n"
        'glm_operator_reconcile_duration_seconds_count{result="unchanged"} 7.0\n'
        'glm_operator_reconcile_duration_seconds_count{result="changed"} 3.0\n'
        "glm_operator_reconcile_duration_seconds_count_other 99\n"
        'glm_operator_reconcile_duration_seconds_sum{result="changed"} 0.5\n'
    )
    assert reconcile_total(text) == 10.0


def test_ready_status_and_seed_copies() -> None:
    assert ready_status({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert not ready_status({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert not ready_status({})
    seed = {"apiVersion": "v", "kind": "K", "metadata": {"name": "x", "namespace": "default"}, "spec": {"a": 1}}
    docs = seed_copies(seed, "bench-2", 2)
    assert [d["metadata"] for d in docs] == [{"name": "glm-000", "namespace": "bench-2"},
                                            {"name": "glm-001", "namespace": "bench-2"}]
    docs[0]["spec"]["a"] = 2
    assert seed["spec"]["a"] == 1 and docs[1]["spec"]["a"] == 1
