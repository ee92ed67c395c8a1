// Command kwok-stages prints kwok's own default Stages (node initialise + heartbeat, pod ready/complete/delete)
// as one multi-document YAML for `kwok --config`. The kwok binary refuses to start without stages ("no stages
// found"); kwokctl passes these same embedded defaults. Printing them from the pinned module keeps upstream YAML
// out of our repository and in step with the kwok version we build.
package main

import (
	"fmt"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeat,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, doc := range docs {
		if i > 0 {
			fmt.Println("---")
		}
		fmt.Println(strings.TrimSpace(doc))
	}
}
