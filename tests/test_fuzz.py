"""Property tests: whatever a user writes, glmctl answers with findings or manifests — never a traceback."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glm_operator.api.findings import SpecInvalidError
from glm_operator.api.load import parse
from glm_operator.render.manifests import render
from tests.conftest import EXAMPLES, load_cr

SEED = load_cr(EXAMPLES / "glm-5.3-pd.yaml")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**40), max_value=2**40), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["48Gi", "0", "-1", "1e3", "8", "ag_rs", "aggregated", "H200", "fp8"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*prefix, i))
    return found


PATHS = _paths(SEED["spec"])


def _outcome(cr: dict[str, Any]) -> str:
    try:
        objects = render(parse(cr)).objects
    except SpecInvalidError as exc:
        assert exc.findings, "a refusal must say why"
        for finding in exc.findings:
            assert finding.field and finding.message and finding.fix
        return "refused"
    assert objects
    return "rendered"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=values)
def test_any_value_at_any_spec_path_is_refused_cleanly_or_rendered(path: tuple[Any, ...], value: Any) -> None:
    cr = copy.deepcopy(SEED)
    node = cr["spec"]
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    assert _outcome(cr) in {"refused", "rendered"}


@settings(max_examples=150, deadline=None)
@given(spec=values)
def test_any_spec_document_is_refused_cleanly_or_rendered(spec: Any) -> None:
    cr = {"apiVersion": SEED["apiVersion"], "kind": SEED["kind"], "metadata": {"name": "x"}, "spec": spec}
    assert _outcome(cr) in {"refused", "rendered"}
