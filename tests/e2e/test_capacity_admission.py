"""The operator plans every CR before it writes a child: a CR whose KV cannot hold maxModelLen is
refused with the numbers, with no child created (new CR) or changed (update)."""

from __future__ import annotations

from typing import Any

from glm_operator.api.spec import PLURAL
from tests.conftest import EXAMPLES, INVALID_EXAMPLES, load_cr
from tests.e2e.conftest import Cluster

OVERSIZED = next(p for p in INVALID_EXAMPLES if p.name == "decode-offload-only-1m.yaml")


def _condition(cr: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in cr["status"]["conditions"] if c["type"] == ctype)


def _child_writes(cluster: Cluster, since: int) -> list[Any]:
    return [r for r in cluster.emulator.write_requests(since)
            if f"/{PLURAL}/" not in r.path and "/events" not in r.path and not r.path.endswith(f"/{PLURAL}")]


async def test_oversized_cr_is_refused_before_any_child_is_written(cluster: Cluster) -> None:
    mark = len(cluster.emulator.request_log)
    cr = load_cr(OVERSIZED)
    cr["metadata"]["name"] = "too-long"
    await cluster.create(cr)
    cr = await cluster.wait_reconciled("too-long", 1)
    planned = _condition(cr, "Planned")
    assert planned["status"] == "False" and planned["reason"] == "CapacityExceeded"
    assert "decode rank: a 1,048,576-token request needs 53.4 GiB of KV" in planned["message"]
    assert "15.0 GiB for KV" in planned["message"] and "enable decode.hiSparse" in planned["message"]
    assert _condition(cr, "Ready")["status"] == "False"
    await cluster.settle()
    assert await cluster.children("too-long") == {}
    assert _child_writes(cluster, mark) == []


async def test_update_that_no_longer_fits_leaves_the_workloads_untouched(cluster: Cluster) -> None:
    await cluster.create(load_cr(EXAMPLES / "glm-5.3-pd.yaml"))
    cr = await cluster.wait_reconciled("glm-5-3", 1)
    assert _condition(cr, "Planned")["status"] == "True"
    await cluster.wait_for(lambda: _has_children(cluster), "children")
    await cluster.settle()
    before = {k: v["metadata"]["resourceVersion"] for k, v in (await cluster.children("glm-5-3")).items()}
    mark = len(cluster.emulator.request_log)

    await cluster.patch_spec("glm-5-3", {"decode": {"hiSparse": {"enabled": False}}})
    cr = await cluster.wait_reconciled("glm-5-3", 2)
    planned = _condition(cr, "Planned")
    assert planned["reason"] == "CapacityExceeded" and "spec.model.maxModelLen" in planned["message"]
    assert cr["status"]["capacity"]["maxContextTokens"] == 1_048_576  # the plan the workloads run with
    await cluster.settle()
    after = {k: v["metadata"]["resourceVersion"] for k, v in (await cluster.children("glm-5-3")).items()}
    assert after == before
    assert _child_writes(cluster, mark) == []


async def _has_children(cluster: Cluster) -> bool:
    return len(await cluster.children("glm-5-3")) >= 4
