"""observability/grafana-dashboard.json queries only metrics in the maintained table
observability/metrics.yaml (PromQL parsed by promql-parser), the table's operator rows are what the
operator exports, and the dashboard covers what issue 4 asks for."""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from glm_operator.observe import metrics
from tests.conftest import ROOT

DASHBOARD = ROOT / "observability" / "grafana-dashboard.json"
TABLE = ROOT / "observability" / "metrics.yaml"
#: Grafana's built-in variables that stand where PromQL needs a duration.
GRAFANA_DURATIONS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def table() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = yaml.safe_load(TABLE.read_text())["metrics"]
    return rows


def exposed_series(row: dict[str, Any]) -> set[str]:
    """The series names Prometheus stores for one metric family of the table."""
    name, kind = row["name"], row["type"]
    if kind == "histogram":
        return {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    if kind == "counter":
        return {name if name.endswith("_total") else f"{name}_total"}
    assert kind == "gauge", row
    return {name}


def queried_metrics(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (with Grafana's duration variables substituted)."""
    for variable, duration in GRAFANA_DURATIONS.items():
        expr = expr.replace(variable, duration)
    found: set[str] = set()

    def visit(node: Any) -> None:
        if type(node).__name__ == "VectorSelector":
            name = node.name or next((m.value for m in node.matchers.matchers if m.name == "__name__"), None)
            assert name, f"a selector without a metric name in {expr!r}"
            found.add(name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the panels (rows included) and of the query variables."""
    exprs: list[str] = []

    def panels(items: list[dict[str, Any]]) -> None:
        for panel in items:
            exprs.extend(t["expr"] for t in panel.get("targets", []))
            panels(panel.get("panels", []))

    panels(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            match = re.fullmatch(r"label_values\((.+), *(\w+)\)", query)
            assert match, f"unsupported variable query {query!r}"
            exprs.append(match.group(1))
    return exprs


def _all_panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for panel in items for p in [panel, *_all_panels(panel.get("panels", []))]]


def test_every_queried_metric_is_in_the_table() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    known = set().union(*(exposed_series(row) for row in table()))
    queries = dashboard_queries(dashboard)
    assert len(queries) > 20
    used = set().union(*(queried_metrics(q) for q in queries))
    assert not used - known, f"queried but not in observability/metrics.yaml: {sorted(used - known)}"


def test_the_extractor_sees_through_functions_and_operators() -> None:
    expr = ('histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{a="$x"}'
            '[$__rate_interval]))) / on() group_left sum(vllm:typo_metric) + {__name__="by_name"}')
    assert queried_metrics(expr) == {"vllm:time_to_first_token_seconds_bucket", "vllm:typo_metric", "by_name"}


def test_operator_rows_are_what_the_operator_exports() -> None:
    rows = {row["name"]: row["type"] for row in table() if row["source"] == "glm-operator"}
    exported = {  # the fixed families (capacity gauges exist only for CRs a reconcile has seen in this process)
        family.name: family.type for family in metrics.REGISTRY.collect()
        if family.name.startswith("glm_operator_") and not family.name.startswith("glm_operator_capacity_")
    }
    assert set(exported) <= set(rows), "a fixed operator metric is missing from observability/metrics.yaml"
    # capacity gauges appear once a reconcile reported capacity; their names come from the status model
    # (a new status.capacity field adds a gauge; list it in the table when the dashboard queries it)
    exported.update({name: "gauge" for name in metrics.capacity_metric_names()})
    assert rows.items() <= exported.items(), "the table lists an operator metric that is not exported"


def test_dashboard_covers_the_serving_signals() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    titles = " | ".join(p["title"] for p in _all_panels(dashboard["panels"]))
    for topic in ("Time to first token", "Inter-token latency", "KV-cache usage", "Prefix-cache hit rate",
                  "NIXL", "Queue length", "P/D split", "Reconcile"):
        assert topic in titles, topic
    ids = [p["id"] for p in _all_panels(dashboard["panels"])]
    assert len(ids) == len(set(ids))
    for panel in _all_panels(dashboard["panels"]):
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]


def test_vllm_series_carry_the_pod_monitor_labels() -> None:
    """Dashboard selectors use the labels the rendered PodMonitors copy from the pods."""
    from glm_operator.render.monitoring import POD_TARGET_LABELS  # noqa: PLC0415

    sanitized = {re.sub(r"[^a-zA-Z0-9_]", "_", label) for label in POD_TARGET_LABELS}
    text = DASHBOARD.read_text()
    assert sanitized <= set(re.findall(r"serving_glm_dev_\w+", text))


@pytest.mark.skipif(not os.environ.get("GLM_VLLM_WHEEL"), reason="set GLM_VLLM_WHEEL to the vllm-0.32.0 wheel")
def test_vllm_rows_exist_in_the_pinned_wheel() -> None:
    with zipfile.ZipFile(Path(os.environ["GLM_VLLM_WHEEL"])) as wheel:
        sources = {name: wheel.read(name).decode("utf-8", "replace") for name in wheel.namelist()
                   if name.endswith(".py")}
    for row in table():
        if row["source"] == "vllm":
            assert f'"{row["name"]}"' in sources[row["file"]], row
