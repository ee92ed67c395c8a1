"""images/: hadolint-clean Dockerfiles, what they pin and label, `make images` without an engine,
and the operator wheel they install: it builds, installs into a fresh virtualenv and runs."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from glm_operator import __version__, versions
from tests.conftest import ROOT

DOCKERFILES = sorted((ROOT / "images").glob("*/Dockerfile"))
HADOLINT = Path(sys.prefix) / "bin" / "hadolint"


def test_examples_reference_the_serving_image_make_images_builds() -> None:
    from glm_operator.versions import SERVING_IMAGE  # noqa: PLC0415

    tag = SERVING_IMAGE.rsplit(":", 1)[1]
    for example in sorted((ROOT / "examples").rglob("*.yaml")):
        for line in example.read_text().splitlines():
            if "vllm-glm:" in line and "@sha256:" not in line:
                assert line.rstrip().endswith(f"vllm-glm:{tag}"), f"{example}: {line.strip()}"


def test_both_images_exist() -> None:
    assert [p.parent.name for p in DOCKERFILES] == ["operator", "vllm-glm"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint_clean(dockerfile: Path) -> None:
    result = subprocess.run(
        [str(HADOLINT), "--config", str(ROOT / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_config_still_finds_problems(tmp_path: Path) -> None:
    sloppy = tmp_path / "Dockerfile"
    sloppy.write_text("FROM python\nRUN pip install requests\nRUN apt-get install -y curl\n")
    result = subprocess.run(
        [str(HADOLINT), "--config", str(ROOT / ".hadolint.yaml"), str(sloppy)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode != 0
    assert {"DL3006", "DL3013", "DL3008"} <= set(re.findall(r"DL\d{4}", result.stdout))


def _args(dockerfile: Path) -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S*)$", dockerfile.read_text(), flags=re.MULTILINE))


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_oci_labels_and_no_secrets(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    for label in ("title", "description", "version", "revision", "created", "source", "licenses", "base.name"):
        assert f"org.opencontainers.image.{label}=" in text
    names = re.findall(r"^(?:ARG|ENV) (\w+)", text, flags=re.MULTILINE)
    assert not [n for n in names if re.search("TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL", n, re.IGNORECASE)]


def test_vllm_image_is_the_pinned_release_plus_the_kernels_plugin() -> None:
    dockerfile = ROOT / "images" / "vllm-glm" / "Dockerfile"
    assert _args(dockerfile)["VLLM_BASE"] == versions.VLLM_IMAGE
    text = dockerfile.read_text()
    assert "FROM ${VLLM_BASE}" in text
    assert "pip install --no-cache-dir --no-deps /opt/glm-kernels" in text  # never upgrades vLLM/torch


def test_kernels_package_is_the_vllm_plugin_the_image_installs() -> None:
    """images/vllm-glm installs kernels/ with --no-deps: it must be a vLLM plugin needing nothing but torch."""
    project = tomllib.loads((ROOT / "kernels" / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["vllm.general_plugins"] == {"glm_kernels": "glm_kernels.vllm_plugin:register"}
    assert [re.split(r"[<>=!~ ]", dep)[0] for dep in project["dependencies"]] == ["torch"]  # the base image's own


def test_operator_image_runs_glmctl_as_non_root() -> None:
    text = (ROOT / "images" / "operator" / "Dockerfile").read_text()
    assert re.search(r"^USER 65532:65532$", text, flags=re.MULTILINE)
    assert 'ENTRYPOINT ["glmctl"]' in text and 'CMD ["run"]' in text
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", _args(ROOT / "images" / "operator" / "Dockerfile")[
        "PYTHON_BASE"])


def _stub_docker(tmp_path: Path, *, buildx: bool, engine: bool) -> Path:
    log = tmp_path / "docker.log"
    stub = tmp_path / "docker"
    stub.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {log}\n'
        f'if [ "$1" = buildx ] && [ "$2" = version ]; then exit {0 if buildx else 1}; fi\n'
        f'if [ "$1" = info ]; then exit {0 if engine else 1}; fi\n'
        "exit 0\n"
    )
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return stub


def _make_images(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "images"], cwd=ROOT, capture_output=True, text=True, check=False,
        env={**os.environ, **env}, timeout=60,
    )


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("no-cli", "no '/nonexistent/docker' command"),
        ("no-buildx", "buildx' is not available"),
        ("no-engine", "no Docker engine reachable"),
    ],
)
def test_make_images_says_what_is_missing(tmp_path: Path, setup: str, message: str) -> None:
    if setup == "no-cli":
        docker = "/nonexistent/docker"
    else:
        docker = str(_stub_docker(tmp_path, buildx=setup != "no-buildx", engine=False))
    result = _make_images(DOCKER=docker)
    assert result.returncode != 0
    assert message in result.stderr
    log = tmp_path / "docker.log"
    assert "buildx build" not in (log.read_text() if log.exists() else "")


def test_make_images_builds_both_with_buildx(tmp_path: Path) -> None:
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "pyproject.toml").write_text("[project]\nname = 'glm-kernels'\n")
    docker = _stub_docker(tmp_path, buildx=True, engine=True)
    result = _make_images(DOCKER=str(docker), KERNELS=str(kernels), REGISTRY="registry.example/glm")
    assert result.returncode == 0, result.stderr
    builds = [line for line in (tmp_path / "docker.log").read_text().splitlines() if line.startswith("buildx build")]
    assert len(builds) == 2
    vllm_tag = versions.VLLM_IMAGE.rsplit(":", 1)[1]
    assert f"-f images/vllm-glm/Dockerfile -t registry.example/glm/vllm-glm:{vllm_tag}-glm.1 ." in builds[0]
    assert f"VLLM_BASE={versions.VLLM_IMAGE}" in builds[0] and f"KERNELS_DIR={kernels}" in builds[0]
    assert f"-f images/operator/Dockerfile -t registry.example/glm/glm-operator:{__version__} ." in builds[1]
    assert all(f"VERSION={__version__}" in b and "--platform linux/amd64 --load" in b for b in builds)


def test_dockerignore_sends_only_what_the_images_copy() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert lines[lines.index("*")] == "*"  # deny by default
    assert {"!pyproject.toml", "!README.md", "!operator/", "!kernels/"} <= set(lines)


@pytest.mark.slow
def test_operator_wheel_installs_into_a_fresh_virtualenv(tmp_path: Path) -> None:
    wheels, source = tmp_path / "wheels", tmp_path / "src"  # build from a copy: setuptools writes build/
    shutil.copytree(ROOT / "operator", source / "operator", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
         str(source)],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("glm_operator-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        members = archive.namelist()
    assert "glm_operator/py.typed" in members and "glm_operator/cli.py" in members
    assert not [m for m in members if m.startswith(("tests/", "charts/", "images/"))]

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True, text=True, check=False, timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    glmctl = env_dir / "bin" / "glmctl"
    clean_env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    helped = subprocess.run([str(glmctl), "--help"], capture_output=True, text=True, check=False, env=clean_env)
    assert helped.returncode == 0, helped.stderr
    assert all(cmd in helped.stdout for cmd in ("render", "validate", "crd", "version", "run"))
    version = subprocess.run([str(glmctl), "version"], capture_output=True, text=True, check=False, env=clean_env)
    assert version.returncode == 0 and versions.VLLM_IMAGE in version.stdout
    # the installed package is the wheel's, not this checkout's
    where = subprocess.run([str(python), "-c", "import glm_operator; print(glm_operator.__file__)"],
                           capture_output=True, text=True, check=True, env=clean_env, cwd=tmp_path)
    assert str(env_dir) in where.stdout
    shutil.rmtree(env_dir)
