// Package crdgen only pins the API packages whose CRDs the local cluster installs: controller-gen reads their
// kubebuilder markers (`controller-gen crd paths=<package>`), so they must be in this module's build list.
package crdgen

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	_ "sigs.k8s.io/gateway-api/apis/v1"
)
