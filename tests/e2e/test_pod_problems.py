"""Status says why engine pods do not start, on the real local cluster (real kube-scheduler, real pod conditions)."""

from __future__ import annotations

from tests.conftest import seed
from tests.e2e.conftest import Cluster

NAME = "glm-5-3"


async def test_ready_names_the_unschedulable_pod_when_its_weights_claim_is_missing(cluster: Cluster) -> None:
    cr = seed()
    cr["spec"]["model"]["source"]["pvc"]["claimName"] = "no-such-claim"  # not in the test's namespace
    await cluster.create(cr)

    async def names_the_problem() -> bool:
        message = (await cluster.condition(NAME, "Ready")).get("message", "")
        return "Unschedulable" in message and "persistentvolumeclaim" in message

    await cluster.wait_for(names_the_problem, "Ready to name the unschedulable pod", timeout=90)
    ready = await cluster.condition(NAME, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReplicasNotReady"
    assert f"pod {NAME}-" in ready["message"] and '"no-such-claim" not found' in ready["message"], ready
    progressing = await cluster.condition(NAME, "Progressing")
    assert "Unschedulable" in progressing["message"] and "persistentvolumeclaim" not in progressing["message"]
    await cluster.settle()  # the scheduler's retries do not make the operator write again and again
