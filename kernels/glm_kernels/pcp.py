"""Prefill context parallelism (PCP): load-balanced sharding of a prompt by token.

The prompt of ``num_tokens`` new tokens is cut into ``2N`` equal chunks for ``N = world_size`` ranks; rank ``i`` owns
chunk ``i`` and chunk ``2N-1-i`` (the "V" pattern: SEED-FACTS "Why PCP", Meta's context-parallelism paper
arXiv 2411.01783, vLLM's ``PCPManager.partition_inputs`` "DualChunkSwap").

Padding rule (documented, as vLLM does): when ``num_tokens`` is not a multiple of ``2N`` the prompt is padded at its
end to ``padded_tokens = 2N * chunk`` with ``chunk = ceil(num_tokens / 2N)``. Padding positions are ``>= num_tokens``
and are dropped: they carry no query and no key. So the last chunks may be short or empty, and for
``num_tokens < 2N`` some ranks own no token at all (an *empty shard*). Every rank still takes part in the
collectives with ``2 * chunk`` slots, the fixed per-rank slot count that makes the all-gather's tensors equal-sized.

Gathered layout: an all-gather of per-rank slot tensors ``[2*chunk, ...]`` (rank-major) gives ``[2N*chunk, ...]``
slots; slot ``r*2c + j`` holds position ``pcp_slot_positions(...)[r*2c + j]`` (``-1`` for padding).
``pcp_restore_index`` is the inverse permutation: ``full = gathered[restore]``.
"""

from __future__ import annotations

import torch

__all__ = [
    "causal_work",
    "pcp_chunk_size",
    "pcp_local_positions",
    "pcp_restore_index",
    "pcp_slot_positions",
]


def _check(num_tokens: int, world_size: int) -> None:
    if world_size < 1:
        raise ValueError(f"world_size={world_size}: the PCP group needs at least one rank; pass world_size >= 1")
    if num_tokens < 0:
        raise ValueError(f"num_tokens={num_tokens}: a prompt cannot have a negative length; pass num_tokens >= 0")


def pcp_chunk_size(num_tokens: int, world_size: int) -> int:
    """Tokens per chunk: ``ceil(num_tokens / (2 * world_size))`` (0 for an empty prompt)."""
    _check(num_tokens, world_size)
    return -(-num_tokens // (2 * world_size))


def pcp_slot_positions(num_tokens: int, world_size: int) -> torch.Tensor:
    """Prompt position held by each slot of the gathered layout.

    Returns an int64 tensor ``[2 * world_size * chunk]`` (rank-major, ``2 * chunk`` slots per rank: chunk ``r``
    then chunk ``2N-1-r``); padding slots hold ``-1``.
    """
    chunk = pcp_chunk_size(num_tokens, world_size)
    n2 = 2 * world_size
    ranks = torch.arange(world_size)
    # chunk ids per rank: [r, 2N-1-r]
    chunk_ids = torch.stack([ranks, n2 - 1 - ranks], dim=1)  # [N, 2]
    pos = chunk_ids[:, :, None] * chunk + torch.arange(chunk)[None, None, :]  # [N, 2, chunk]
    pos = pos.reshape(-1)
    return torch.where(pos < num_tokens, pos, torch.full_like(pos, -1))


def pcp_local_positions(num_tokens: int, world_size: int, rank: int) -> torch.Tensor:
    """Prompt positions (int64, ascending, padding dropped) owned by ``rank``; may be empty."""
    _check(num_tokens, world_size)  # blame world_size / num_tokens first: rank 0 of 0 ranks is world_size's fault
    if not 0 <= rank < world_size:
        raise ValueError(f"rank={rank}: must be in [0, world_size={world_size}); pass the rank within the PCP group")
    chunk = pcp_chunk_size(num_tokens, world_size)
    slots = pcp_slot_positions(num_tokens, world_size)[rank * 2 * chunk : (rank + 1) * 2 * chunk]
    return slots[slots >= 0]


def pcp_restore_index(num_tokens: int, world_size: int) -> torch.Tensor:
    """Inverse permutation: int64 ``[num_tokens]`` such that ``gathered[restore][t]`` is position ``t``.

    ``gathered`` is the rank-major all-gather of the per-rank ``[2 * chunk, ...]`` slot tensors (see module doc).
    """
    slots = pcp_slot_positions(num_tokens, world_size)
    restore = torch.empty(num_tokens, dtype=torch.int64)
    valid = torch.nonzero(slots >= 0).squeeze(1)
    restore[slots[valid]] = valid
    return restore


def causal_work(num_tokens: int, world_size: int, *, balanced: bool = True, cached_tokens: int = 0) -> torch.Tensor:
    """Causal attention work per rank, in (query, key) pairs: ``sum over owned positions t of (cached + t + 1)``.

    ``balanced=False`` is the naive contiguous split (rank ``i`` takes positions ``[i*L/N, (i+1)*L/N)``), whose
    max/mean tends to ``(2N-1)/N`` = 1.875 for N=8; balanced sharding gives exactly 1.0 when ``num_tokens`` is a
    multiple of ``2N`` (SEED-FACTS "Why PCP"). Returns int64 ``[world_size]``.
    """
    _check(num_tokens, world_size)
    if cached_tokens < 0:
        raise ValueError(f"cached_tokens={cached_tokens}: must be >= 0; pass the number of already cached tokens")
    work = torch.zeros(world_size, dtype=torch.int64)
    for rank in range(world_size):
        if balanced:
            pos = pcp_local_positions(num_tokens, world_size, rank)
        else:
            per = -(-num_tokens // world_size)
            pos = torch.arange(rank * per, min((rank + 1) * per, num_tokens))
        work[rank] = int((pos + 1 + cached_tokens).sum())
    return work
