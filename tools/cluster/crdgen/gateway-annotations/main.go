// Command gateway-annotations prints, as JSON, the annotations Gateway API's release process puts on its CRDs,
// read from the pinned module's own constants. The API server refuses a CRD in a *.k8s.io group without the
// "api-approved.kubernetes.io" annotation, and controller-gen does not add it for Gateway API's types.
package main

import (
	"encoding/json"
	"os"

	"sigs.k8s.io/gateway-api/pkg/consts"
)

func main() {
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{
		"api-approved.kubernetes.io": consts.ApprovalLink,
		consts.BundleVersionAnnotation: consts.BundleVersion,
		consts.ChannelAnnotation:       "standard",
	})
}
