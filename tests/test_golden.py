"""Golden files: the rendered manifests of every example are reviewed in diffs (``make golden``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import VALID_EXAMPLES
from tests.golden_update import GOLDEN, golden_text


@pytest.mark.parametrize("example", VALID_EXAMPLES, ids=lambda p: p.name)
def test_rendered_manifests_match_golden(example: Path) -> None:
    expected = (GOLDEN / example.name).read_text()
    assert golden_text(example) == expected, f"{example.name} drifted from its golden file: run `make golden`"


@pytest.mark.parametrize("example", VALID_EXAMPLES, ids=lambda p: p.name)
def test_render_is_deterministic(example: Path) -> None:
    assert golden_text(example) == golden_text(example)


def test_every_example_has_a_golden_file() -> None:
    assert sorted(p.name for p in GOLDEN.glob("*.yaml")) == sorted(p.name for p in VALID_EXAMPLES)
