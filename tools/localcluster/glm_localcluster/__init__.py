"""A real local Kubernetes control plane for development and end-to-end tests.

etcd, kube-apiserver (RBAC, ServiceAccount admission, CRD schemas and CEL), kube-controller-manager,
kube-scheduler and kwok (fake H200 nodes whose pods become Running and Ready), all built from pinned Go modules by
``tools/cluster/build.sh`` and run as local processes on 127.0.0.1. Not part of the operator wheel or its images:
``make`` installs this package into the development virtualenv only.
"""
