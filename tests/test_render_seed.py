"""Seed system A rendered exactly: engine flags, KV transfer on both roles, P/D invariants."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from glm_operator import versions
from glm_operator.api.load import parse
from glm_operator.api.quantity import parse_bytes
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr


def _objects(cr: dict[str, Any]) -> list[dict[str, Any]]:
    return render(parse(cr)).objects


def _get(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def _vllm(sts: dict[str, Any]) -> dict[str, Any]:
    containers = sts["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "vllm")


def _flag(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, f"{flag} appears {args.count(flag)} times"
    return args[args.index(flag) + 1]


def _env(container: dict[str, Any], name: str) -> dict[str, Any]:
    entries = [e for e in container["env"] if e["name"] == name]
    assert len(entries) == 1, f"env {name}: {len(entries)} entries"
    return entries[0]


@pytest.fixture
def seed(seed_cr: dict[str, Any]) -> list[dict[str, Any]]:
    return _objects(seed_cr)


def test_prefill_flags_are_the_seed_flags(seed: list[dict[str, Any]]) -> None:
    args = _vllm(_get(seed, "StatefulSet", "glm-5-3-prefill"))["args"]
    assert _flag(args, "--prefill-context-parallel-size") == "8"
    assert _flag(args, "--decode-context-parallel-size") == "8"
    assert _flag(args, "--dcp-comm-backend") == "ag_rs"
    assert _flag(args, "--tensor-parallel-size") == "1"
    assert "--enable-expert-parallel" in args
    assert json.loads(_flag(args, "--attention-config")) == {"sparse_mla_force_mqa": True}
    assert "--data-parallel-size" not in args


def test_decode_flags_are_dp8_ep8_with_hisparse(seed: list[dict[str, Any]]) -> None:
    args = _vllm(_get(seed, "StatefulSet", "glm-5-3-decode"))["args"]
    assert _flag(args, "--data-parallel-size") == "8"
    assert "--enable-expert-parallel" in args
    assert "--prefill-context-parallel-size" not in args
    assert "--compilation-config" not in args  # vLLM's default FULL_AND_PIECEWISE is HiSparse's path


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_shared_engine_flags(seed: list[dict[str, Any]], role: str) -> None:
    args = _vllm(_get(seed, "StatefulSet", f"glm-5-3-{role}"))["args"]
    assert _flag(args, "--kv-cache-dtype") == "fp8"
    assert _flag(args, "--block-size") == "64"
    assert _flag(args, "--max-model-len") == "1048576"
    assert json.loads(_flag(args, "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 3}
    assert "--kv-offloading-size" not in args, "the shortcut flag replaces the NIXL connector"


def test_kv_transfer_prefill_is_nixl_producer_composed_with_cpu_offload(seed: list[dict[str, Any]]) -> None:
    args = _vllm(_get(seed, "StatefulSet", "glm-5-3-prefill"))["args"]
    config = json.loads(_flag(args, "--kv-transfer-config"))
    assert config["kv_connector"] == "MultiConnector"
    assert config["kv_role"] == "kv_producer"
    nixl, offload = config["kv_connector_extra_config"]["connectors"]
    assert nixl["kv_connector"] == "NixlConnector" and nixl["kv_role"] == "kv_producer"
    assert nixl["kv_load_failure_policy"] == "fail"
    assert offload["kv_connector"] == "OffloadingConnector"
    # no "block_size": under DCP8 a KV block spans 64 x 8 tokens, and vLLM 0.32.0 refuses an offload
    # chunk that is not a multiple of it; the default (one block per chunk) always fits
    assert offload["kv_connector_extra_config"] == {"cpu_bytes_to_use": 512 * 2**30}


def test_kv_transfer_decode_is_nixl_consumer_composed_with_hisparse(seed: list[dict[str, Any]]) -> None:
    args = _vllm(_get(seed, "StatefulSet", "glm-5-3-decode"))["args"]
    config = json.loads(_flag(args, "--kv-transfer-config"))
    assert config["kv_connector"] == "MultiConnector"
    assert config["kv_role"] == "kv_consumer"
    nixl, hisparse, offload = config["kv_connector_extra_config"]["connectors"]
    assert (nixl["kv_connector"], nixl["kv_role"]) == ("NixlConnector", "kv_consumer")
    assert hisparse["kv_connector"] == "HiSparseConnector"
    assert hisparse["kv_connector_extra_config"] == {"host_pool_gib": 48}
    assert offload["kv_connector"] == "OffloadingConnector"
    assert offload["kv_connector_extra_config"]["cpu_bytes_to_use"] == 16 * 2**30


def test_one_block_size_dtype_and_hash_seed_everywhere(seed: list[dict[str, Any]]) -> None:
    engines = [o for o in seed if o["kind"] == "StatefulSet"]
    assert len(engines) == 2
    assert {_flag(_vllm(s)["args"], "--block-size") for s in engines} == {"64"}
    assert {_flag(_vllm(s)["args"], "--kv-cache-dtype") for s in engines} == {"fp8"}
    assert {_env(_vllm(s), "PYTHONHASHSEED")["value"] for s in engines} == {"42"}
    config = _get(seed, "ConfigMap", "glm-5-3-epp")["data"]["epp-config.yaml"]
    producer = next(p for p in yaml.safe_load(config)["plugins"] if p["type"] == "approx-prefix-cache-producer")
    assert producer["parameters"]["blockSizeTokens"] == 64


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_side_channel_host_is_the_pod_ip(seed: list[dict[str, Any]], role: str) -> None:
    container = _vllm(_get(seed, "StatefulSet", f"glm-5-3-{role}"))
    assert _env(container, "VLLM_NIXL_SIDE_CHANNEL_HOST")["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert _env(container, "VLLM_NIXL_SIDE_CHANNEL_PORT")["value"] == "5600"


def test_inference_pool_targets_the_serving_port_of_both_roles(seed: list[dict[str, Any]]) -> None:
    pool = _get(seed, "InferencePool", "glm-5-3")
    assert pool["apiVersion"] == versions.INFERENCE_POOL_API_VERSION
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    selector = pool["spec"]["selector"]["matchLabels"]
    prefill = _get(seed, "StatefulSet", "glm-5-3-prefill")
    decode = _get(seed, "StatefulSet", "glm-5-3-decode")
    for sts in (prefill, decode):
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
    assert prefill["spec"]["template"]["metadata"]["labels"]["llm-d.ai/role"] == "prefill"
    assert decode["spec"]["template"]["metadata"]["labels"]["llm-d.ai/role"] == "decode"
    # the port that serves: prefill vLLM and the decode sidecar
    assert _flag(_vllm(prefill)["args"], "--port") == "8000"
    sidecar = decode["spec"]["template"]["spec"]["initContainers"][0]
    assert sidecar["restartPolicy"] == "Always"
    assert "--port=8000" in sidecar["args"]
    assert "--model-server-port=8200" in sidecar["args"]
    assert _flag(_vllm(decode)["args"], "--port") == "8200"


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_no_two_ports_of_a_pod_are_equal(seed: list[dict[str, Any]], role: str) -> None:
    pod = _get(seed, "StatefulSet", f"glm-5-3-{role}")["spec"]["template"]["spec"]
    ports = [p["containerPort"] for c in pod["containers"] + pod.get("initContainers", []) for p in c.get("ports", [])]
    assert len(ports) == len(set(ports)), ports
    assert len(ports) >= 9  # serving + 8 NIXL side-channel ports


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_pod_plumbing(seed: list[dict[str, Any]], role: str) -> None:
    pod = _get(seed, "StatefulSet", f"glm-5-3-{role}")["spec"]["template"]["spec"]
    vllm = next(c for c in pod["containers"] if c["name"] == "vllm")
    limits = vllm["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "8"
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    # /dev/shm and both 512 GiB host pools fit inside the memory limit
    assert parse_bytes(shm["emptyDir"]["sizeLimit"]) + 512 * 2**30 < parse_bytes(limits["memory"])
    assert vllm["resources"]["requests"]["memory"] == limits["memory"]
    startup = vllm["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 3600
    assert pod["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H200"
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[-1]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["enableServiceLinks"] is False
    # vLLM drains in-flight requests on SIGTERM and exits within the grace period
    assert 0 < int(_flag(vllm["args"], "--shutdown-timeout")) < pod["terminationGracePeriodSeconds"]


def test_minimal_cr_renders_seed_system_a(seed_cr: dict[str, Any]) -> None:
    minimal = {
        "apiVersion": seed_cr["apiVersion"],
        "kind": seed_cr["kind"],
        "metadata": seed_cr["metadata"],
        "spec": {
            "model": {"name": seed_cr["spec"]["model"]["name"], "source": seed_cr["spec"]["model"]["source"]},
            "image": seed_cr["spec"]["image"],
        },
    }
    assert _objects(minimal) == _objects(seed_cr)


def test_owner_references_only_for_objects_from_the_api_server(seed_cr: dict[str, Any]) -> None:
    assert all("ownerReferences" not in o["metadata"] for o in _objects(seed_cr))
    seed_cr["metadata"]["uid"] = "1234"
    refs = [o["metadata"]["ownerReferences"] for o in _objects(seed_cr)]
    assert all(r == [{"apiVersion": "serving.glm.dev/v1alpha1", "kind": "GLMDeployment", "name": "glm-5-3",
                      "uid": "1234", "controller": True, "blockOwnerDeletion": True}] for r in refs)


def test_gateway_adds_an_httproute_and_drops_the_standalone_proxy(seed_cr: dict[str, Any]) -> None:
    seed_cr["spec"]["router"]["gateway"] = {"name": "inference-gateway", "namespace": "gw"}
    objects = _objects(seed_cr)
    route = _get(objects, "HTTPRoute", "glm-5-3")
    assert route["spec"]["parentRefs"][0]["name"] == "inference-gateway"
    assert route["spec"]["rules"][0]["backendRefs"][0]["kind"] == "InferencePool"
    epp = _get(objects, "Deployment", "glm-5-3-epp")
    assert [c["name"] for c in epp["spec"]["template"]["spec"]["containers"]] == ["epp"]


def test_aggregated_mode_renders_one_role_without_nixl_or_sidecar() -> None:
    objects = _objects(load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml"))
    engines = [o for o in objects if o["kind"] == "StatefulSet"]
    assert [e["metadata"]["name"] for e in engines] == ["kimi-k2-6-engine"]
    vllm = _vllm(engines[0])
    assert _flag(vllm["args"], "--tensor-parallel-size") == "8"
    assert _flag(vllm["args"], "--decode-context-parallel-size") == "8"
    assert "--kv-transfer-config" not in vllm["args"]
    assert "initContainers" not in engines[0]["spec"]["template"]["spec"]
    assert all(e["name"] != "VLLM_NIXL_SIDE_CHANNEL_HOST" for e in vllm["env"])
    assert engines[0]["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-B200"
    assert _get(objects, "InferencePool", "kimi-k2-6")["spec"]["targetPorts"] == [{"number": 8000}]
