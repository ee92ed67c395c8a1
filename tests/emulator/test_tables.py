"""Server-side printing in the emulator: ``meta.k8s.io`` ``Table`` answers for ``kubectl get``.

Unit tests of the pure helpers in ``glm_operator.devcluster._tables`` (the JSONPath subset, ages,
``Accept`` negotiation, cells), raw HTTP checks of the negotiation, and real ``kubectl`` (skipped
when absent) against :class:`EmulatorServer` with the GLMDeployment CRD and its printer columns.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import urllib.error
import urllib.request
from typing import Any

import pytest
import yaml

from glm_operator.devcluster import _tables
from glm_operator.devcluster.emulator import EmulatorServer
from tests.emulator.conftest import KUBECTL, kubectl

ROOT = pathlib.Path(__file__).resolve().parents[2]
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
TABLE_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io, "
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json")
NOW = datetime.datetime(2026, 1, 10, 12, 0, 0, tzinfo=datetime.UTC)

GLMD: dict[str, Any] = {
    "metadata": {"name": "glm", "creationTimestamp": "2026-01-10T11:56:48Z", "labels": {"app": "glm"}},
    "spec": {"mode": "disaggregated"},
    "status": {
        "conditions": [{"type": "Progressing", "status": "True"}, {"type": "Ready", "status": "False"}],
        "capacity": {"maxContextTokens": 1048576, "kvPerGpu": "15.0Gi"},
        "replicas": [3, 5, 8],
    },
}


# -- JSONPath subset ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "expected"), [
    (".spec.mode", ["disaggregated"]),
    ("{.spec.mode}", ["disaggregated"]),
    ("$.spec.mode", ["disaggregated"]),
    ('.status.conditions[?(@.type=="Ready")].status', ["False"]),
    (".status.conditions[?(@.type == 'Progressing')].status", ["True"]),
    ('.status.conditions[?(@.type!="Ready")].type', ["Progressing"]),
    ('.status.conditions[?(@.type=="Missing")].status', []),
    (".status.conditions[0].type", ["Progressing"]),
    (".status.conditions[-1].type", ["Ready"]),
    (".status.conditions[5].type", []),
    (".status.conditions[*].type", ["Progressing", "Ready"]),
    (".status.replicas[1]", [5]),
    (".status.capacity.maxContextTokens", [1048576]),
    (".metadata.labels['app']", ["glm"]),
    (".status.capacity.nothing", []),
    (".spec.mode.deeper", []),
    (".status.replicas[?(@.x==1)]", []),
])
def test_jsonpath_subset(path: str, expected: list[Any]) -> None:
    assert _tables.jsonpath_find(GLMD, path) == expected


def test_jsonpath_filters_compare_types_strictly() -> None:
    items = {"items": [{"n": 1, "s": "1", "b": True}, {"n": 2, "s": "2", "b": False}]}
    assert _tables.jsonpath_find(items, ".items[?(@.n==1)].s") == ["1"]
    assert _tables.jsonpath_find(items, '.items[?(@.s=="2")].n') == [2]
    assert _tables.jsonpath_find(items, '.items[?(@.n=="1")].s') == []  # a string never equals a number
    assert _tables.jsonpath_find(items, ".items[?(@.b==true)].n") == [1]
    assert _tables.jsonpath_find(items, ".items[?(@.n==1.0)].s") == ["1"]


def test_jsonpath_escaped_dot_in_a_field_name() -> None:
    obj = {"metadata": {"labels": {"app.kubernetes.io/name": "glm"}}}
    assert _tables.jsonpath_find(obj, r".metadata.labels.app\.kubernetes\.io/name") == ["glm"]


@pytest.mark.parametrize("path", ["spec", ".spec[", ".a[x]", ".a[?(@.b>1)]", ".a[?(b==1)]", ".a..b", ".a[?(@.b==x)]"])
def test_jsonpath_rejects_what_it_does_not_support(path: str) -> None:
    with pytest.raises(ValueError, match=r"JSONPath|filter"):
        _tables.jsonpath_find(GLMD, path)


# -- ages --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "expected"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (5.9, "5s"), (119, "119s"), (120, "2m"), (192, "3m12s"),
    (599, "9m59s"), (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (5 * 3600 + 180, "5h3m"),
    (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"), (2 * 86400 + 5 * 3600, "2d5h"),
    (8 * 86400, "8d"), (729 * 86400, "729d"), (730 * 86400, "2y"), (3 * 365 * 86400 + 45 * 86400, "3y45d"),
    (9 * 365 * 86400, "9y"),
])
def test_human_duration_matches_kubectl(seconds: float, expected: str) -> None:
    assert _tables.human_duration(seconds) == expected


def test_age_of_timestamps() -> None:
    assert _tables.age("2026-01-10T11:56:48Z", NOW) == "3m12s"
    assert _tables.age("2026-01-08T11:59:59.5+00:00", NOW) == "2d"
    assert _tables.age("2026-01-10T13:00:00+01:00", NOW) == "0s"
    assert _tables.age(None, NOW) == "<unknown>"
    assert _tables.age("yesterday", NOW) == "<invalid>"
    assert _tables.age("2026-01-10T11:00:00", NOW) == "<invalid>"  # no time zone
    assert _tables.age(12, NOW) == "<invalid>"


# -- negotiation and cells ---------------------------------------------------------------------------


@pytest.mark.parametrize(("accept", "expected"), [
    (TABLE_ACCEPT, "v1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json;as=Table;v=v1;g=meta.k8s.io", "v1beta1"),
    ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
    ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json", None),
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io, application/json", None),
    ("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ("application/json;as=Table;v=v1", None),
    ("*/*", None),
    ("", None),
    (None, None),
])
def test_table_version_follows_the_accept_order(accept: str | None, expected: str | None) -> None:
    assert _tables.table_version(accept) == expected


@pytest.mark.parametrize(("column_type", "value", "expected"), [
    ("string", "False", "False"), ("string", True, "true"), ("string", 3, "3"), ("string", {"a": 1}, '{"a":1}'),
    ("string", None, None), ("integer", 1048576, 1048576), ("integer", 2.0, 2), ("integer", "7", None),
    ("integer", True, None), ("number", 2, 2.0), ("boolean", False, False), ("boolean", "true", None),
    ("date", "2026-01-10T11:56:48Z", "3m12s"), ("date", "nonsense", "<invalid>"), ("date", 5, None),
    ("other", "x", None),
])
def test_cell_values_follow_the_column_type(column_type: str, value: Any, expected: Any) -> None:
    assert _tables.cell_value(column_type, value, NOW) == expected


def glmd_crd() -> dict[str, Any]:
    """The repository's GLMDeployment CRD."""
    crd: dict[str, Any] = yaml.safe_load((ROOT / "crds" / "glmdeployment.yaml").read_text(encoding="utf-8"))
    return crd


def test_crd_columns_and_table_rows() -> None:
    crd = glmd_crd()
    version = crd["spec"]["versions"][0]["name"]
    columns = _tables.columns_for(crd["spec"]["group"], crd["spec"]["names"]["plural"], version, crd)
    table = _tables.build_table([GLMD], columns, now=NOW, resource_version="1005")

    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "1005"}
    definitions = table["columnDefinitions"]
    assert [(c["name"], c["type"], c["priority"]) for c in definitions] == [
        ("Name", "string", 0), ("Ready", "string", 0), ("Mode", "string", 0), ("Max-Context", "integer", 0),
        ("KV/GPU", "string", 0), ("Endpoint", "string", 1), ("Age", "date", 0)]
    assert definitions[0]["format"] == "name"
    assert table["rows"] == [{
        "cells": ["glm", "False", "disaggregated", 1048576, "15.0Gi", None, "3m12s"],
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": GLMD["metadata"]},
    }]


def test_crd_without_printer_columns_gets_name_and_age() -> None:
    crd = {"spec": {"group": "g", "names": {"plural": "ws"}, "versions": [{"name": "v1"}]}}
    columns = _tables.columns_for("g", "ws", "v1", crd)
    assert [(c.name, c.type) for c in columns] == [("Name", "string"), ("Age", "date")]


def test_builtin_columns_and_include_object() -> None:
    sts = {"metadata": {"name": "s", "creationTimestamp": "2026-01-10T11:59:55Z"},
           "spec": {"replicas": 3, "template": {"spec": {"containers": [
               {"name": "a", "image": "img:1"}, {"name": "b", "image": "img:2"}]}}},
           "status": {"readyReplicas": 2}}
    columns = _tables.columns_for("apps", "statefulsets", "v1", None)
    table = _tables.build_table([sts], columns, version="v1beta1", include_object="Object", now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Ready", "Age", "Containers", "Images"]
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["rows"] == [{"cells": ["s", "2/3", "5s", "a,b", "img:1,img:2"], "object": sts}]

    plain = _tables.build_table([sts], _tables.columns_for("", "configmaps", "v1", None), include_object="None",
                                now=NOW)
    assert [c["name"] for c in plain["columnDefinitions"]] == ["Name", "Age"]
    assert plain["rows"] == [{"cells": ["s", "5s"]}]
    with pytest.raises(ValueError, match="includeObject"):
        _tables.build_table([sts], columns, include_object="Everything")


# -- over HTTP ---------------------------------------------------------------------------------------


def http(srv: EmulatorServer, method: str, path: str, body: Any = None, *,
         accept: str = "application/json") -> Any:
    """One JSON request to the emulator; the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{srv.url}{path}", data=data, method=method,
                                     headers={"Accept": accept, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_get_list_and_watch_negotiate_tables(srv: EmulatorServer) -> None:
    base = "/api/v1/namespaces/default/configmaps"
    http(srv, "POST", base, {"metadata": {"name": "one", "labels": {"k": "v"}}, "data": {"a": "b"}})

    listed = http(srv, "GET", base, accept=TABLE_ACCEPT)
    assert listed["kind"] == "Table" and listed["apiVersion"] == "meta.k8s.io/v1"
    assert listed["metadata"]["resourceVersion"].isdigit()
    assert [row["cells"][0] for row in listed["rows"]] == ["one"]
    assert listed["rows"][0]["object"]["metadata"]["labels"] == {"k": "v"}
    assert "data" not in listed["rows"][0]["object"]

    beta = http(srv, "GET", f"{base}/one", accept="application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1" and len(beta["rows"]) == 1

    full = http(srv, "GET", f"{base}/one?includeObject=Object", accept=TABLE_ACCEPT)
    assert full["rows"][0]["object"]["data"] == {"a": "b"}
    bare = http(srv, "GET", f"{base}?includeObject=None", accept=TABLE_ACCEPT)
    assert "object" not in bare["rows"][0]

    assert http(srv, "GET", f"{base}/one")["data"] == {"a": "b"}  # plain JSON stays the full object
    assert http(srv, "GET", base)["kind"] == "ConfigMapList"
    with pytest.raises(urllib.error.HTTPError) as info:
        http(srv, "GET", f"{base}?includeObject=All", accept=TABLE_ACCEPT)
    assert info.value.code == 400

    request = urllib.request.Request(f"{srv.url}{base}?watch=true&timeoutSeconds=1",
                                     headers={"Accept": TABLE_ACCEPT})
    with urllib.request.urlopen(request, timeout=10) as response:
        events = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    assert [event["type"] for event in events] == ["ADDED"]
    assert events[0]["object"]["kind"] == "Table"
    assert events[0]["object"]["rows"][0]["cells"][0] == "one"


# -- real kubectl --------------------------------------------------------------------------------------


def table_of(output: str) -> tuple[list[str], list[list[str]]]:
    """Split kubectl's table output into headers and rows of whitespace-separated cells."""
    lines = [line.split() for line in output.strip().splitlines()]
    return lines[0], lines[1:]


@needs_kubectl
def test_kubectl_get_prints_the_crd_printer_columns(kubectl_env: dict[str, str]) -> None:
    kubectl(kubectl_env, "apply", "--validate=false", "-f", str(ROOT / "crds" / "glmdeployment.yaml"))
    kubectl(kubectl_env, "apply", "--validate=false", "-f", str(ROOT / "examples" / "glm-5.3-pd.yaml"))
    status = {"status": {
        "conditions": [{"type": "Ready", "status": "False", "reason": "Progressing", "message": "starting",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "capacity": {"maxContextTokens": 1048576, "kvPerGpu": "15.0Gi"},
        "endpoint": "http://glm-5-3.default.svc:8000",
    }}
    kubectl(kubectl_env, "patch", "glmd", "glm-5-3", "--subresource=status", "--type=merge", "-p", json.dumps(status))

    out = kubectl(kubectl_env, "get", "glmd")
    print(f"$ kubectl get glmd\n{out}")
    headers, rows = table_of(out)
    assert headers == ["NAME", "READY", "MODE", "MAX-CONTEXT", "KV/GPU", "AGE"]
    assert rows[0][:5] == ["glm-5-3", "False", "disaggregated", "1048576", "15.0Gi"]
    assert rows[0][5][-1] in "smhdy"

    wide = kubectl(kubectl_env, "get", "glmd", "-o", "wide")
    print(f"$ kubectl get glmd -o wide\n{wide}")
    headers, rows = table_of(wide)
    assert headers == ["NAME", "READY", "MODE", "MAX-CONTEXT", "KV/GPU", "ENDPOINT", "AGE"]
    assert rows[0][:6] == ["glm-5-3", "False", "disaggregated", "1048576", "15.0Gi", "http://glm-5-3.default.svc:8000"]

    headers, rows = table_of(kubectl(kubectl_env, "get", "glmd", "glm-5-3", "--show-labels"))
    assert headers[-1] == "LABELS" and rows[0][0] == "glm-5-3"
    headers, rows = table_of(kubectl(kubectl_env, "get", "glmd", "-A"))
    assert headers[:2] == ["NAMESPACE", "NAME"] and rows[0][:2] == ["default", "glm-5-3"]
    headers, _ = table_of(kubectl(kubectl_env, "get", "glmd", "--sort-by=.metadata.name"))  # includeObject=Object
    assert headers[1] == "READY"
    assert kubectl(kubectl_env, "get", "glmd", "-o", "name").split() == ["glmdeployment.serving.glm.dev/glm-5-3"]

    listed = yaml.safe_load(kubectl(kubectl_env, "get", "glmd", "-o", "yaml"))
    assert listed["kind"] == "List" and listed["items"][0]["kind"] == "GLMDeployment"
    assert listed["items"][0]["spec"]["mode"] == "disaggregated"
    assert listed["items"][0]["status"]["capacity"]["maxContextTokens"] == 1048576
    fetched = json.loads(kubectl(kubectl_env, "get", "glmd", "glm-5-3", "-o", "json"))
    assert fetched["kind"] == "GLMDeployment" and fetched["spec"]["model"]["maxModelLen"] == 1048576


@needs_kubectl
def test_kubectl_get_builtins_with_ready_columns(kubectl_env: dict[str, str]) -> None:
    assert kubectl(kubectl_env, "get", "statefulsets") == ""  # "No resources found" goes to stderr
    labels = {"app": "web"}
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}},
    }
    kubectl(kubectl_env, "apply", "--validate=false", "-f", "-", stdin=json.dumps(sts))
    kubectl(kubectl_env, "patch", "statefulset", "web", "--subresource=status", "--type=merge",
            "-p", '{"status": {"replicas": 2, "readyReplicas": 1}}')

    headers, rows = table_of(kubectl(kubectl_env, "get", "statefulsets"))
    assert headers == ["NAME", "READY", "AGE"] and rows[0][:2] == ["web", "1/2"]
    headers, rows = table_of(kubectl(kubectl_env, "get", "sts", "-o", "wide"))
    assert headers == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"] and rows[0][3:] == ["main", "busybox:1.36"]
    assert yaml.safe_load(kubectl(kubectl_env, "get", "sts", "web", "-o", "yaml"))["spec"]["serviceName"] == "web"

    kubectl(kubectl_env, "create", "configmap", "settings", "--from-literal=a=b")
    headers, rows = table_of(kubectl(kubectl_env, "get", "cm"))
    assert headers == ["NAME", "AGE"] and rows[0][0] == "settings"
