#!/usr/bin/env bash
# `make images`: build images/vllm-glm and images/operator with docker buildx.
#
# Without a Docker CLI, the buildx plugin or a reachable engine it says which is missing and exits 1
# (CI and developer machines here have no engine; the Dockerfiles are linted by hadolint in tests).
#
# Environment:
#   DOCKER      docker CLI (default: docker)
#   REGISTRY    image repository prefix (default: ghcr.io/glm-serving)
#   PLATFORM    target platform (default: linux/amd64)
#   PUSH=1      push instead of loading into the local engine
#   VLLM_BASE   vLLM base image (default: glm_operator.versions.VLLM_IMAGE; add @sha256:… to pin)
#   PYTHON_BASE operator base image (default: the Dockerfile's pinned python slim tag)
#   KERNELS     glm_kernels source folder inside the repository (default: kernels)
set -euo pipefail
cd "$(dirname "$0")/.."

DOCKER=${DOCKER:-docker}
REGISTRY=${REGISTRY:-ghcr.io/glm-serving}
PLATFORM=${PLATFORM:-linux/amd64}
KERNELS=${KERNELS:-kernels}

fail() {
    echo "make images: $*" >&2
    exit 1
}

command -v "$DOCKER" > /dev/null 2>&1 || fail "no '$DOCKER' command: install Docker (or set DOCKER=...)"
"$DOCKER" buildx version > /dev/null 2>&1 || fail "'$DOCKER buildx' is not available: install the Docker buildx plugin"
"$DOCKER" info > /dev/null 2>&1 || fail "no Docker engine reachable ('$DOCKER info' failed): start one or set DOCKER_HOST"
[ -f "$KERNELS/pyproject.toml" ] || fail "$KERNELS/pyproject.toml not found: images/vllm-glm installs the glm_kernels package from it"

read -r VERSION VLLM_DEFAULT SERVING_IMAGE < <(PYTHONPATH=operator python3 -c \
    'import glm_operator, glm_operator.versions as v; print(glm_operator.__version__, v.VLLM_IMAGE, v.SERVING_IMAGE)')
VLLM_BASE=${VLLM_BASE:-$VLLM_DEFAULT}
REVISION=$(git rev-parse HEAD 2> /dev/null || echo unknown)
CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
OUTPUT=--load
[ -n "${PUSH:-}" ] && OUTPUT=--push

common=(--platform "$PLATFORM" "$OUTPUT" --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION"
        --build-arg "CREATED=$CREATED")
operator_args=()
[ -n "${PYTHON_BASE:-}" ] && operator_args=(--build-arg "PYTHON_BASE=$PYTHON_BASE")

set -x
"$DOCKER" buildx build "${common[@]}" --build-arg "VLLM_BASE=$VLLM_BASE" --build-arg "KERNELS_DIR=$KERNELS" \
    -f images/vllm-glm/Dockerfile -t "$REGISTRY/vllm-glm:${SERVING_IMAGE##*:}" .
"$DOCKER" buildx build "${common[@]}" "${operator_args[@]}" \
    -f images/operator/Dockerfile -t "$REGISTRY/glm-operator:$VERSION" .
