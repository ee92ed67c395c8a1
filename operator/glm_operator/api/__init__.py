"""Typed API of ``serving.glm.dev/v1alpha1`` ``GLMDeployment``: spec, status, CRD generation.

Pure: imports neither kopf nor the Kubernetes client.
"""
