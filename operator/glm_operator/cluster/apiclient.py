"""The operator's Kubernetes API client: the official client with a default request timeout.

The official client sends every request without a timeout unless each call passes
``_request_timeout``; one half-open connection (an API server or load balancer that accepted the
request and went away) then blocks a reconcile thread forever, and with it every later reconcile
of that GLMDeployment (they are serialised per CR). Here every call gets a total timeout unless it
passes its own.
"""

from __future__ import annotations

import os
from typing import Any, Final

from kubernetes import client, config

from glm_operator import __version__
from glm_operator.cluster.env import env_seconds

#: Default total timeout of one API request, in seconds (override with ``GLM_API_TIMEOUT_SECONDS``).
#: Far above a healthy API server's latency for the operator's calls (a LIST of one CR's children,
#: one server-side apply), far below the point where a stuck reconcile goes unnoticed.
DEFAULT_TIMEOUT_SECONDS: Final = 60.0

TIMEOUT_ENV: Final = "GLM_API_TIMEOUT_SECONDS"
#: ``User-Agent`` of the operator's own requests (kopf's watches send ``kopf/<version>``).
USER_AGENT: Final = f"glm-operator/{__version__}"


class TimeoutApiClient(client.ApiClient):
    """``kubernetes.client.ApiClient`` whose requests time out after ``default_timeout_seconds``
    unless a call passes ``_request_timeout`` (a number or a ``(connect, read)`` pair, seconds).

    On timeout the call raises ``urllib3.exceptions.MaxRetryError`` caused by a
    ``ReadTimeoutError`` / ``ConnectTimeoutError`` once urllib3's retries are spent (each retry
    gets the full timeout).
    """

    def __init__(self, configuration: client.Configuration, default_timeout_seconds: float) -> None:
        super().__init__(configuration=configuration)
        self.default_timeout_seconds = default_timeout_seconds

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        """Every request of the generated client passes through here (kubernetes client >= 35)."""
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = self.default_timeout_seconds
        return super().call_api(*args, **kwargs)


def timeout_from_env() -> float:
    """``$GLM_API_TIMEOUT_SECONDS`` as a positive float, else :data:`DEFAULT_TIMEOUT_SECONDS`.

    Raises:
        ValueError: the variable is set but not a positive number (names the variable and value).
    """
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_SECONDS)


def make_api_client(timeout_seconds: float | None = None) -> TimeoutApiClient:
    """An API client from the in-cluster service account, else from ``$KUBECONFIG`` / ``~/.kube/config``.

    Args:
        timeout_seconds: default total timeout per request; ``None`` reads :func:`timeout_from_env`.

    Raises:
        ValueError: bad ``GLM_API_TIMEOUT_SECONDS``.
        kubernetes.config.ConfigException: no usable in-cluster config or kubeconfig.
    """
    timeout = timeout_from_env() if timeout_seconds is None else timeout_seconds
    cfg = client.Configuration()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"), client_configuration=cfg)  # type: ignore[no-untyped-call]
    api = TimeoutApiClient(configuration=cfg, default_timeout_seconds=timeout)
    api.user_agent = USER_AGENT  # audit logs tell the operator's calls apart
    return api
