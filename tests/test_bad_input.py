"""Bad input found by trying the tool as a new user: each is refused with field, value and fix."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from glm_operator.api.load import parse
from glm_operator.cli import app
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr, refusal

runner = CliRunner()


_findings = refusal


def _seed(**spec: Any) -> dict[str, Any]:
    cr = load_cr(EXAMPLES / "glm-5.3-pd.yaml")
    cr["spec"].update(copy.deepcopy(spec))
    return cr


def test_ports_above_65535_are_refused() -> None:
    found = _findings(_seed(kvTransfer={"sideChannelBasePort": 65530}))
    assert any(f.field == "spec.kvTransfer.sideChannelBasePort" and "65535" in f.message for f in found)


@pytest.mark.parametrize(
    "arg",
    [
        "--max_model_len=2000",
        "--tensor_parallel_size=2",
        "--BLOCK-SIZE=32",
        "--block-size 32",
        "--model=foo",
        "--pipeline-parallel-size=2",
        "-pp=2",
        "--data-parallel-size-local=2",
        "--no-enable-expert-parallel",
        "--attention-config={}",
        "--dcp-comm-backend=a2a",
        "--config=/x.yaml",
        "--host=0.0.0.0",
    ],
)
def test_extra_args_cannot_override_rendered_flags(arg: str) -> None:
    cr = _seed()
    cr["spec"]["prefill"]["extraArgs"] = [arg]
    found = _findings(cr)
    assert any(f.field == "spec.prefill.extraArgs[0]" for f in found), found


def test_compilation_config_is_free_where_the_operator_does_not_render_it() -> None:
    cr = _seed()
    cr["spec"]["decode"]["extraArgs"] = ['--compilation-config={"cudagraph_mode":"FULL_AND_PIECEWISE"}']
    assert render(parse(cr)).objects


def test_extra_args_that_the_operator_does_not_own_pass() -> None:
    cr = _seed()
    cr["spec"]["decode"]["extraArgs"] = ["--max-num-batched-tokens", "1024", "--enable-dbo"]
    assert render(parse(cr)).objects


@pytest.mark.parametrize(
    ("name", "profile"),
    [("moonshotai/Kimi-K2.6", "glm-5.3"), ("deepseek-ai/DeepSeek-V3.2", "glm-5.3"), ("zai-org/GLM-5.1-FP8", "glm-5.3")],
)
def test_model_name_must_fit_the_profile(name: str, profile: str) -> None:
    cr = _seed()
    cr["spec"]["model"].update(name=name, profile=profile)
    found = _findings(cr)
    assert any(f.field == "spec.model.profile" for f in found), found


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("decode", "hiSparse", "hostPoolPerRank"), "0"),
        (("decode", "hiSparse", "hostPoolPerRank"), "512M"),
        (("prefill", "cpuOffloadPerRank"), "100Mi"),
    ],
)
def test_pool_sizes_must_be_at_least_one_gib(path: tuple[str, ...], value: str) -> None:
    cr = _seed()
    node = cr["spec"]
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    found = _findings(cr)
    assert any(f.field == "spec." + ".".join(path) for f in found), found


def test_tensor_parallel_must_divide_the_attention_heads() -> None:
    cr = _seed()
    cr["spec"]["decode"]["parallelism"] = {"tensor": 3, "data": 1}
    found = _findings(cr)
    assert any(f.field == "spec.decode.parallelism.tensor" and "64" in f.message for f in found), found


def test_missing_required_field_does_not_echo_the_parent() -> None:
    cr = _seed()
    cr["spec"]["imagee"] = cr["spec"].pop("image")
    found = {f.field: f for f in _findings(cr)}
    assert found["spec.image"].value is None
    assert "did you mean 'image'" in found["spec.imagee"].fix


def test_unknown_metadata_field_is_named() -> None:
    cr = _seed()
    cr["metadata"]["nmae"] = cr["metadata"].pop("name")
    found = {f.field: f for f in _findings(cr)}
    assert "metadata.nmae" in found and "did you mean 'name'" in found["metadata.nmae"].fix


def test_bad_namespace_is_refused() -> None:
    cr = _seed()
    cr["metadata"]["namespace"] = "Bad_NS"
    assert any(f.field == "metadata.namespace" for f in _findings(cr))


@pytest.mark.parametrize("value", [True, "1", 1.5])
def test_integers_are_strict(value: Any) -> None:
    cr = _seed()
    cr["spec"]["decode"]["replicas"] = value
    assert any(f.field == "spec.decode.replicas" for f in _findings(cr))


def test_list_indices_are_written_in_brackets() -> None:
    cr = _seed()
    cr["spec"]["decode"]["env"] = [{"name": "A", "value": 3}]
    assert any(f.field == "spec.decode.env[0].value" for f in _findings(cr))


def test_env_from_a_secret_is_accepted() -> None:
    cr = _seed()
    cr["spec"]["decode"]["env"] = [{"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    objects = render(parse(cr)).objects
    decode = next(o for o in objects if o["metadata"]["name"] == "glm-5-3-decode" and o["kind"] == "StatefulSet")
    env = decode["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}} in env


def test_env_needs_exactly_one_of_value_and_value_from() -> None:
    cr = _seed()
    source = {"fieldRef": {"fieldPath": "status.podIP"}}
    cr["spec"]["decode"]["env"] = [{"name": "A", "value": "x", "valueFrom": source}]
    assert any(f.field.startswith("spec.decode.env[0]") for f in _findings(cr))


def test_image_tags_may_be_upper_case() -> None:
    cr = _seed(image="ghcr.io/glm-serving/vllm-glm:v0.32.0-RC1")
    assert render(parse(cr)).objects


def test_binary_garbage_is_a_clear_error(tmp_path: Path) -> None:
    garbage = tmp_path / "g.yaml"
    garbage.write_bytes(bytes(range(256)) * 8)
    result = runner.invoke(app, ["validate", str(garbage)])
    assert result.exit_code == 1
    assert "UTF-8" in result.output and "Traceback" not in result.output


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    dup = tmp_path / "dup.yaml"
    dup.write_text((EXAMPLES / "glm-5.3-pd.yaml").read_text() + "  image: other:1\n")
    result = runner.invoke(app, ["validate", str(dup)])
    assert result.exit_code == 1 and "duplicate key" in result.output


def test_user_text_is_not_read_as_rich_markup(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    cr = _seed(image="[bold]x")
    bad.write_text(yaml.safe_dump(cr))
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 1
    assert "[bold]x" in result.output
