#!/usr/bin/env bash
# Create .oracle/vllm-<release>: `vllm==<release> --no-deps` plus oracle/requirements.txt (--no-deps).
# Wheels are cached in ~/.cache/glm-operator/vllm-wheels (vLLM) and pip's own cache. Idempotent: a stamp file
# names the release and the requirements' hash.
set -euo pipefail
release="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.oracle/vllm-$release"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/glm-operator/vllm-wheels"
stamp="$venv/.installed-$(sha256sum "$root/oracle/requirements.txt" | cut -c1-12)"
[ -f "$stamp" ] && exit 0
mkdir -p "$cache"
ls "$cache"/vllm-"$release"-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps -d "$cache" "vllm==$release"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --no-deps "$(ls "$cache"/vllm-"$release"-*.whl | head -1)"
"$venv/bin/pip" install -q --no-deps -r "$root/oracle/requirements.txt"
touch "$stamp"
