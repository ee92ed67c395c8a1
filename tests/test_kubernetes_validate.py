"""Every rendered built-in object passes the upstream Kubernetes schemas in strict mode."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from glm_operator.api.load import parse
from glm_operator.render.manifests import render
from tests.conftest import VALID_EXAMPLES, load_cr

CUSTOM_KINDS = {"InferencePool", "HTTPRoute"}


@pytest.mark.parametrize("k8s_version", ["1.31.0", "1.34.0"])
@pytest.mark.parametrize("example", VALID_EXAMPLES, ids=lambda p: p.name)
def test_built_in_objects_pass_strict_schemas(example: Path, k8s_version: str) -> None:
    cr = load_cr(example)
    cr["metadata"]["uid"] = "00000000-0000-0000-0000-000000000001"  # exercise ownerReferences too
    objects = render(parse(cr)).objects
    built_in = [o for o in objects if o["kind"] not in CUSTOM_KINDS]
    assert {o["kind"] for o in built_in} >= {"StatefulSet", "Service", "Deployment", "ConfigMap", "Role"}
    for obj in built_in:
        kubernetes_validate.validate(obj, k8s_version, strict=True)
