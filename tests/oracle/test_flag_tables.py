"""The committed flag tables are what each release's wheel says (regenerate: make flag-tables)."""

from __future__ import annotations

import json

import pytest

from glm_operator.plan.flag_table import SUPPORTED_RELEASES
from tests.oracle.conftest import ROOT, run_in_oracle


@pytest.mark.parametrize("release", SUPPORTED_RELEASES)
def test_committed_flag_table_matches_the_wheel(release: str) -> None:
    committed = json.loads((ROOT / "operator/glm_operator/plan/vllm_flags" / f"{release}.json").read_text())
    generated = run_in_oracle(release, "flag_table.py")
    assert generated["vllm"] == release
    assert generated == committed, "the flag table drifted from the wheel: run `make flag-tables`"
