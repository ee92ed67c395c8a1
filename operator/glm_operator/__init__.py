"""glm_operator — a Kubernetes operator for long-context GLM-5.x serving on vLLM.

Layers (one-way flow, see docs/DESIGN.md): ``api`` (typed spec, CRD) → ``plan`` (rules) →
``render`` (pure manifests) → ``cluster`` (server-side apply, prune) → ``observe`` (status).
``api``, ``plan`` and ``render`` never import kopf or the Kubernetes client.
"""

__version__ = "0.1.0"
