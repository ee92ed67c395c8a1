"""Layout facts of one engine that both the rules and the renderer need."""

from __future__ import annotations

from glm_operator.api.spec import GLMDeploymentSpec, RoleSpec
from glm_operator.plan.profiles import model_profile


def needs_eager_pcp(spec: GLMDeploymentSpec, role: RoleSpec) -> bool:
    """Whether this engine must run without CUDA graphs: prefill context parallelism without DCP on a
    sparse-MLA model ("MRV2 sparse MLA PCP does not support CUDA graphs yet", vLLM 0.32.0
    ``v1/worker/gpu/pcp_manager.py``)."""
    p = role.parallelism
    return p.prefill_context > 1 and p.decode_context == 1 and model_profile(spec).sparse_mla
