"""Pure rendering: (parsed GLMDeployment) → Kubernetes objects as plain dicts.

Deterministic: the same input gives byte-identical YAML (sorted keys, no timestamps, no random
names). Imports neither kopf nor the Kubernetes client.
"""
