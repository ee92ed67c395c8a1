"""The local Kubernetes API emulator (``glm_operator.devcluster.emulator``) against real clients.

Clients: the official ``kubernetes`` client, aiohttp, the ``kmock`` pytest fixture, real ``kubectl``
(skipped when absent), an in-process kopf operator, and the module's ``python -m`` entry point.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import kopf
import pytest
import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from glm_operator.devcluster.emulator import Emulator, EmulatorServer, write_kubeconfig
from tests.emulator.conftest import KUBECTL, kubectl

NS = "default"
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.demo.example.com"},
    "spec": {
        "group": "demo.example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wdg"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            "subresources": {"status": {}},
        }],
    },
}


def sts_body(name: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    """A StatefulSet complete enough for the client's pydantic models."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {
            "replicas": replicas, "serviceName": name, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}},
        },
        **extra,
    }


def poll(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Call ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def get_json(api_client: client.ApiClient, path: str) -> Any:
    """GET a path as plain JSON (no model deserialization)."""
    with urllib.request.urlopen(f"{api_client.configuration.host}{path}", timeout=10) as response:
        return json.load(response)


def status_of(call: Callable[[], Any]) -> int:
    """The HTTP status of an API call that is expected to fail."""
    with pytest.raises(ApiException) as info:
        call()
    return int(info.value.status)


@pytest.fixture
def api(srv: EmulatorServer) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=srv.url)) as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def apps(api: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api)


# -- create, identity, generateName ----------------------------------------------------------------


def test_create_sets_identity_fields_and_answers_201(core: client.CoreV1Api) -> None:
    first, status, _ = core.create_namespaced_config_map_with_http_info(
        NS, {"metadata": {"name": "one"}, "data": {"k": "v"}})
    second = core.create_namespaced_config_map(NS, {"metadata": {"name": "two"}})

    assert status == 201
    meta = first.metadata
    assert meta.namespace == NS  # from the URL: the body had none
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", meta.uid)
    assert int(meta.resource_version) >= 1000
    assert int(second.metadata.resource_version) > int(meta.resource_version)
    assert meta.uid != second.metadata.uid
    assert meta.generation == 1
    assert meta.creation_timestamp.tzinfo is not None
    raw = get_json(core.api_client, f"/api/v1/namespaces/{NS}/configmaps/one")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", raw["metadata"]["creationTimestamp"])
    assert (raw["apiVersion"], raw["kind"]) == ("v1", "ConfigMap")
    assert status_of(lambda: core.create_namespaced_config_map(NS, {"metadata": {"name": "one"}})) == 409


def test_generate_name_gives_distinct_names(core: client.CoreV1Api) -> None:
    names = {core.create_namespaced_event(NS, {"metadata": {"generateName": "ev-"},
                                               "involvedObject": {"kind": "Pod", "name": "p"}}).metadata.name
             for _ in range(3)}
    assert len(names) == 3
    assert all(re.fullmatch(r"ev-[a-z0-9]{5}", name) for name in names)


def test_kmock_fixture_is_the_extended_emulator(kmock: Any) -> None:
    assert isinstance(kmock, Emulator)
    for declared in ("inference.networking.k8s.io/v1/inferencepools", "gateway.networking.k8s.io/v1/httproutes",
                     "monitoring.coreos.com/v1/podmonitors", "apps/v1/statefulsets", "events.k8s.io/v1/events"):
        assert declared in kmock.resources, declared
    assert kmock.resources["inference.networking.k8s.io/v1/inferencepools"].kind == "InferencePool"


async def test_kmock_fixture_creates_with_identity(kmock: Any) -> None:
    resp = await kmock.post(f"/apis/inference.networking.k8s.io/v1/namespaces/{NS}/inferencepools",
                            json={"metadata": {"name": "pool"}, "spec": {"targetPorts": [{"number": 8000}]}})
    body = await resp.json()
    assert resp.status == 201
    assert body["kind"] == "InferencePool"
    stored = kmock.objects["inference.networking.k8s.io/v1/inferencepools", NS, "pool"]
    assert stored["metadata"]["uid"] == body["metadata"]["uid"]

    event = await kmock.post(f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
                             json={"metadata": {"generateName": "pool."}, "reason": "Created",
                                   "eventTime": "2026-01-01T00:00:00.000000Z"})
    assert event.status == 201
    assert (await event.json())["metadata"]["name"].startswith("pool.")


# -- server-side apply, status subresource, generation -------------------------------------------


def test_server_side_apply_creates_then_merges(apps: client.AppsV1Api) -> None:
    def apply(body: dict[str, Any]) -> tuple[Any, int]:
        obj, status, _ = apps.patch_namespaced_stateful_set_with_http_info(
            "db", NS, body, field_manager="t", force=True, _content_type="application/apply-patch+yaml")
        return obj, status

    created, status = apply(sts_body("db", replicas=1, status={"readyReplicas": 5}))
    assert status == 201
    assert created.metadata.generation == 1
    assert created.status is None  # .status of an object with a status subresource is not writable

    updated, status = apply(sts_body("db", replicas=3))
    assert status == 200
    assert updated.spec.replicas == 3
    assert updated.metadata.uid == created.metadata.uid
    assert updated.metadata.generation == 2
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)

    same, _ = apply(sts_body("db", replicas=3))  # no change: nothing stored, as the apiserver does
    assert same.metadata.resource_version == updated.metadata.resource_version


def test_status_subresource_isolation(apps: client.AppsV1Api) -> None:
    created = apps.create_namespaced_stateful_set(NS, sts_body("web", replicas=2))

    patched = apps.patch_namespaced_stateful_set_status(
        "web", NS, {"spec": {"replicas": 9}, "metadata": {"labels": {"x": "y"}},
                    "status": {"replicas": 2, "readyReplicas": 2}})
    assert patched.status.ready_replicas == 2
    assert patched.spec.replicas == 2  # only .status changes through /status
    assert patched.metadata.labels is None
    assert patched.metadata.generation == 1
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)

    main = apps.patch_namespaced_stateful_set("web", NS, {"spec": {"replicas": 4},
                                                          "status": {"readyReplicas": 0}})
    assert main.spec.replicas == 4
    assert main.status.ready_replicas == 2  # the main resource ignores .status
    assert main.metadata.generation == 2

    replaced_status = apps.replace_namespaced_stateful_set_status(
        "web", NS, {**sts_body("web", replicas=7), "status": {"replicas": 4, "readyReplicas": 4}})
    assert replaced_status.status.ready_replicas == 4
    assert replaced_status.spec.replicas == 4
    assert replaced_status.metadata.generation == 2


# -- JSON-patch, PUT, DELETE, GC ---------------------------------------------------------------


def test_json_patch_applies_and_a_failed_test_is_422(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(NS, {"metadata": {"name": "jp"}, "data": {"a": "1"}})
    rv = cm.metadata.resource_version

    ok = core.patch_namespaced_config_map("jp", NS, [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/metadata/finalizers", "value": ["demo/x"]},
    ], _content_type="application/json-patch+json")
    assert ok.metadata.finalizers == ["demo/x"]
    assert int(ok.metadata.resource_version) > int(rv)

    stale = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
             {"op": "remove", "path": "/metadata/finalizers"}]
    assert status_of(lambda: core.patch_namespaced_config_map(
        "jp", NS, stale, _content_type="application/json-patch+json")) == 422
    assert core.read_namespaced_config_map("jp", NS).metadata.finalizers == ["demo/x"]


def test_put_replaces_the_object(core: client.CoreV1Api) -> None:
    old = core.create_namespaced_config_map(
        NS, {"metadata": {"name": "r", "labels": {"a": "b"}}, "data": {"k": "v", "k2": "v2"}})

    new = core.replace_namespaced_config_map("r", NS, {"metadata": {"name": "r"}, "data": {"k": "w"}})

    assert new.data == {"k": "w"}  # replaced, not merged
    assert new.metadata.labels is None
    assert new.metadata.uid == old.metadata.uid
    assert new.metadata.creation_timestamp == old.metadata.creation_timestamp
    assert int(new.metadata.resource_version) > int(old.metadata.resource_version)
    stale = {"metadata": {"name": "r", "resourceVersion": old.metadata.resource_version}, "data": {}}
    assert status_of(lambda: core.replace_namespaced_config_map("r", NS, stale)) == 409
    assert status_of(lambda: core.replace_namespaced_config_map("nope", NS, {"metadata": {"name": "nope"}})) == 404


def test_delete_waits_for_finalizers(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "f", "finalizers": ["demo/keep"]}})

    core.delete_namespaced_config_map("f", NS)
    marked = core.read_namespaced_config_map("f", NS)
    assert marked.metadata.deletion_timestamp is not None

    core.patch_namespaced_config_map("f", NS, {"metadata": {"finalizers": None}})
    assert status_of(lambda: core.read_namespaced_config_map("f", NS)) == 404


def test_garbage_collection_cascades_over_owner_references(core: client.CoreV1Api) -> None:
    def owned_by(*owners: Any) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "ConfigMap", "name": o.metadata.name, "uid": o.metadata.uid}
                for o in owners]

    parent = core.create_namespaced_config_map(NS, {"metadata": {"name": "parent"}})
    other = core.create_namespaced_config_map(NS, {"metadata": {"name": "other"}})
    child = core.create_namespaced_config_map(
        NS, {"metadata": {"name": "child", "ownerReferences": owned_by(parent)}})
    core.create_namespaced_config_map(NS, {"metadata": {"name": "grandchild", "ownerReferences": owned_by(child)}})
    core.create_namespaced_config_map(
        NS, {"metadata": {"name": "shared", "ownerReferences": owned_by(parent, other)}})

    core.delete_namespaced_config_map("parent", NS)

    remaining = {cm.metadata.name for cm in core.list_namespaced_config_map(NS).items}
    assert remaining == {"other", "shared"}  # "shared" still has a live owner


def test_delete_collection_honours_the_label_selector(core: client.CoreV1Api) -> None:
    for name, tier in (("a", "gold"), ("b", "gold"), ("c", "silver")):
        core.create_namespaced_config_map(NS, {"metadata": {"name": name, "labels": {"tier": tier}}})

    core.delete_collection_namespaced_config_map(NS, label_selector="tier=gold")

    assert [cm.metadata.name for cm in core.list_namespaced_config_map(NS).items] == ["c"]


# -- LIST, selectors, WATCH --------------------------------------------------------------------------


def test_list_has_kind_and_label_selectors_filter(core: client.CoreV1Api) -> None:
    for name, labels in {"g1": {"tier": "gold", "env": "prod"}, "g2": {"tier": "gold"},
                         "s1": {"tier": "silver"}, "n1": {}}.items():
        core.create_namespaced_config_map(NS, {"metadata": {"name": name, "labels": labels}})
    raw = get_json(core.api_client, f"/api/v1/namespaces/{NS}/configmaps")
    assert (raw["kind"], raw["apiVersion"]) == ("ConfigMapList", "v1")
    assert raw["metadata"]["resourceVersion"].isdigit()

    def names(selector: str) -> set[str]:
        return {cm.metadata.name for cm in core.list_namespaced_config_map(NS, label_selector=selector).items}

    assert names("tier=gold") == {"g1", "g2"}
    assert names("tier==gold,env=prod") == {"g1"}
    assert names("tier!=gold") == {"s1", "n1"}
    assert names("tier") == {"g1", "g2", "s1"}
    assert names("!tier") == {"n1"}
    assert names("tier in (gold, silver),!env") == {"g2", "s1"}
    assert {cm.metadata.name for cm in core.list_namespaced_config_map(
        NS, field_selector="metadata.name=s1").items} == {"s1"}
    assert status_of(lambda: core.list_namespaced_config_map(NS, label_selector="a=(b")) == 400


def test_watch_replays_only_events_after_the_resource_version(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    since = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, {"metadata": {"name": "b", "labels": {"w": "1"}}})
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    core.delete_namespaced_config_map("b", NS)

    seen = []
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_config_map, NS, resource_version=since, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 3:
            stream.stop()
    assert seen == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]

    filtered = watch.Watch()
    only_labelled = []
    for event in filtered.stream(core.list_namespaced_config_map, NS, resource_version=since,
                                 label_selector="w=1", timeout_seconds=5):
        only_labelled.append(event["type"])
        if len(only_labelled) == 2:
            filtered.stop()
    assert only_labelled == ["ADDED", "DELETED"]


async def test_watch_streams_live_events_as_json(srv: EmulatorServer) -> None:
    url = f"{srv.url}/api/v1/namespaces/{NS}/configmaps"
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as listed:
            since = (await listed.json())["metadata"]["resourceVersion"]
        async with session.get(url, params={"watch": "true", "resourceVersion": since}) as stream:
            assert stream.headers["Content-Type"].startswith("application/json")
            async with session.post(url, json={"metadata": {"name": "live"}}) as created:
                assert created.status == 201
            line = await asyncio.wait_for(stream.content.readline(), timeout=5)
    event = json.loads(line)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "live")


# -- test hooks: failure injection, request log --------------------------------------------------


def test_failure_injection(apps: client.AppsV1Api, srv: EmulatorServer) -> None:
    created = apps.create_namespaced_stateful_set(NS, sts_body("inj"))
    srv.emulator.inject_failure("patch", "statefulsets", status=409, times=2)
    srv.emulator.inject_failure("PATCH", "statefulsets", status=503, subresource="status")

    for _ in range(2):
        assert status_of(lambda: apps.patch_namespaced_stateful_set("inj", NS, {"spec": {"replicas": 5}})) == 409
    assert apps.read_namespaced_stateful_set("inj", NS).metadata.resource_version == \
        created.metadata.resource_version  # failed requests change nothing
    assert status_of(lambda: apps.patch_namespaced_stateful_set_status("inj", NS, {"status": {"replicas": 1}})) \
        == 503
    assert apps.patch_namespaced_stateful_set("inj", NS, {"spec": {"replicas": 5}}).spec.replicas == 5
    assert apps.patch_namespaced_stateful_set_status("inj", NS, {"status": {"replicas": 1}}).status.replicas == 1


def test_request_log_and_write_requests(core: client.CoreV1Api, srv: EmulatorServer) -> None:
    core.list_namespaced_config_map(NS)
    start = len(srv.emulator.request_log)

    core.create_namespaced_config_map(NS, {"metadata": {"name": "log"}})
    core.read_namespaced_config_map("log", NS)
    core.patch_namespaced_config_map("log", NS, {"data": {"a": "b"}})
    status_of(lambda: core.read_namespaced_config_map("missing", NS))
    core.delete_namespaced_config_map("log", NS)

    log = srv.emulator.request_log[start:]
    assert [(r.method, r.status) for r in log] == [
        ("POST", 201), ("GET", 200), ("PATCH", 200), ("GET", 404), ("DELETE", 200)]
    writes = srv.emulator.write_requests(start)
    assert [(w.method, w.path) for w in writes] == [
        ("POST", f"/api/v1/namespaces/{NS}/configmaps"),
        ("PATCH", f"/api/v1/namespaces/{NS}/configmaps/log"),
        ("DELETE", f"/api/v1/namespaces/{NS}/configmaps/log"),
    ]
    assert writes[1].content_type == "application/strategic-merge-patch+json"
    assert len(srv.emulator.write_requests()) >= 3


def test_server_stops_with_an_open_watch_and_keeps_its_log() -> None:
    with EmulatorServer() as server:
        url = f"{server.url}/api/v1/namespaces/{NS}/configmaps?watch=true"
        opened = threading.Event()

        def watch_forever() -> None:
            with urllib.request.urlopen(url, timeout=10) as response:
                opened.set()
                response.read()

        watcher = threading.Thread(target=watch_forever)
        watcher.start()
        assert opened.wait(5)
        started = time.monotonic()
    watcher.join(5)
    assert not watcher.is_alive()
    assert time.monotonic() - started < 3
    assert [(r.method, r.query, r.status) for r in server.emulator.request_log] == [("GET", "watch=true", 200)]


# -- CRDs and kubectl ------------------------------------------------------------------------------


def test_crd_creation_declares_the_resource(api: client.ApiClient) -> None:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(WIDGET_CRD)
    custom = client.CustomObjectsApi(api)

    cr = custom.create_namespaced_custom_object("demo.example.com", "v1", NS, "widgets", {
        "apiVersion": "demo.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}})
    assert cr["metadata"]["uid"]  # kubernetes>=37 returns the body only for a 201
    resources = client.ApisApi(api).get_api_versions()
    assert "demo.example.com" in {group.name for group in resources.groups}
    found = get_json(api, "/apis/demo.example.com/v1")
    assert {r["name"] for r in found["resources"]} == {"widgets", "widgets/status"}
    by_name = {r["name"]: r for r in found["resources"]}
    assert (by_name["widgets"]["shortNames"], by_name["widgets"]["namespaced"]) == (["wdg"], True)
    assert by_name["widgets/status"]["shortNames"] == []  # else kubectl warns about ambiguous short names

    client.ApiextensionsV1Api(api).delete_custom_resource_definition("widgets.demo.example.com")
    assert status_of(lambda: custom.list_namespaced_custom_object("demo.example.com", "v1", NS, "widgets")) == 404


@needs_kubectl
def test_kubectl_applies_crd_and_custom_resource(srv: EmulatorServer, kubectl_env: dict[str, str]) -> None:
    kubectl(kubectl_env, "--server", srv.url, "--validate=false", "apply", "-f", "-", stdin=yaml.safe_dump(WIDGET_CRD))
    widget = {"apiVersion": "demo.example.com/v1", "kind": "Widget",
              "metadata": {"name": "w1", "namespace": NS, "labels": {"tier": "gold"}}, "spec": {"size": 2}}

    out = kubectl(kubectl_env, "--server", srv.url, "--validate=false", "apply", "-f", "-",
                  stdin=yaml.safe_dump(widget))
    assert "widget.demo.example.com/w1 created" in out

    listed = json.loads(kubectl(kubectl_env, "--server", srv.url, "get", "wdg", "-o", "json"))
    assert [item["metadata"]["name"] for item in listed["items"]] == ["w1"]
    assert listed["items"][0]["spec"] == {"size": 2}

    widget["spec"]["size"] = 3
    out = kubectl(kubectl_env, "--server", srv.url, "--validate=false", "apply", "--server-side", "-f", "-",
                  stdin=yaml.safe_dump(widget))
    assert "serverside-applied" in out
    fetched = json.loads(kubectl(kubectl_env, "get", "widget", "w1", "-o", "json"))
    assert (fetched["spec"]["size"], fetched["metadata"]["generation"]) == (3, 2)
    selected = json.loads(kubectl(kubectl_env, "get", "widgets", "-l", "tier=gold", "-o", "json"))
    assert [item["metadata"]["name"] for item in selected["items"]] == ["w1"]
    assert not json.loads(kubectl(kubectl_env, "get", "widgets", "-l", "tier!=gold", "-o", "json"))["items"]


@needs_kubectl
def test_kubectl_sees_builtins_with_the_written_kubeconfig(srv: EmulatorServer,
                                                          kubectl_env: dict[str, str]) -> None:
    out = kubectl(kubectl_env, "create", "configmap", "kc", "--from-literal=a=b")
    assert "configmap/kc created" in out
    names = kubectl(kubectl_env, "get", "cm", "-o", "jsonpath={.items[*].metadata.name}")
    assert names.split() == ["kc"]


def test_write_kubeconfig_is_loadable(tmp_path: pathlib.Path, srv: EmulatorServer) -> None:
    path = tmp_path / "nested" / "kubeconfig"
    write_kubeconfig(path, srv.url, namespace="team")

    loaded = yaml.safe_load(path.read_text())
    assert loaded["contexts"][0]["context"]["namespace"] == "team"
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    assert configuration.host == srv.url
    with client.ApiClient(configuration) as api_client:
        assert client.VersionApi(api_client).get_code().git_version.startswith("v1.")


# -- the module entry point -------------------------------------------------------------------------


def test_module_entry_point_serves_until_sigterm(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "glm_operator.devcluster.emulator", "--port", "0", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline() if proc.stdout else ""))
        reader.start()
        reader.join(timeout=20)
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:\d+)\n", lines[0] if lines else "")
        assert match, f"unexpected first line: {lines!r}"
        url = match.group(1)
        assert yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"] == url
        with client.ApiClient(client.Configuration(host=url)) as api_client:
            assert client.CoreV1Api(api_client).create_namespaced_config_map(
                NS, {"metadata": {"name": "x"}}).metadata.uid
    finally:
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(timeout=15)
    assert returncode == 0


# -- a real kopf operator -----------------------------------------------------------------------------


async def test_kopf_operator_creates_and_adopts_a_child(srv: EmulatorServer, api: client.ApiClient) -> None:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(WIDGET_CRD)
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)

    registry = kopf.OperatorRegistry()

    @kopf.on.login(id="login", registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=srv.url, default_namespace=NS)

    @kopf.on.create("demo.example.com", "v1", "widgets", id="create_fn", registry=registry)
    def create_fn(body: kopf.Body, name: str, namespace: str, **_: Any) -> dict[str, str]:
        child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config"},
                 "data": {"size": str(body["spec"]["size"])}}
        kopf.adopt(child, owner=body)
        core.create_namespaced_config_map(namespace, child)
        return {"child": f"{name}-config"}

    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.scanning.disabled = True
    stop, ready = asyncio.Event(), asyncio.Event()
    operator = asyncio.create_task(kopf.operator(
        registry=registry, settings=settings, standalone=True, namespaces=[NS],
        stop_flag=stop, ready_flag=ready))
    try:
        await asyncio.wait_for(ready.wait(), timeout=10)
        widget = await asyncio.to_thread(custom.create_namespaced_custom_object, "demo.example.com", "v1", NS,
                                         "widgets", {"apiVersion": "demo.example.com/v1", "kind": "Widget",
                                                     "metadata": {"name": "w1"}, "spec": {"size": 3}})

        def child_and_status() -> Any:
            found = [cm for cm in core.list_namespaced_config_map(NS).items if cm.metadata.name == "w1-config"]
            status = custom.get_namespaced_custom_object(
                "demo.example.com", "v1", NS, "widgets", "w1").get("status", {})
            return found and status.get("create_fn") and found[0]

        child = await asyncio.to_thread(poll, child_and_status, 10.0, "the adopted ConfigMap")
        assert child.data == {"size": "3"}
        assert [ref.uid for ref in child.metadata.owner_references] == [widget["metadata"]["uid"]]

        await asyncio.to_thread(custom.delete_namespaced_custom_object, "demo.example.com", "v1", NS,
                                "widgets", "w1")
        gone = await asyncio.to_thread(lambda: not core.list_namespaced_config_map(NS).items)
        assert gone  # the GC removed the owned ConfigMap with its owner
    finally:
        stop.set()
        try:
            await asyncio.wait_for(operator, timeout=10)
        except TimeoutError:
            operator.cancel()
            raise
