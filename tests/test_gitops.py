"""examples/gitops: the kustomize base + overlay (real `kubectl kustomize`, offline), the Argo CD
Applications, and the Argo CD health check (Lua, run by lupa) against statuses the operator writes."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import lupa
import pytest
import yaml

from glm_localcluster.binaries import ensure_binaries
from glm_operator.api.crd import build_crd
from glm_operator.api.findings import Finding, Severity
from glm_operator.api.load import parse
from glm_operator.observe import status as observe
from glm_operator.render.manifests import render
from tests.conftest import ROOT, seed

GITOPS = ROOT / "examples" / "gitops"
HEALTH_KEY = "resource.customizations.health.serving.glm.dev_GLMDeployment"
NOW = "2026-11-29T12:00:00Z"


def kustomize(path: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` of a folder (no cluster, no network), with the project's kubectl (tools/cluster)."""
    kubectl = ensure_binaries(("kube",))["kubectl"]
    result = subprocess.run(
        [str(kubectl), "kustomize", str(path)], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_production_overlay_renders_a_valid_glmdeployment() -> None:
    (cr,) = kustomize(GITOPS / "overlays" / "production")
    assert cr["kind"] == "GLMDeployment" and cr["metadata"]["namespace"] == "serving"
    assert cr["metadata"]["labels"] == {"app.kubernetes.io/part-of": "glm", "environment": "production"}
    assert cr["spec"]["decode"] == {"replicas": 2} and "@sha256:" in cr["spec"]["image"]
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.Draft202012Validator(schema).validate(cr)
    rendered = render(parse(cr))  # the operator accepts it: no error finding
    pods = {o["metadata"]["name"]: o["spec"]["replicas"] for o in rendered.objects if o["kind"] == "StatefulSet"}
    assert pods == {"glm-5-3-prefill": 1, "glm-5-3-decode": 2}
    assert {o["kind"] for o in rendered.objects} >= {"PodMonitor", "InferencePool"}
    assert {o["metadata"]["namespace"] for o in rendered.objects} == {"serving"}


def test_argocd_folder_carries_the_health_check_and_applications() -> None:
    objects = kustomize(GITOPS / "argocd")
    assert not [o for o in objects if o["kind"] == "ConfigMap"], "a whole argocd-cm would wipe Argo CD's settings"
    patch = yaml.safe_load((GITOPS / "argocd" / "argocd-cm-patch.yaml").read_text())
    assert patch == {"data": {HEALTH_KEY: (GITOPS / "argocd" / "health.lua").read_text()}}, (
        "argocd-cm-patch.yaml differs from health.lua: copy health.lua into it"
    )
    apps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Application"}
    assert set(apps) == {"glm-operator", "glm-5-3"}
    for app in apps.values():
        assert app["apiVersion"] == "argoproj.io/v1alpha1"
        assert (ROOT / app["spec"]["source"]["path"]).is_dir()
    (overlay_cr,) = kustomize(ROOT / apps["glm-5-3"]["spec"]["source"]["path"])
    assert apps["glm-5-3"]["spec"]["destination"]["namespace"] == overlay_cr["metadata"]["namespace"]
    assert (ROOT / apps["glm-operator"]["spec"]["source"]["path"] / "Chart.yaml").is_file()


# ----------------------------------------------------------------------------------- Argo CD health (Lua)


def _lua_value(lua: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return lua.table_from({k: _lua_value(lua, v) for k, v in value.items()})
    if isinstance(value, list):
        return lua.table_from([_lua_value(lua, v) for v in value])
    return value


def argo_health(obj: dict[str, Any]) -> tuple[str, str]:
    """Run health.lua as Argo CD does: the object as the global ``obj``, the script's return value."""
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = _lua_value(lua, obj)
    result = lua.execute((GITOPS / "argocd" / "health.lua").read_text())
    return str(result["status"]), str(result["message"])


def _cr(generation: int, status: dict[str, Any] | None) -> dict[str, Any]:
    cr: dict[str, Any] = {
        "apiVersion": "serving.glm.dev/v1alpha1", "kind": "GLMDeployment",
        "metadata": {"name": "glm-5-3", "namespace": "default", "generation": generation},
    }
    if status is not None:
        cr["status"] = status
    return cr


def _workload(ready: int, *, generation: int = 1) -> dict[str, Any]:
    return {"metadata": {"generation": generation}, "status": {
        "observedGeneration": generation, "readyReplicas": ready, "updatedReplicas": ready,
        "currentRevision": "r1", "updateRevision": "r1"}}


def _healthy(generation: int, ready: int, apply_error: str | None = None, previous: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    workloads = {role: (_workload(ready), 1) for role in ("prefill", "decode", "router")}
    return observe.healthy_status(
        previous=previous or {}, generation=generation, workloads=workloads, endpoint="http://glm-5-3-epp.default.svc:80",
        plan=render(parse(seed())).plan, warnings=[], now=NOW, apply_error=apply_error,
    )


def test_health_without_status_is_progressing() -> None:
    assert argo_health(_cr(1, None)) == ("Progressing", "Waiting for the operator to report status")


def test_health_while_engines_load_is_progressing() -> None:
    status, message = argo_health(_cr(1, _healthy(1, ready=0)))
    assert status == "Progressing" and message.startswith("ReplicasNotReady: waiting for prefill 0/1")


def test_health_when_every_workload_is_rolled_out_is_healthy() -> None:
    assert argo_health(_cr(1, _healthy(1, ready=1))) == (
        "Healthy", "AllReplicasReady: ready: prefill 1/1, decode 1/1, router 1/1")


def test_health_when_a_child_cannot_be_applied_is_degraded() -> None:
    error = "cannot apply InferencePool/glm-5-3: the CRD is not installed"
    status, message = argo_health(_cr(1, _healthy(1, ready=1, apply_error=error)))
    assert (status, message) == ("Degraded", f"ApplyFailed: {error}")


def test_health_of_a_refused_spec_is_degraded_while_the_old_generation_runs() -> None:
    running = _healthy(1, ready=1)
    finding = Finding("spec.prefill.parallelism.decodeContext", 4, "not allowed", "use 1 or 8", Severity.ERROR)
    refused = observe.invalid_status(previous=running, generation=2, findings=[finding], now=NOW)
    status, message = argo_health(_cr(2, refused))
    assert status == "Degraded" and message.startswith("InvalidSpec: ") and "decodeContext" in message


@pytest.mark.parametrize("lagging", ["status", "conditions"])
def test_health_while_the_operator_has_not_seen_the_new_generation_is_progressing(lagging: str) -> None:
    status = copy.deepcopy(_healthy(1, ready=1))  # Ready for generation 1
    if lagging == "conditions":  # status says 2 but the conditions were written for 1
        status["observedGeneration"] = 2
    health, message = argo_health(_cr(2, status))
    assert health == "Progressing"
    assert message == ("Waiting for the operator to reconcile generation 2 (observed 1)" if lagging == "status"
                       else "Waiting for the Ready condition of generation 2")


def test_health_ignores_conditions_it_does_not_know() -> None:
    status = _healthy(1, ready=1)
    status["conditions"].append({"type": "Planned", "status": "False", "reason": "Future",
                                 "lastTransitionTime": NOW, "observedGeneration": 1})
    assert argo_health(_cr(1, status))[0] == "Healthy"
