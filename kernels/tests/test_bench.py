"""`make bench-kernels` without a GPU says so and exits 0 without writing results."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from glm_kernels import bench


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: make bench-kernels times for real")
def test_without_gpu_says_so_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.json"
    assert bench.main(["--json", str(out)]) == 0
    assert "no CUDA GPU" in capsys.readouterr().out
    assert not out.exists()
