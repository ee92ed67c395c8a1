"""Structural-schema pruning and defaulting of custom resources in the emulator.

Unit tests of the pure functions in ``glm_operator.devcluster._schema``, then HTTP checks against
:class:`EmulatorServer` with the repository's GLMDeployment CRD: create, merge-patch, JSON-patch,
server-side apply, PUT and ``/status`` writes all store the pruned and defaulted object, as a real
kube-apiserver does.
"""

from __future__ import annotations

import copy
import json
import pathlib
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import kmock
import pytest
import yaml

from glm_operator.devcluster import _schema
from glm_operator.devcluster.emulator import EmulatorServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
GLMD_PATH = "/apis/serving.glm.dev/v1alpha1/namespaces/default/glmdeployments"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "default": "fast"},
                "size": {"x-kubernetes-int-or-string": True, "default": "1Gi"},
                "limits": {
                    "type": "object",
                    "properties": {"cpu": {"type": "integer", "default": 2}, "memory": {"type": "string"}},
                },
                "workers": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "weight": {"type": "integer", "default": 1}},
                    },
                },
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {
                        "known": {"type": "object", "properties": {"a": {"type": "integer"}}},
                    },
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "ports": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object", "properties": {"port": {"type": "integer", "default": 80}},
                    },
                },
                "opaque": {"type": "object"},
                "note": {"type": "string", "nullable": True},
                "policy": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "retry": {
                            "type": "object",
                            "default": {"attempts": 3},
                            "properties": {
                                "attempts": {"type": "integer"},
                                "backoff": {"type": "string", "default": "1s"},
                            },
                        },
                    },
                },
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "phase": {"type": "string", "default": "Pending"},
                "ready": {"type": "object", "properties": {"count": {"type": "integer", "default": 0}}},
            },
        },
    },
}


def spec_schema() -> dict[str, Any]:
    spec: dict[str, Any] = SCHEMA["properties"]["spec"]
    return spec


# -- pruning ---------------------------------------------------------------------------------------------


def test_prune_drops_unknown_fields_of_nested_objects() -> None:
    value = {"mode": "x", "typo": 1, "limits": {"cpu": 4, "cpus": 8, "memory": "1Gi"}}
    assert _schema.prune(value, spec_schema()) == {"mode": "x", "limits": {"cpu": 4, "memory": "1Gi"}}


def test_prune_follows_array_items() -> None:
    value = {"workers": [{"name": "a", "wieght": 2}, {"name": "b", "weight": 3}], "tags": ["x", "y"]}
    assert _schema.prune(value, spec_schema()) == {
        "workers": [{"name": "a"}, {"name": "b", "weight": 3}], "tags": ["x", "y"]}


def test_preserve_unknown_fields_keeps_unknown_but_prunes_declared_properties() -> None:
    value = {"extra": {"anything": {"deep": [1, {"x": None}]}, "known": {"a": 1, "b": 2}}}
    assert _schema.prune(value, spec_schema()) == {
        "extra": {"anything": {"deep": [1, {"x": None}]}, "known": {"a": 1}}}


def test_additional_properties_prune_by_their_schema_and_bare_objects_lose_everything() -> None:
    value = {"labels": {"a": "1", "b": "2"}, "ports": {"http": {"port": 8080, "proto": "tcp"}},
             "opaque": {"k": "v"}}
    assert _schema.prune(value, spec_schema()) == {
        "labels": {"a": "1", "b": "2"}, "ports": {"http": {"port": 8080}}, "opaque": {}}


def test_prune_at_the_resource_root_keeps_api_version_kind_and_metadata() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}
    obj = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n", "labels": {"x": "y"}},
           "spec": {"a": "1", "b": "2"}, "junk": True}
    assert _schema.prune(obj, schema, resource_root=True) == {
        "apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n", "labels": {"x": "y"}}, "spec": {"a": "1"}}
    assert _schema.prune(obj, schema) == {"spec": {"a": "1"}}  # not a resource root: nothing is special


def test_embedded_resources_keep_their_type_and_object_meta() -> None:
    schema = {"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": True,
        "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}
    value = {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1},
                          "spec": {"a": "1", "b": 2}, "other": 3}}
    assert _schema.prune(value, schema)["template"] == {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1}, "spec": {"a": "1"}}
    coerced = _schema.coerce(value, schema)
    assert coerced["template"]["metadata"] == {"name": "p"}


def test_int_or_string_accepts_ints_and_strings() -> None:
    for size in (512, "512Gi", "32"):
        assert _schema.prune({"size": size}, spec_schema()) == {"size": size}
        assert _schema.apply_defaults({"size": size}, spec_schema())["size"] == size
    assert _schema.apply_defaults({}, spec_schema())["size"] == "1Gi"


def test_pattern_properties_are_honoured_leniently() -> None:
    schema = {"type": "object", "properties": {"nodeSelector": {
        "type": "object", "patternProperties": {"^[a-z./-]+$": {"type": "string"}}}}}
    value = {"nodeSelector": {"gpu.vendor/kind": "h200", "Bad Key": "x"}}
    assert _schema.prune(value, schema) == {"nodeSelector": {"gpu.vendor/kind": "h200"}}


# -- defaulting and nulls --------------------------------------------------------------------------------


def test_defaults_apply_only_inside_objects_that_are_present() -> None:
    defaulted = _schema.apply_defaults({}, spec_schema())
    assert defaulted["mode"] == "fast"
    assert "limits" not in defaulted and "workers" not in defaulted  # absent objects without a default
    assert _schema.apply_defaults({"limits": {}}, spec_schema())["limits"] == {"cpu": 2}
    assert _schema.apply_defaults({"mode": "slow", "limits": {"cpu": 8}}, spec_schema())["mode"] == "slow"


def test_defaults_inside_defaults() -> None:
    # policy defaults to {}, whose retry defaults to {"attempts": 3}, whose backoff defaults to "1s".
    assert _schema.apply_defaults({}, spec_schema())["policy"] == {"retry": {"attempts": 3, "backoff": "1s"}}
    assert _schema.apply_defaults({"policy": {"retry": {"attempts": 5}}}, spec_schema())["policy"] == {
        "retry": {"attempts": 5, "backoff": "1s"}}


def test_defaults_in_array_items_and_additional_properties() -> None:
    value = {"workers": [{"name": "a"}, {"name": "b", "weight": 7}], "ports": {"http": {}}}
    defaulted = _schema.apply_defaults(value, spec_schema())
    assert defaulted["workers"] == [{"name": "a", "weight": 1}, {"name": "b", "weight": 7}]
    assert defaulted["ports"] == {"http": {"port": 80}}


def test_nulls() -> None:
    value = {"mode": None, "note": None, "limits": {"cpu": None, "memory": None}, "extra": {"free": None}}
    cleaned = _schema.drop_nulls(value, spec_schema())
    # non-nullable without default: dropped; with a default: left for defaulting; nullable: kept;
    # undeclared (under preserve-unknown-fields): kept.
    assert cleaned == {"mode": None, "note": None, "limits": {"cpu": None}, "extra": {"free": None}}
    defaulted = _schema.apply_defaults(cleaned, spec_schema())
    assert defaulted["mode"] == "fast" and defaulted["limits"] == {"cpu": 2}
    assert defaulted["note"] is None and defaulted["extra"] == {"free": None}


def test_coerce_runs_the_whole_pipeline_and_keeps_only_object_meta() -> None:
    obj = {"apiVersion": "g/v1", "kind": "K",
           "metadata": {"name": "n", "labels": {"a": "b"}, "annotations": {"c": "d"}, "finalizers": ["f"],
                        "uid": "u", "colour": "red"},
           "spec": {"typo": 1, "limits": {"cpu": None}, "mode": None}, "junk": {}}
    coerced = _schema.coerce(obj, SCHEMA)
    assert coerced["metadata"] == {"name": "n", "labels": {"a": "b"}, "annotations": {"c": "d"},
                                   "finalizers": ["f"], "uid": "u"}
    assert "junk" not in coerced
    assert coerced["spec"]["mode"] == "fast" and coerced["spec"]["limits"] == {"cpu": 2}
    assert "typo" not in coerced["spec"]
    assert "status" not in coerced  # an absent object without a default stays absent


def test_coerce_field_touches_only_status() -> None:
    obj = {"metadata": {"name": "n", "colour": "red"}, "spec": {"typo": 1},
           "status": {"foo": 1, "ready": {}}}
    coerced = _schema.coerce_field(obj, SCHEMA, "status")
    assert coerced["status"] == {"phase": "Pending", "ready": {"count": 0}}
    assert coerced["spec"] == {"typo": 1} and coerced["metadata"] == {"name": "n", "colour": "red"}
    assert "status" not in _schema.coerce_field({"spec": {}}, SCHEMA, "status")


def test_functions_are_pure() -> None:
    value = {"typo": 1, "mode": None, "limits": {}}
    before = copy.deepcopy(value)
    schema_before = copy.deepcopy(SCHEMA)
    _schema.prune(value, spec_schema())
    _schema.drop_nulls(value, spec_schema())
    _schema.apply_defaults(value, spec_schema())
    _schema.coerce({"spec": value}, SCHEMA)
    assert value == before and schema_before == SCHEMA


def test_crd_schemas_of_served_versions() -> None:
    crd = {"spec": {"group": "g", "names": {"plural": "ks", "kind": "K"}, "versions": [
        {"name": "v1", "served": True, "schema": {"openAPIV3Schema": SCHEMA}},
        {"name": "v2", "served": False, "schema": {"openAPIV3Schema": SCHEMA}},
        {"name": "v3", "served": True},
    ]}}
    assert _schema.crd_schemas(crd) == {kmock.resource("g", "v1", "ks"): SCHEMA}
    assert _schema.crd_schemas({**crd, "spec": {**crd["spec"], "preserveUnknownFields": True}}) == {}
    assert _schema.crd_schemas(None) == {}


# -- over HTTP, with the GLMDeployment CRD ----------------------------------------------------------------


def glmd_crd() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load((ROOT / "crds" / "glmdeployment.yaml").read_text(encoding="utf-8"))
    return crd


def glmd_spec_schema() -> dict[str, Any]:
    schema: dict[str, Any] = glmd_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


@pytest.fixture
def srv() -> Iterator[EmulatorServer]:
    with EmulatorServer(host="127.0.0.1", port=0) as server:
        http(server, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", glmd_crd())
        yield server


def http(srv: EmulatorServer, method: str, path: str, body: Any = None, *,
         content_type: str = "application/json", accept: str = "application/json") -> Any:
    """One request to the emulator (a dict body is sent as JSON, a str as is); the decoded JSON answer."""
    data = None if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()
    request = urllib.request.Request(f"{srv.url}{path}", data=data, method=method,
                                     headers={"Accept": accept, "Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def glmd(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.glm.dev/v1alpha1", "kind": "GLMDeployment", "metadata": {"name": name},
        "spec": {"model": {"name": "zai-org/GLM-5.3-FP8"}, "image": "ghcr.io/glm-serving/vllm-glm:v1", **spec},
    }


def test_the_crd_has_the_defaults_these_tests_rely_on() -> None:
    spec = glmd_spec_schema()["properties"]
    assert spec["mode"]["default"] == "disaggregated"
    assert spec["imagePullPolicy"]["default"] == "IfNotPresent"
    assert "default" not in spec["kvCache"] and spec["kvCache"]["properties"]["blockSize"]["default"] == 64
    assert "default" not in spec["gpu"] and spec["gpu"]["properties"]["perNode"]["default"] == 8
    assert "prefil" not in spec


def test_create_prunes_and_defaults_a_custom_resource(srv: EmulatorServer) -> None:
    body = glmd("plain", prefil={}, gpu={})
    body["metadata"]["colour"] = "red"
    body["status"] = {"endpoint": "x"}
    created = http(srv, "POST", GLMD_PATH, body)
    fetched = http(srv, "GET", f"{GLMD_PATH}/plain")
    assert created == fetched

    spec = fetched["spec"]
    assert spec["mode"] == "disaggregated"
    assert spec["imagePullPolicy"] == "IfNotPresent" and spec["hashSeed"] == 42
    assert "prefil" not in spec
    assert spec["gpu"] == {"product": "H200", "perNode": 8}  # sent empty: its properties are defaulted
    # kvCache and prefill have no default of their own, so their defaults appear only once they are sent.
    assert "kvCache" not in spec and "prefill" not in spec
    assert "colour" not in fetched["metadata"] and fetched["metadata"]["generation"] == 1
    assert "status" not in fetched  # the status subresource: status is not written on create

    with_kv = http(srv, "POST", GLMD_PATH, glmd("kv", kvCache={}))
    assert with_kv["spec"]["kvCache"] == {"dtype": "fp8", "blockSize": 64}


def test_the_mode_printer_column_shows_the_default(srv: EmulatorServer) -> None:
    http(srv, "POST", GLMD_PATH, glmd("plain"))
    table = http(srv, "GET", f"{GLMD_PATH}/plain", accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    names = [column["name"] for column in table["columnDefinitions"]]
    assert table["rows"][0]["cells"][names.index("Mode")] == "disaggregated"


def test_merge_patch_prunes_and_defaults_after_the_merge(srv: EmulatorServer) -> None:
    http(srv, "POST", GLMD_PATH, glmd("p", mode="aggregated"))
    patched = http(srv, "PATCH", f"{GLMD_PATH}/p",
                   {"spec": {"kvCache": {"dtype": "bfloat16", "blokSize": 16}, "mode": None, "bogus": 1}},
                   content_type="application/merge-patch+json")
    assert patched["spec"]["kvCache"] == {"dtype": "bfloat16", "blockSize": 64}
    assert patched["spec"]["mode"] == "disaggregated"  # removed by the patch, defaulted again
    assert "bogus" not in patched["spec"]
    assert patched["metadata"]["generation"] == 2
    assert http(srv, "GET", f"{GLMD_PATH}/p") == patched

    # A patch that only adds unknown fields or restates defaults changes nothing.
    again = http(srv, "PATCH", f"{GLMD_PATH}/p", {"spec": {"bogus": 2, "hashSeed": 42}},
                 content_type="application/merge-patch+json")
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    assert again["metadata"]["generation"] == 2


def test_json_patch_and_put_are_pruned_and_defaulted(srv: EmulatorServer) -> None:
    created = http(srv, "POST", GLMD_PATH, glmd("j"))
    patched = http(srv, "PATCH", f"{GLMD_PATH}/j", [
        {"op": "add", "path": "/spec/speculative", "value": {"methd": "none"}},
        {"op": "add", "path": "/spec/typo", "value": True},
    ], content_type="application/json-patch+json")
    assert patched["spec"]["speculative"] == {"method": "mtp", "numSpeculativeTokens": 3}
    assert "typo" not in patched["spec"]

    replacement = glmd("j", imagePullPolicy="Always", extra={"x": 1})
    replacement["metadata"]["resourceVersion"] = patched["metadata"]["resourceVersion"]
    replaced = http(srv, "PUT", f"{GLMD_PATH}/j", replacement)
    assert replaced["spec"]["imagePullPolicy"] == "Always" and replaced["spec"]["mode"] == "disaggregated"
    assert "extra" not in replaced["spec"] and "speculative" not in replaced["spec"]
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]


def test_server_side_apply_creates_and_updates_pruned_and_defaulted(srv: EmulatorServer) -> None:
    apply = "application/apply-patch+yaml"
    manifest = glmd("ssa", prefil={"replicas": 2}, prefill={"replicas": 2})
    created = http(srv, "PATCH", f"{GLMD_PATH}/ssa?fieldManager=t", yaml.safe_dump(manifest), content_type=apply)
    assert created["spec"]["mode"] == "disaggregated" and "prefil" not in created["spec"]
    assert created["spec"]["prefill"]["replicas"] == 2
    assert created["spec"]["prefill"]["dcpCommBackend"] == "ag_rs"  # defaults inside the sent role
    assert created["spec"]["prefill"]["cpuOffloadPerRank"] == "512Gi"  # an int-or-string default

    manifest["spec"]["prefill"] = {"replicas": 3, "cpuOffloadPerRank": 1024, "typo": "x"}
    updated = http(srv, "PATCH", f"{GLMD_PATH}/ssa?fieldManager=t", yaml.safe_dump(manifest), content_type=apply)
    assert updated["spec"]["prefill"]["replicas"] == 3
    assert updated["spec"]["prefill"]["cpuOffloadPerRank"] == 1024  # ints kept as ints
    assert "typo" not in updated["spec"]["prefill"]
    assert http(srv, "GET", f"{GLMD_PATH}/ssa") == updated


def test_status_writes_prune_and_default_only_status(srv: EmulatorServer) -> None:
    created = http(srv, "POST", GLMD_PATH, glmd("s"))
    status = {"status": {"foo": 1, "observedGeneration": 1, "prefill": {"replicas": 2},
                         "conditions": [{"type": "Ready", "status": "False", "reason": "Starting",
                                         "lastTransitionTime": "2026-01-01T00:00:00Z", "extra": "x"}]},
              "spec": {"mode": "aggregated"}}
    patched = http(srv, "PATCH", f"{GLMD_PATH}/s/status", status, content_type="application/merge-patch+json")
    assert "foo" not in patched["status"]
    assert patched["status"]["prefill"] == {"replicas": 2, "readyReplicas": 0}
    assert patched["status"]["conditions"] == [{"type": "Ready", "status": "False", "reason": "Starting",
                                                "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}]
    assert patched["spec"] == created["spec"]  # a status write leaves spec alone
    assert patched["metadata"]["generation"] == 1
    assert http(srv, "GET", f"{GLMD_PATH}/s") == patched

    unknown_only = http(srv, "PATCH", f"{GLMD_PATH}/s/status", {"status": {"foo": 2}},
                        content_type="application/merge-patch+json")
    assert unknown_only["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


def test_built_in_resources_and_schemaless_crds_are_stored_as_sent(srv: EmulatorServer) -> None:
    cm = http(srv, "POST", "/api/v1/namespaces/default/configmaps",
              {"metadata": {"name": "c", "colour": "red"}, "data": {"k": "v"}, "junk": {"a": None}})
    assert cm["junk"] == {"a": None} and cm["metadata"]["colour"] == "red"

    crd = glmd_crd()
    crd["metadata"]["name"] = "widgets.demo.example.com"
    crd["spec"].update(group="demo.example.com",
                       names={"plural": "widgets", "singular": "widget", "kind": "Widget"})
    for version in crd["spec"]["versions"]:
        version.pop("schema")
    http(srv, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    widget = http(srv, "POST", "/apis/demo.example.com/v1alpha1/namespaces/default/widgets",
                  {"metadata": {"name": "w"}, "spec": {"anything": [1, None]}})
    assert widget["spec"] == {"anything": [1, None]}


def test_a_deleted_crd_takes_its_schema_along(srv: EmulatorServer) -> None:
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/glmdeployments.serving.glm.dev"
    http(srv, "DELETE", crd_path)
    with pytest.raises(urllib.error.HTTPError) as info:
        http(srv, "POST", GLMD_PATH, glmd("gone"))
    assert info.value.code == 404
    assert not srv.emulator._schemas
