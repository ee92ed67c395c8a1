"""The only code that talks to the Kubernetes API server: server-side apply, prune, status writes."""
