"""Opt-in: every vLLM flag, env var and KV connector the renderer uses exists in the pinned vLLM.

Reads the pinned wheel's source without installing it. The wheel is ~330 MB, so CI skips this;
run it with:

    .venv/bin/pip download --no-deps -d /tmp/vllm-wheel vllm==0.32.0
    GLM_VLLM_WHEEL=$(ls /tmp/vllm-wheel/vllm-0.32.0-*.whl) .venv/bin/pytest -q tests/test_pinned_vllm.py
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from functools import cache
from pathlib import Path

import pytest

from glm_operator import versions
from glm_operator.api.load import parse
from glm_operator.render.manifests import render
from tests.conftest import VALID_EXAMPLES, load_cr

WHEEL = os.environ.get("GLM_VLLM_WHEEL")
pytestmark = pytest.mark.skipif(not WHEEL, reason="set GLM_VLLM_WHEEL to the pinned vLLM wheel (see module docstring)")


@cache
def _source(member: str) -> str:
    assert WHEEL is not None
    with zipfile.ZipFile(WHEEL) as wheel:
        return wheel.read(member).decode()


def test_the_wheel_is_the_pinned_version() -> None:
    assert WHEEL is not None
    assert f"vllm-{versions.VLLM_VERSION}-" in Path(WHEEL).name


def _rendered_engines() -> list[dict[str, object]]:
    containers = []
    for example in VALID_EXAMPLES:
        for obj in render(parse(load_cr(example))).objects:
            if obj["kind"] == "StatefulSet":
                containers.append(obj["spec"]["template"]["spec"]["containers"][0])
    return containers


def test_every_rendered_flag_exists() -> None:
    arg_utils = _source("vllm/engine/arg_utils.py") + _source("vllm/entrypoints/launchers/cli_args.py")
    flags = {a.split("=", 1)[0] for c in _rendered_engines() for a in c["args"] if a.startswith("--")}
    assert flags
    missing = [
        flag for flag in sorted(flags) if f'"{flag}"' not in arg_utils and flag[2:].replace("-", "_") not in arg_utils
    ]
    assert not missing, f"flags unknown to vLLM {versions.VLLM_VERSION}: {missing}"


def test_every_rendered_env_var_is_read_by_vllm() -> None:
    envs = _source("vllm/envs.py")
    names = {e["name"] for c in _rendered_engines() for e in c["env"] if e["name"].startswith("VLLM_")}
    assert names and all(f'"{name}"' in envs for name in names), names


def test_every_rendered_kv_connector_is_registered() -> None:
    factory = _source("vllm/distributed/kv_transfer/kv_connector/factory.py")
    connectors = set()
    for container in _rendered_engines():
        args = container["args"]
        if "--kv-transfer-config" in args:
            config = json.loads(args[args.index("--kv-transfer-config") + 1])
            connectors.add(config["kv_connector"])
            connectors |= {c["kv_connector"] for c in config.get("kv_connector_extra_config", {}).get("connectors", [])}
    assert connectors >= {"MultiConnector", "NixlConnector", "HiSparseConnector", "OffloadingConnector"}
    registered = set(re.findall(r'register_connector\(\s*"(\w+)"', factory))
    assert connectors <= registered, connectors - registered


def test_attention_and_cache_values_exist() -> None:
    assert "sparse_mla_force_mqa" in _source("vllm/config/attention.py")
    assert '"fp8"' in _source("vllm/config/cache.py")
    assert "host_pool_gib" in _source("vllm/config/kv_transfer.py")
