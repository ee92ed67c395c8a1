"""plan/rules.py findings, as the operator sees CRs after the API server applied the CRD's defaults."""

from __future__ import annotations

from glm_operator.api.findings import Severity
from glm_operator.api.load import parse
from glm_operator.plan import rules
from tests.conftest import EXAMPLES, load_cr


def test_aggregated_mode_does_not_warn_about_kv_transfer_defaults_the_api_server_filled_in() -> None:
    # The fresh-user trial: `glmctl validate` said "valid" for the kimi example, but in the cluster the operator
    # warned about 'load_failure_policy, side_channel_base_port' that nobody set (CRD defaults, snake_case names).
    cr = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
    cr["spec"]["kvTransfer"].update({"sideChannelBasePort": 5600, "loadFailurePolicy": "fail"})  # CRD defaults
    findings = rules.mode_roles(parse(cr).spec)
    assert [f for f in findings if f.field == "spec.kvTransfer"] == []


def test_aggregated_mode_warns_about_kv_transfer_settings_by_their_field_names() -> None:
    cr = load_cr(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")
    cr["spec"]["kvTransfer"].update({"sideChannelBasePort": 7000, "loadFailurePolicy": "fail"})
    (finding,) = [f for f in rules.mode_roles(parse(cr).spec) if f.field == "spec.kvTransfer"]
    assert finding.severity == Severity.WARNING
    assert finding.value == "sideChannelBasePort"
