"""Every bad-input class is refused with a message that names the field, the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from glm_operator.api.findings import SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.cli import app
from glm_operator.render.manifests import render
from tests.conftest import INVALID_EXAMPLES, expectations, load_cr

runner = CliRunner()


def test_there_is_one_example_per_bad_input_class() -> None:
    assert len(INVALID_EXAMPLES) >= 12
    for example in INVALID_EXAMPLES:
        assert {"expected-field", "expected-message"} <= expectations(example).keys(), example.name


@pytest.mark.parametrize("example", INVALID_EXAMPLES, ids=lambda p: p.name)
def test_invalid_example_is_refused_with_its_expected_finding(example: Path) -> None:
    expected = expectations(example)
    with pytest.raises(SpecInvalidError) as info:
        render(parse(load_cr(example)))
    matching = [f for f in info.value.findings if f.field == expected["expected-field"]]
    assert matching, f"no finding for {expected['expected-field']}: {info.value}"
    assert any(expected["expected-message"] in f.message for f in matching), str(info.value)
    assert all(f.fix for f in info.value.findings)


@pytest.mark.parametrize("example", INVALID_EXAMPLES, ids=lambda p: p.name)
def test_glmctl_validate_exits_1_and_names_the_field(example: Path) -> None:
    result = runner.invoke(app, ["validate", str(example)])
    assert result.exit_code == 1
    assert expectations(example)["expected-field"] in result.output
    assert "fix:" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("example", INVALID_EXAMPLES, ids=lambda p: p.name)
def test_glmctl_render_prints_no_manifest_for_invalid_input(example: Path) -> None:
    result = runner.invoke(app, ["render", str(example)])
    assert result.exit_code == 1
    assert "apiVersion: apps/v1" not in result.output
