"""The operator plans every CR before it writes a child: a new CR whose KV cannot hold maxModelLen is refused with
the numbers and no child is created (an update that no longer fits: tests/e2e/test_lifecycle.py)."""

from __future__ import annotations

from tests.conftest import INVALID_EXAMPLES, load_cr
from tests.e2e.conftest import Cluster

OVERSIZED = next(p for p in INVALID_EXAMPLES if p.name == "decode-offload-only-1m.yaml")


async def test_oversized_cr_is_refused_before_any_child_is_written(cluster: Cluster) -> None:
    mark = cluster.mark()
    cr = load_cr(OVERSIZED)
    cr["metadata"]["name"] = "too-long"
    await cluster.create(cr)
    cr = await cluster.wait_reconciled("too-long", 1)
    planned = next(c for c in cr["status"]["conditions"] if c["type"] == "Planned")
    assert planned["status"] == "False" and planned["reason"] == "CapacityExceeded"
    assert "decode rank: a 1,048,576-token request needs 53.4 GiB of KV" in planned["message"]
    assert "15.0 GiB for KV" in planned["message"] and "enable decode.hiSparse" in planned["message"]
    await cluster.settle()
    assert await cluster.children("too-long") == {}
    written = {(e.get("objectRef") or {}).get("resource") for e in cluster.writes(mark)}
    assert written <= {"glmdeployments"}, written
