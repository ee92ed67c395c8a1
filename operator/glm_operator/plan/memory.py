"""Host memory of an engine pod: what the vLLM container requests (and is limited to)."""

from __future__ import annotations

from glm_operator.api.quantity import parse_bytes
from glm_operator.api.spec import GLMDeploymentSpec, RoleSpec


def host_pool_bytes_per_rank(role: RoleSpec) -> int:
    """HiSparse host pool of one DP rank in bytes (0 when HiSparse is off)."""
    if role.hi_sparse is None or not role.hi_sparse.enabled:
        return 0
    return parse_bytes(role.hi_sparse.host_pool_per_rank)


def offload_bytes_per_rank(role: RoleSpec) -> int:
    """CPU KV offload of one DP rank in bytes: ``cpuOffloadPerRank`` plus HiSparse's ``offloadPerRank``."""
    total = parse_bytes(role.cpu_offload_per_rank) if role.cpu_offload_per_rank is not None else 0
    if role.hi_sparse is not None and role.hi_sparse.enabled:
        total += parse_bytes(role.hi_sparse.offload_per_rank)
    return total


def host_memory_bytes(spec: GLMDeploymentSpec, role: RoleSpec) -> int:
    """Memory request = limit of the vLLM container, bytes.

    ``resources.memory`` (the engine itself) + per DP rank (``cpuOffloadPerRank`` or HiSparse
    ``hostPoolPerRank + offloadPerRank``) + ``resources.shm`` (tmpfs pages count against the
    container's memory cgroup). Seed system A: 256 GiB + 512 GiB + 32 GiB = 800 GiB per pod.
    """
    ranks = role.parallelism.data
    pools = host_pool_bytes_per_rank(role) + offload_bytes_per_rank(role)
    return parse_bytes(role.resources.memory) + ranks * pools + parse_bytes(role.resources.shm)
