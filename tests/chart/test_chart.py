"""charts/glm-operator with a real helm: lint, render, upstream schemas, the CRD copy, pod security,
metrics wiring and values.schema.json refusing bad values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.conftest import CHART, CI_VALUES, NAMESPACE, by_kind, run_helm, template
from tests.conftest import ROOT

#: Kinds without an upstream schema in kubernetes-validate (Prometheus Operator CRD).
CUSTOM_KINDS = {"ServiceMonitor"}
VALUE_SETS = {"default": [], "ci": ["-f", str(CI_VALUES)]}


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=list(VALUE_SETS))
def test_lint_strict(helm: Path, values: list[str]) -> None:
    result = run_helm(helm, "lint", "--strict", str(CHART), *values)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("k8s_version", ["1.31.0", "1.34.0"])
@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=list(VALUE_SETS))
def test_every_rendered_object_passes_strict_upstream_schemas(
    helm: Path, values: list[str], k8s_version: str
) -> None:
    objects = template(helm, *values, kube_version=k8s_version)
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "ServiceAccount", "ClusterRole", "CustomResourceDefinition", "Service"} <= kinds
    for obj in objects:
        if obj["kind"] not in CUSTOM_KINDS:
            kubernetes_validate.validate(obj, k8s_version, strict=True)


def test_chart_crd_is_the_generated_crd(helm: Path) -> None:
    generated = (ROOT / "crds" / "glmdeployment.yaml").read_text()
    assert (CHART / "files" / "crds" / "glmdeployment.yaml").read_text() == generated, "run `make crds`"
    (crd,) = by_kind(template(helm), "CustomResourceDefinition")
    expected = yaml.safe_load(generated)
    meta = crd["metadata"]
    assert meta["annotations"] == {
        "helm.sh/resource-policy": "keep", "argocd.argoproj.io/sync-options": "Prune=false,Delete=false",
    }, "uninstall and Argo CD auto-prune must keep the CRD (and CRs)"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert expected["metadata"]["labels"].items() <= meta["labels"].items()
    # the same CRD otherwise: helm's fromYaml/toYaml round trip changes no value (integers stay integers)
    assert {**crd, "metadata": expected["metadata"]} == expected


def test_crd_switches(helm: Path) -> None:
    (crd,) = by_kind(template(helm, "--set", "crds.keep=false"), "CustomResourceDefinition")
    assert "helm.sh/resource-policy" not in (crd["metadata"].get("annotations") or {})
    assert not by_kind(template(helm, "--set", "crds.enabled=false"), "CustomResourceDefinition")


def _operator(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    (deployment,) = by_kind(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, container


def test_one_restricted_operator_pod(helm: Path) -> None:
    deployment, container = _operator(template(helm))
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["args"][:2] == ["run", "--liveness=http://0.0.0.0:8081/healthz"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "liveness"}
    assert container["image"] == "ghcr.io/glm-serving/glm-operator:0.1.0"


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_metrics_port_service_and_service_monitor_agree(helm: Path) -> None:
    objects = template(helm, "-f", str(CI_VALUES))
    deployment, container = _operator(objects)
    assert _env(container)["GLM_METRICS_PORT"] == "9100"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == 9100
    (service,) = by_kind(objects, "Service")
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9100, "targetPort": "metrics", "protocol": "TCP"}]
    (monitor,) = by_kind(objects, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True  # capacity gauges carry namespace/name
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert container["image"].endswith("@sha256:" + "0" * 64)


def test_metrics_off_means_port_zero_and_no_service(helm: Path) -> None:
    objects = template(helm, "--set", "metrics.enabled=false")
    _, container = _operator(objects)
    assert _env(container)["GLM_METRICS_PORT"] == "0"
    assert not by_kind(objects, "Service") and "metrics" not in {p["name"] for p in container["ports"]}


def test_namespaced_mode_binds_only_the_chosen_namespaces(helm: Path) -> None:
    objects = template(helm, "-f", str(CI_VALUES))
    _, container = _operator(objects)
    assert container["args"][2:] == ["--namespace=serving", "--namespace=serving-canary"]
    bindings = by_kind(objects, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["serving", "serving-canary"]
    assert all(b["roleRef"]["name"] == "glm-operator" for b in bindings)
    # cluster-wide, only the read-only discovery role is bound
    assert [b["roleRef"]["name"] for b in by_kind(objects, "ClusterRoleBinding")] == ["glm-operator-cluster"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "replicaCount=2"], "replicaCount"),
        (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
        (["--set", "image.digest=latest"], "digest"),
        (["--set", "metrics.port=0"], "metrics.port"),
        (["--set", "watch.namespaces={Bad_Namespace}"], "watch.namespaces"),
        (["--set", "metrics.serviceMonitor.interval=soon"], "interval"),
        (["--set", "unknownKey=1"], "unknownKey"),
        (["--set", "operator.resyncSeconds=1"], "resyncSeconds"),
        (["--set", "image.repository=ghcr.io/x/op:latest"], "repository"),
    ],
    ids=lambda v: v if isinstance(v, str) else v[1],
)
def test_schema_rejects_bad_values(helm: Path, args: list[str], message: str) -> None:
    result = run_helm(helm, "template", "x", str(CHART), "--namespace", NAMESPACE, *args)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert message.rsplit(".", maxsplit=1)[-1] in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "metrics.port=8081"], "metrics.port and operator.livenessPort are both 8081"),
        (["--set", "metrics.enabled=false", "--set", "metrics.serviceMonitor.enabled=true"],
         "metrics.serviceMonitor.enabled needs metrics.enabled"),
        (["--set", "operator.extraEnv[0].name=GLM_METRICS_PORT", "--set", "operator.extraEnv[0].value=1"],
         "operator.extraEnv sets GLM_METRICS_PORT"),
    ],
    ids=lambda v: v if isinstance(v, str) else v[1],
)
def test_templates_refuse_values_that_contradict_each_other(helm: Path, args: list[str], message: str) -> None:
    result = run_helm(helm, "template", "x", str(CHART), "--namespace", NAMESPACE, *args)
    assert result.returncode != 0 and message in result.stderr


def test_a_registry_port_is_a_valid_repository(helm: Path) -> None:
    _, container = _operator(template(helm, "--set", "image.repository=registry.local:5000/glm/operator"))
    assert container["image"].startswith("registry.local:5000/glm/operator:")


def test_every_value_is_documented_and_in_the_schema() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    assert set(values) <= set(schema["properties"])
    # every leaf value has a "# " comment line above it, or sits inside a documented block (resources: …)
    documented_blocks: list[tuple[int, bool]] = []  # (indent, documented) of the enclosing keys
    previous = ""
    for number, line in enumerate((CHART / "values.yaml").read_text().splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "-")):
            previous = stripped or previous
            continue
        indent = len(line) - len(line.lstrip())
        documented_blocks = [(i, d) for i, d in documented_blocks if i < indent]
        documented = previous.startswith("# ")
        key, _, value = stripped.partition(":")
        if value.strip():
            assert documented or any(d for _, d in documented_blocks), f"values.yaml:{number} {key} has no comment"
        else:
            documented_blocks.append((indent, documented))
        previous = stripped
