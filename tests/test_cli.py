"""glmctl: render/validate/crd/version behave as documented, with exit codes 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from glm_operator import versions
from glm_operator.api.crd import build_crd
from glm_operator.cli import app
from tests.conftest import EXAMPLES, ROOT

runner = CliRunner()
SEED = str(EXAMPLES / "glm-5.3-pd.yaml")


def test_render_yaml_is_a_stream_of_manifests() -> None:
    result = runner.invoke(app, ["render", SEED])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs].count("StatefulSet") == 2
    assert all(d["metadata"]["namespace"] == "default" for d in docs)


def test_render_json_is_a_v1_list() -> None:
    result = runner.invoke(app, ["render", SEED, "-o", "json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    assert listing["kind"] == "List" and len(listing["items"]) == 11


def test_render_rejects_an_unknown_output_format() -> None:
    assert runner.invoke(app, ["render", SEED, "-o", "toml"]).exit_code == 2


def test_validate_valid_file() -> None:
    result = runner.invoke(app, ["validate", SEED])
    assert result.exit_code == 0
    assert "valid" in result.stdout


def test_validate_reports_unreadable_and_non_yaml_input(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1 and "cannot read" in missing.output
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed\n")
    result = runner.invoke(app, ["validate", str(broken)])
    assert result.exit_code == 1 and "not valid YAML" in result.output
    other = tmp_path / "other.yaml"
    other.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    result = runner.invoke(app, ["validate", str(other)])
    assert result.exit_code == 1 and "no GLMDeployment" in result.output


def test_validate_reads_stdin() -> None:
    result = runner.invoke(app, ["validate", "-"], input=(EXAMPLES / "glm-5.3-pd.yaml").read_text())
    assert result.exit_code == 0, result.output


def test_crd_command_prints_the_generated_crd() -> None:
    result = runner.invoke(app, ["crd"])
    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout) == build_crd()


def test_version_lists_the_pinned_tuple() -> None:
    result = runner.invoke(app, ["version"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for _, value in versions.version_table():
        assert value in result.stdout


def test_readme_documents_the_pinned_tuple_and_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    head = "\n".join(readme.splitlines()[:12])
    assert "make run" in head and "make test" in head
    for component, value in versions.version_table():
        assert f"| {component} | `{value}` |" in readme, component


def test_namespace_option_places_crs_without_one(tmp_path: Path) -> None:
    cr = yaml.safe_load((EXAMPLES / "glm-5.3-pd.yaml").read_text())
    del cr["metadata"]["namespace"]
    path = tmp_path / "cr.yaml"
    path.write_text(yaml.safe_dump(cr))
    result = runner.invoke(app, ["render", str(path), "-n", "serving"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert {d["metadata"]["namespace"] for d in docs} == {"serving"}
    epp = next(d for d in docs if d["kind"] == "Deployment")
    assert "--pool-namespace=serving" in epp["spec"]["template"]["spec"]["containers"][0]["args"]


def test_namespace_option_conflicting_with_the_cr_is_an_error() -> None:
    result = runner.invoke(app, ["validate", SEED, "--namespace", "other"])
    assert result.exit_code == 1 and "namespace 'default'" in result.output


def test_validate_checks_every_file_given_as_a_pre_commit_hook_passes_them() -> None:
    good = str(EXAMPLES / "glm-5.3-pd.yaml")
    bad = str(EXAMPLES / "invalid" / "pcp-with-dp.yaml")
    ok = runner.invoke(app, ["validate", good, str(EXAMPLES / "kimi-k2.6-dcp8-b200.yaml")])
    assert ok.exit_code == 0, ok.output
    assert ok.output.count(": valid") == 2
    mixed = runner.invoke(app, ["validate", bad, good])
    assert mixed.exit_code == 1
    assert "spec.prefill.parallelism.data" in mixed.output and f"{good}: valid" in mixed.output
