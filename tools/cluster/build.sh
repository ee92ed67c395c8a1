#!/usr/bin/env bash
# Builds the local cluster's binaries from the pinned Go modules under tools/cluster/, once.
#
#   tools/cluster/build.sh [COMPONENT...]     COMPONENT: kube etcd kwok crdgen (default: all)
#
# Each component is a Go module of ours (tools/cluster/<component>/go.mod) that pins the upstream module. Its
# binaries go to $GLM_CLUSTER_CACHE/<component>-<hash of go.mod+go.sum+this script>/ (default ~/.cache/glm-operator/cluster),
# outside git: a binary already there is never rebuilt, so a warm run costs a hash and a stat.
# Progress ("building …"/"cached …") goes to stderr; stdout gets one NAME=PATH line per binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${GLM_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/glm-operator/cluster}
command -v go >/dev/null || { echo "tools/cluster/build.sh: 'go' is not on PATH; install Go >= 1.26 (the module needs it)" >&2; exit 2; }

# component -> "binary=package:cold minutes on a quiet 2-core machine" (measured: see tools/cluster/README.md)
declare -A pkgs=(
  [kube]="kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver:4 kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager:1 kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler:1 kubectl=k8s.io/kubernetes/cmd/kubectl:1"
  [etcd]="etcd=go.etcd.io/etcd/server/v3:1"
  [kwok]="kwok=sigs.k8s.io/kwok/cmd/kwok:1 kwok-stages=./stages:1"
  [crdgen]="controller-gen=sigs.k8s.io/controller-tools/cmd/controller-gen:1 gateway-annotations=./gateway-annotations:1"
)
components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube etcd kwok crdgen)

for c in "${components[@]}"; do
  [ -n "${pkgs[$c]:-}" ] || { echo "tools/cluster/build.sh: unknown component '$c' (one of: ${!pkgs[*]})" >&2; exit 2; }
  mod="$here/$c"
  key=$(cat "$mod/go.mod" "$mod/go.sum" "$0" | sha256sum | cut -c1-12)   # this script's flags are part of the key
  out="$cache/$c-$key"
  mkdir -p "$out"
  ldflags=""
  if [ "$c" = kube ]; then
    v=$(cd "$mod" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
    major=${v#v}; minor=${major#*.}; minor=${minor%%.*}; major=${major%%.*}
    cv=k8s.io/component-base/version
    ldflags="-s -w -X $cv.gitVersion=$v -X $cv.gitMajor=$major -X $cv.gitMinor=$minor -X $cv.gitTreeState=clean -X $cv.buildDate=1970-01-01T00:00:00Z"
  else
    ldflags="-s -w"
  fi
  for entry in ${pkgs[$c]}; do
    name=${entry%%=*}; rest=${entry#*=}; pkg=${rest%:*}; mins=${rest##*:}
    if [ -x "$out/$name" ]; then
      echo "cached  $name ($c-$key)" >&2
      echo "$name=$out/$name"
      continue
    fi
    ver=$(cd "$mod" && go list -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "$pkg")
    echo "building $name (${ver:-ours}) — first time only, ~$mins min on 2 quiet cores, 3× that on busy ones (cache: $out)" >&2
    start=$(date +%s)
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
    mv "$out/$name.tmp" "$out/$name"
    echo "built   $name in $(( $(date +%s) - start )) s" >&2
    echo "$name=$out/$name"
  done
done
