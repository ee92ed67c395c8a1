"""The local control plane's audit-log reader, as the e2e tests and the benchmark use it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from glm_localcluster.controlplane import ControlPlane


def test_audit_events_skip_the_line_the_api_server_is_still_writing(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    done = {"verb": "get", "user": {"username": "op"}}
    log.write_text(json.dumps(done) + "\n" + '{"verb": "patch", "user": {"usern')  # a line cut mid-write
    plane: Any = ControlPlane.__new__(ControlPlane)
    plane.audit_log = log
    assert ControlPlane.audit_events(plane, "op") == [done]
