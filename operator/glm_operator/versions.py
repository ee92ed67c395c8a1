"""The one pinned version tuple of everything the operator renders but does not build.

Every image, API version and flag set that must agree with each other lives here, so that a
release of the operator is one consistent combination (mixing llm-d eras crashes at start-up:
an unknown sidecar flag kills the sidecar, an unknown EPP config apiVersion kills the EPP —
see ``reference/llm-d.md`` §0).

Sources:
- vLLM ``v0.32.0`` — the seed deployments (``docs/SEED-FACTS.md``) require vLLM ≥ 0.32.0.
- llm-d router ``v0.10.0`` (2026-08-17): images ``llm-d-router-endpoint-picker`` and
  ``llm-d-router-disagg-sidecar``; EPP config ``llm-d.ai/v1alpha1`` (``llm-d.ai/v1`` is rejected
  by v0.10.0); sidecar flags ``--port --model-server-port --kv-connector --secure-proxy``
  (``--connector`` was removed in v0.10.0, ``--vllm-port`` deprecated).
- Gateway API Inference Extension ``v1`` InferencePool (GAIE ≥ v1.1.0 for multi-port pools).
- Envoy ``distroless-v1.33.2`` — the proxy image of the llm-d standalone router chart.
"""

from __future__ import annotations

from typing import Final

VLLM_IMAGE: Final = "vllm/vllm-openai:v0.32.0"
VLLM_VERSION: Final = "0.32.0"
#: Our serving image (images/vllm-glm: the vLLM base + the glm_kernels plugin), as `make images` tags it
#: and as the examples reference it: ``<vLLM tag>-glm.<revision of our layer>``.
SERVING_IMAGE_REVISION: Final = 1
SERVING_IMAGE: Final = f"ghcr.io/glm-serving/vllm-glm:{VLLM_IMAGE.rsplit(':', 1)[1]}-glm.{SERVING_IMAGE_REVISION}"

LLMD_ROUTER_VERSION: Final = "v0.10.0"
EPP_IMAGE: Final = f"ghcr.io/llm-d/llm-d-router-endpoint-picker:{LLMD_ROUTER_VERSION}"
SIDECAR_IMAGE: Final = f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:{LLMD_ROUTER_VERSION}"
ENVOY_IMAGE: Final = "docker.io/envoyproxy/envoy:distroless-v1.33.2"

EPP_CONFIG_API_VERSION: Final = "llm-d.ai/v1alpha1"
INFERENCE_POOL_GROUP: Final = "inference.networking.k8s.io"
INFERENCE_POOL_API_VERSION: Final = f"{INFERENCE_POOL_GROUP}/v1"
GATEWAY_API_VERSION: Final = "gateway.networking.k8s.io/v1"

#: The llm-d P/D sidecar's flags at v0.10.0, by meaning. ``kv_connector`` value ``nixlv2`` maps to
#: vLLM's ``NixlConnector`` (``pkg/sidecar/proxy/options.go``).
SIDECAR_FLAGS: Final = {
    "listen_port": "--port",
    "model_server_port": "--model-server-port",
    "kv_connector": "--kv-connector",
    "secure_proxy": "--secure-proxy",
}
SIDECAR_KV_CONNECTOR: Final = "nixlv2"


def version_table() -> list[tuple[str, str]]:
    """Return the pinned tuple as ``(component, value)`` rows for the README and ``glmctl version``."""
    return [
        ("vLLM image (base of images/vllm-glm)", VLLM_IMAGE),
        ("llm-d endpoint picker", EPP_IMAGE),
        ("llm-d P/D sidecar", SIDECAR_IMAGE),
        ("sidecar flags", " ".join(f"{flag}=…" for flag in SIDECAR_FLAGS.values())),
        ("EndpointPickerConfig apiVersion", EPP_CONFIG_API_VERSION),
        ("InferencePool apiVersion", INFERENCE_POOL_API_VERSION),
        ("HTTPRoute apiVersion", GATEWAY_API_VERSION),
        ("Envoy (standalone router proxy)", ENVOY_IMAGE),
    ]
