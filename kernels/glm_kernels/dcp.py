"""Decode context parallelism (DCP): round-robin KV sharding by token and the log-sum-exp (LSE) merge.

Sharding: token ``t`` lives on DCP rank ``(t // I) mod N`` for interleave size ``I`` (vLLM's
``--cp-kv-cache-interleave-size`` / ``cp_kv_cache_interleave_size``, default 1; ``I = block_size`` is block-level
interleave) and ``N = world_size`` (``--decode-context-parallel-size``). On its owner, token ``t`` takes local slot
``(t // (I*N)) * I + t mod I``, so each shard keeps its tokens in ascending order.

Merge: rank ``r`` attends over its shard and returns a partial output ``o_r`` and LSE ``L_r`` per (token, head);
``L = logsumexp_r L_r`` and ``out = sum_r exp(L_r - L) * o_r`` (SEED-FACTS "Why PCP, why DCP", vLLM
``vllm/v1/attention/ops/dcp.py``). Computed stably as ``M = max_r L_r``, ``w_r = exp(L_r - M)``,
``out = sum_r (w_r / sum w) * o_r`` and ``L = M + log(sum w)``: the weights are normalised by construction, so
LSEs of any magnitude (1e4 ... 3e38, where ``L_r - L`` would round to 0 in fp32) still sum to 1. Mathematically
equal to vLLM's ``exp(L_r - L)``; within fp32 rounding for ordinary LSEs.
An empty shard (no selected token) has ``L_r = -inf`` and contributes nothing,
even if its ``o_r`` holds NaN; NaN and ``+inf`` LSEs are treated as ``-inf``, as vLLM does. When every shard is
empty the result is ``out = 0`` and ``L = -inf``.
"""

from __future__ import annotations

import torch

__all__ = [
    "dcp_local_positions",
    "dcp_local_slot",
    "dcp_owner",
    "dcp_shard_len",
    "dcp_unshard",
    "lse_correct",
    "lse_correct_ref",
    "lse_merge",
    "lse_merge_ref",
]


def _check_layout(world_size: int, interleave: int) -> None:
    if world_size < 1:
        raise ValueError(f"world_size={world_size}: the DCP group needs at least one rank; pass world_size >= 1")
    if interleave < 1:
        raise ValueError(
            f"interleave={interleave}: cp_kv_cache_interleave_size must be >= 1 (1 = token-level round robin)"
        )


def _check_num_tokens(num_tokens: int) -> None:
    if num_tokens < 0:
        raise ValueError(f"num_tokens={num_tokens}: a sequence cannot have a negative length; pass num_tokens >= 0")


def _check_positions(positions: torch.Tensor) -> None:
    if positions.dtype.is_floating_point or positions.dtype.is_complex or positions.dtype == torch.bool:
        raise ValueError(f"positions.dtype={positions.dtype}: expected integer token positions; convert with .long()")
    if positions.numel() and int(positions.min()) < 0:
        raise ValueError(f"positions hold {int(positions.min())}: token positions are >= 0; drop padding (-1) first")


def dcp_owner(positions: torch.Tensor, world_size: int, interleave: int = 1) -> torch.Tensor:
    """DCP rank owning each token position: ``(t // interleave) % world_size`` (int64, same shape)."""
    _check_layout(world_size, interleave)
    _check_positions(positions)
    return torch.div(positions, interleave, rounding_mode="floor") % world_size


def dcp_local_slot(positions: torch.Tensor, world_size: int, interleave: int = 1) -> torch.Tensor:
    """Slot of each token position inside its owner's shard: ``(t // (I*N)) * I + t % I`` (int64)."""
    _check_layout(world_size, interleave)
    _check_positions(positions)
    return torch.div(positions, interleave * world_size, rounding_mode="floor") * interleave + positions % interleave


def dcp_shard_len(num_tokens: int, world_size: int, rank: int, interleave: int = 1) -> int:
    """Number of the first ``num_tokens`` tokens that ``rank`` stores (0 for an empty shard)."""
    _check_layout(world_size, interleave)
    _check_num_tokens(num_tokens)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank={rank}: must be in [0, world_size={world_size}); pass the rank within the DCP group")
    span = interleave * world_size
    full, rest = divmod(num_tokens, span)
    return full * interleave + min(max(rest - rank * interleave, 0), interleave)


def dcp_local_positions(num_tokens: int, world_size: int, rank: int, interleave: int = 1) -> torch.Tensor:
    """Positions (int64, ascending) of the first ``num_tokens`` tokens stored on ``rank``; may be empty."""
    _check_layout(world_size, interleave)
    _check_num_tokens(num_tokens)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank={rank}: must be in [0, world_size={world_size}); pass the rank within the DCP group")
    pos = torch.arange(num_tokens)
    return pos[dcp_owner(pos, world_size, interleave) == rank]


def dcp_unshard(shards: torch.Tensor, num_tokens: int, world_size: int, interleave: int = 1) -> torch.Tensor:
    """Reassemble the full sequence from all-gathered, padded shards.

    ``shards``: ``[world_size, max_shard_len, ...]`` (rank-major, shard ``r`` in its first
    ``dcp_shard_len(num_tokens, N, r, I)`` rows). Returns ``[num_tokens, ...]`` in position order.
    """
    _check_layout(world_size, interleave)
    _check_num_tokens(num_tokens)
    if shards.shape[0] != world_size:
        raise ValueError(f"shards.shape[0]={shards.shape[0]}: expected world_size={world_size} gathered shards")
    need = max((dcp_shard_len(num_tokens, world_size, r, interleave) for r in range(world_size)), default=0)
    if shards.ndim < 2 or shards.shape[1] < need:
        have = shards.shape[1] if shards.ndim >= 2 else 0
        raise ValueError(
            f"shards.shape[1]={have}: {num_tokens} tokens over world_size={world_size} (interleave={interleave}) "
            f"need {need} rows per shard; pad each shard to the longest dcp_shard_len"
        )
    pos = torch.arange(num_tokens, device=shards.device)
    owner = dcp_owner(pos, world_size, interleave)
    slot = dcp_local_slot(pos, world_size, interleave)
    return shards[owner, slot]


def _check_float(name: str, t: torch.Tensor) -> None:
    if not t.dtype.is_floating_point:
        raise ValueError(f"{name}.dtype={t.dtype}: expected a floating dtype (fp16/bf16/fp32/fp64); "
                         f"attention outputs and LSEs are real numbers, convert with .float()")


def _check_merge(outs: torch.Tensor, lses: torch.Tensor) -> None:
    if outs.ndim != 4:
        raise ValueError(f"outs.shape={tuple(outs.shape)}: expected [N, B, H, D] partial outputs, one per shard")
    if outs.shape[0] == 0:
        raise ValueError(f"outs.shape={tuple(outs.shape)}: the merge needs at least one shard (N >= 1); "
                         f"a DCP group has world_size >= 1 ranks, pass one partial per rank")
    if lses.shape != outs.shape[:3]:
        raise ValueError(
            f"lses.shape={tuple(lses.shape)}: expected [N, B, H] = {tuple(outs.shape[:3])} to match outs"
        )
    _check_float("outs", outs)
    _check_float("lses", lses)


def _check_correct(out: torch.Tensor, lses: torch.Tensor, rank: int) -> None:
    if out.ndim != 3 or lses.ndim != 3 or lses.shape[1:] != out.shape[:2]:
        raise ValueError(
            f"out.shape={tuple(out.shape)}, lses.shape={tuple(lses.shape)}: expected out [B, H, D], lses [N, B, H]"
        )
    if lses.shape[0] == 0:
        raise ValueError(f"lses.shape={tuple(lses.shape)}: the correction needs at least one shard (N >= 1); "
                         f"pass the all-gathered LSEs of every rank")
    if not 0 <= rank < lses.shape[0]:
        raise ValueError(f"rank={rank}: must be in [0, N={lses.shape[0]}); pass this rank's index in the DCP group")
    _check_float("out", out)
    _check_float("lses", lses)


def _sanitize(lses: torch.Tensor) -> torch.Tensor:
    lses = lses if lses.dtype == torch.float64 else lses.float()
    return torch.where(torch.isnan(lses) | (lses == float("inf")), torch.full_like(lses, float("-inf")), lses)


def lse_merge_ref(outs: torch.Tensor, lses: torch.Tensor, *, base_e: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch reference of the LSE merge.

    Args:
        outs: partial outputs ``[N, B, H, D]`` (any float dtype); NaN rows of empty shards are ignored.
        lses: partial LSEs ``[N, B, H]``; ``-inf`` for an empty shard (NaN/``+inf`` are treated as ``-inf``).
        base_e: natural-log LSEs (``False``: base 2, vLLM's ``is_lse_base_on_e``).

    Raises ``ValueError`` for ``N = 0`` shards (both backends) and for non-floating ``outs``/``lses``.

    Returns:
        ``(out [B, H, D] in outs.dtype, lse [B, H] float32)``; accumulation in float32 (float64 inputs stay float64).
    """
    _check_merge(outs, lses)
    acc_dtype = torch.float64 if outs.dtype == torch.float64 else torch.float32
    lses_s = _sanitize(lses).to(acc_dtype)
    lse_max = lses_s.max(dim=0).values
    lse_max = torch.where(lse_max == float("-inf"), torch.zeros_like(lse_max), lse_max)  # finite from here on
    exp = torch.exp if base_e else torch.exp2
    log = torch.log if base_e else torch.log2
    weight = exp(lses_s - lse_max)  # [N, B, H] in (0, 1], 0 for an empty shard; exact for any |L| (no L_r - L)
    total = weight.sum(dim=0)  # >= 1 unless every shard is empty
    lse = log(total) + lse_max  # -inf when every shard is empty
    factor = torch.where(total > 0, weight / total, torch.zeros_like(weight))[..., None]
    contrib = torch.where(factor == 0, torch.zeros((), dtype=acc_dtype), outs.to(acc_dtype) * factor)
    return contrib.sum(dim=0).to(outs.dtype), lse.to(torch.float64 if acc_dtype == torch.float64 else torch.float32)


def lse_correct_ref(
    out: torch.Tensor, lses: torch.Tensor, rank: int, *, base_e: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch reference of vLLM's ``correct_attn_out`` contract: rescale one rank's partial output.

    ``out`` ``[B, H, D]`` is this rank's partial output, ``lses`` ``[N, B, H]`` the all-gathered LSEs. Returns
    ``(exp(L_rank - L) * out, L)``; summing the returned outputs over ranks (all-reduce or reduce-scatter) gives
    the merged output. Empty shards give exact zeros.
    """
    _check_correct(out, lses, rank)
    outs = torch.zeros((lses.shape[0], *out.shape), dtype=out.dtype, device=out.device)
    outs[rank] = out
    return lse_merge_ref(outs, lses, base_e=base_e)


def lse_merge(
    outs: torch.Tensor, lses: torch.Tensor, *, base_e: bool = True, backend: str = "triton"
) -> tuple[torch.Tensor, torch.Tensor]:
    """LSE merge of ``N`` partial attention outputs (see module doc); shapes as ``lse_merge_ref``.

    ``backend="triton"`` runs one Triton program per (token, head) (on CPU only under ``TRITON_INTERPRET=1``);
    ``backend="torch"`` runs ``lse_merge_ref``.
    """
    if backend == "torch":
        return lse_merge_ref(outs, lses, base_e=base_e)
    if backend != "triton":
        raise ValueError(f"backend={backend!r}: choose 'triton' or 'torch'")
    _check_merge(outs, lses)
    from glm_kernels import triton_kernels  # noqa: PLC0415  (triton is optional)

    return triton_kernels.launch_lse_merge(outs, lses, base_e=base_e)


def lse_correct(
    out: torch.Tensor, lses: torch.Tensor, rank: int, *, base_e: bool = True, backend: str = "triton"
) -> tuple[torch.Tensor, torch.Tensor]:
    """In-place version of ``lse_correct_ref`` (vLLM ``correct_attn_out`` contract): ``out`` is overwritten.

    Returns ``(out, lse [B, H] in lses.dtype)``.
    """
    if backend == "torch":
        corrected, lse = lse_correct_ref(out, lses, rank, base_e=base_e)
        out.copy_(corrected)
        return out, lse.to(lses.dtype)
    if backend != "triton":
        raise ValueError(f"backend={backend!r}: choose 'triton' or 'torch'")
    _check_correct(out, lses, rank)
    from glm_kernels import triton_kernels  # noqa: PLC0415

    return triton_kernels.launch_lse_correct(out, lses, rank, base_e=base_e)
