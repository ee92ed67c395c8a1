"""Planning: model/GPU profiles, vLLM topology and P/D compatibility rules, the port plan.

Pure and fast: no I/O, imports neither kopf nor the Kubernetes client.
"""
