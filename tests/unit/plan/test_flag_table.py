"""plan/flag_table.py: extraArgs read as each release's vLLM parser reads them, against the generated tables."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from glm_operator.api.load import parse
from glm_operator.plan.flag_table import SUPPORTED_RELEASES, check_extra_args, flag_table, value_problem
from glm_operator.plan.rules import check, errors


def _errors_for(seed_cr: dict[str, Any], role: str, extra_args: list[str] | None = None,
                env: list[dict[str, str]] | None = None) -> list[Any]:
    resource = copy.deepcopy(seed_cr)
    if extra_args is not None:
        resource["spec"][role]["extraArgs"] = extra_args
    if env is not None:
        resource["spec"][role]["env"] = env
    return errors(check(parse(resource).spec))


@pytest.mark.parametrize("release", SUPPORTED_RELEASES)
def test_tables_hold_the_flags_the_renderer_uses(release: str) -> None:
    table = flag_table(release)
    assert table.release == release
    for option in ("--tensor-parallel-size", "--prefill-context-parallel-size", "--decode-context-parallel-size",
                   "--dcp-comm-backend", "--kv-transfer-config", "--block-size", "--kv-cache-dtype",
                   "--max-model-len", "--speculative-config", "--attention-config", "--compilation-config",
                   "--shutdown-timeout", "--disable-access-log-for-endpoints"):
        assert table.lookup(option) is not None, option
    assert table.lookup("-dcp") == table.lookup("--decode-context-parallel-size")
    assert table.lookup("--tensor_parallel_size") == table.lookup("--tensor-parallel-size")


def test_releases_differ_where_vllm_changed() -> None:
    """0.33.0 replaced the --no-enable-X negations by --disable-X (seen in the generated tables)."""
    assert flag_table("0.32.0").lookup("--no-enable-prefix-caching") is not None
    assert flag_table("0.33.0").lookup("--no-enable-prefix-caching") is None
    assert flag_table("0.33.0").lookup("--disable-prefix-caching") is not None


@pytest.mark.parametrize(("args", "message"), [
    (["--max-num-seqs", "64", "rm", "-rf"], "positional word"),
    (["; curl evil | sh"], "positional word"),
    (["--tensor-paralel-size=8"], "has no option --tensor-paralel-size"),
    (["--max-num-seqs=lots"], "not a whole number"),
    (["--gpu-memory-utilization", "high"], "not a number"),
    (["--max-num-seqs"], "needs a value"),
    (["--enable-prefix-caching=yes"], "takes no value"),
    (["--kv-cache-dtype=fp9"], "rendered by the operator"),
    (["--max-model-len=4096"], "rendered by the operator"),
    (["--max-model"], "rendered by the operator"),  # argparse abbreviation
    (["--data-parallel-start-rank", "8"], "multi-node"),
    (["-dpr", "8"], "multi-node"),
    (["--headless"], "multi-node"),
    (["--kv-offloading-size=64"], "replaces the NIXL connector"),
])
def test_escape_hatch_extra_args_are_refused_with_field_value_and_fix(
    seed_cr: dict[str, Any], args: list[str], message: str,
) -> None:
    found = [e for e in _errors_for(seed_cr, "decode", args) if e.field.startswith("spec.decode.extraArgs")]
    assert found, args
    assert any(message in e.message or message in e.fix for e in found), [(e.message, e.fix) for e in found]
    assert all(e.fix for e in found)


def test_valid_extra_args_pass(seed_cr: dict[str, Any]) -> None:
    args = ["--max-num-seqs", "64", "--gpu-memory-utilization=0.9", "--enable-prefix-caching",
            "--tool-call-parser", "glm47", "--max-num-batched-tokens=8192"]
    assert [e for e in _errors_for(seed_cr, "decode", args) if "extraArgs" in e.field] == []


def test_unknown_flag_suggests_the_close_one() -> None:
    (finding,) = check_extra_args(["--max-num-sqes=4"], flag_table("0.32.0"), {}, "spec.decode.extraArgs")
    assert finding.field == "spec.decode.extraArgs[0]"
    assert "--max-num-seqs" in finding.fix


def test_echoed_values_are_bounded() -> None:
    (finding,) = check_extra_args(["x" * 5000], flag_table("0.32.0"), {}, "f")
    assert len(str(finding.value)) < 200


@pytest.mark.parametrize("name", ["CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_PRELOAD", "PYTHONPATH"])
def test_env_that_breaks_gpu_assignment_or_injects_code_is_refused(seed_cr: dict[str, Any], name: str) -> None:
    found = [e for e in _errors_for(seed_cr, "decode", env=[{"name": name, "value": "0"}])
             if e.field == "spec.decode.env[0].name"]
    assert len(found) == 1
    assert name in found[0].message and ":" in found[0].message


def test_json_values_are_checked() -> None:
    flag = flag_table("0.32.0").lookup("--eplb-config")
    assert flag is not None
    assert value_problem(flag, "{not json") == "not valid JSON"
    assert value_problem(flag, '{"a": 1}') is None
