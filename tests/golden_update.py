"""Regenerate tests/golden/<example>.yaml from examples/*.yaml (``make golden``); review the diff."""

from __future__ import annotations

from pathlib import Path

import yaml

from glm_operator.api.load import parse
from glm_operator.render.manifests import render
from glm_operator.render.serialize import to_yaml

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


def golden_text(example: Path) -> str:
    """The rendered manifests of one example, as committed in tests/golden/."""
    return to_yaml(render(parse(yaml.safe_load(example.read_text()))).objects)


def main() -> None:
    """Rewrite every golden file."""
    GOLDEN.mkdir(exist_ok=True)
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        target = GOLDEN / example.name
        target.write_text(golden_text(example))
        print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
