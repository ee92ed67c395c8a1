"""``glmctl plan``: the capacity table, ``--json``, and refusals (exit 1, plan still shown)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from glm_operator.cli import app
from tests.conftest import EXAMPLES, INVALID_EXAMPLES

runner = CliRunner()
SEED = EXAMPLES / "glm-5.3-pd.yaml"


def test_plan_prints_the_table_per_role() -> None:
    result = runner.invoke(app, ["plan", str(SEED)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "54,728 B/token" in out and "max context 1,048,576 tokens" in out
    for label in ("weights / GPU", "KV budget / GPU", "KV bytes / token / GPU", "max context (one request)",
                  "concurrency at 1,048,576 tokens", "HiSparse host pool / rank", "sparse-MLA FLOP/B",
                  "indexer > sparse MLA from", "DCP all-gather"):
        assert label in out, label
    assert "PCP8×DCP8×EP8" in out and "DP8×EP8" in out
    assert "15.0 GiB" in out and "6.7 GiB" in out and "48.0 GiB" in out


def test_plan_json_has_the_numbers() -> None:
    result = runner.invoke(app, ["plan", "--json", str(SEED)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["kvBytesPerToken"] == {"total": 54_728, "mla": 51_824, "indexer": 2_904}
    assert report["maxModelLen"] == 1_048_576 and report["maxModelLenSource"] == "spec"
    assert round(report["ridgeFlopPerByte"]) == 206
    prefill, decode = report["roles"]["prefill"], report["roles"]["decode"]
    assert prefill["layout"] == "PCP8×DCP8×EP8" and decode["layout"] == "DP8×EP8"
    assert round(prefill["sparseMlaFlopPerByte"]) == 191
    assert decode["maxConcurrentAtMaxContext"] == 8 and decode["hiSparse"] is True
    assert [f["field"] for f in report["findings"]] == ["spec.kvTransfer.rdma"]  # the RDMA warning only


def test_plan_of_an_oversized_cr_shows_the_plan_then_the_refusal() -> None:
    oversized = next(p for p in INVALID_EXAMPLES if p.name == "decode-offload-only-1m.yaml")
    result = runner.invoke(app, ["plan", str(oversized)], env={"COLUMNS": "160"})
    assert result.exit_code == 1
    assert "KV budget / GPU" in result.stdout
    assert "spec.model.maxModelLen" in result.stderr and "enable decode.hiSparse" in result.stderr
    report = json.loads(runner.invoke(app, ["plan", "--json", str(oversized)]).stdout)
    assert report["roles"]["decode"]["maxConcurrentAtMaxContext"] == 0
    assert any(f["severity"] == "error" for f in report["findings"])


def test_plan_of_a_schema_error_names_the_field(tmp_path: Path) -> None:
    bad = next(p for p in INVALID_EXAMPLES if p.name == "unknown-gpu-without-memory.yaml")
    result = runner.invoke(app, ["plan", str(bad)])
    assert result.exit_code == 1 and "spec.gpu" in result.stderr and "Traceback" not in result.output
    missing = runner.invoke(app, ["plan", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1 and "cannot read" in missing.stderr


def test_unknown_gpu_with_memory_is_planned() -> None:
    text = SEED.read_text().replace("product: H200", "product: NVIDIA-H100-80GB-HBM3\n    memory: 81559Mi")
    assert "NVIDIA-H100" in text
    result = runner.invoke(app, ["plan", "--json", "-"], input=text)
    report = json.loads(result.stdout)
    assert report["gpu"] == "NVIDIA-H100-80GB-HBM3" and report["ridgeFlopPerByte"] is None
    # 80 GB cannot hold 105 GiB of weights per GPU: refused, with the numbers
    assert result.exit_code == 1
    assert any("leaves nothing for the KV cache" in f["message"] for f in report["findings"])
