"""DCP decode step: queries go to the KV shards, partial outputs are merged by their LSE.

Each DCP rank keeps the ``fp8_ds_mla`` rows (656 B, ``glm_kernels.sparse_mla``) and indexer keys of the tokens it
owns (round robin, ``glm_kernels.dcp``). Per decode token (SEED-FACTS "Why PCP, why DCP"; vLLM ``dcp.py``):

1. indexer: each rank scores the keys it owns, takes a local top-k, the candidates are all-gathered and the exact
   global top-k is taken from them (vLLM's "exact" DCP indexer contract);
2. per layer the token's new KV row is written to its owner's shard, every rank attends with the (replicated,
   ``dcp_q_replicate``) query over the selected rows it owns (``L_r = -inf`` when it owns none) and the partial
   outputs are combined, either ``comm="merge"`` (all-gather outputs and LSEs, ``lse_merge``) or
   ``comm="correct_allreduce"`` (all-gather LSEs, ``lse_correct`` = vLLM's ``correct_attn_out``, all-reduce:
   vLLM's ``cp_lse_ag_out_ar``).

``layer_inputs`` are the per-layer inputs of the decode tokens (teacher forcing: the tests feed the reference's
inputs so that the FP8 rows written in the step are byte-identical to the reference's; see kernels/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from glm_kernels import stack
from glm_kernels.dcp import dcp_local_positions, dcp_local_slot, dcp_owner, lse_correct, lse_merge
from glm_kernels.sparse_mla import (
    KV_LORA_RANK,
    ROW_BYTES,
    dequantize_fp8_ds_mla,
    indexer_topk,
    quantize_fp8_ds_mla,
    select_topk,
    sparse_mla_attention_ref,
)

__all__ = ["DecodeShard", "decode_step", "shard_request"]


@dataclass
class DecodeShard:
    """One request on one DCP rank: ``num_tokens`` tokens so far, this rank's rows per layer (uint8
    ``[n_owned, 656]``) and indexer keys (float64 ``[n_owned, Di]``)."""

    num_tokens: int
    rows: list[torch.Tensor]
    index_k: torch.Tensor


def shard_request(
    rows: list[torch.Tensor], index_k: torch.Tensor, world: int, rank: int, interleave: int
) -> DecodeShard:
    """This rank's shard of a request's full cache (rows per layer ``[T, 656]``, keys ``[T, Di]``)."""
    num_tokens = index_k.shape[0]
    owned = dcp_local_positions(num_tokens, world, rank, interleave)
    return DecodeShard(num_tokens, [r[owned] for r in rows], index_k[owned])


def _global_topk(
    weights: stack.StackWeights, x0: torch.Tensor, shard: DecodeShard, group: dist.ProcessGroup, interleave: int
) -> torch.Tensor:
    cfg = weights.config
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    pos = torch.tensor([shard.num_tokens - 1])
    local_pos = dcp_local_positions(shard.num_tokens, world, rank, interleave)
    iq, iw = stack.index_queries(weights, x0)
    local_idx, local_vals = indexer_topk(iq, iw, shard.index_k, pos, cfg.topk, key_positions=local_pos)
    ids = torch.where(local_idx >= 0, local_pos[local_idx.clamp(min=0)], local_idx) if local_pos.numel() else local_idx
    all_ids = [torch.empty_like(ids) for _ in range(world)]
    all_vals = [torch.empty_like(local_vals) for _ in range(world)]
    dist.all_gather(all_ids, ids, group=group)
    dist.all_gather(all_vals, local_vals, group=group)
    cand_ids, cand_vals = torch.cat(all_ids, dim=1), torch.cat(all_vals, dim=1)
    tie_ids = torch.where(cand_ids >= 0, cand_ids, torch.iinfo(torch.int64).max)
    col, _ = select_topk(cand_vals, cfg.topk, tie_ids)
    return torch.where(col >= 0, torch.gather(cand_ids, 1, col.clamp(min=0)), col)


def decode_step(
    weights: stack.StackWeights,
    x0: torch.Tensor,
    layer_inputs: list[torch.Tensor],
    shards: list[DecodeShard],
    group: dist.ProcessGroup,
    dtype: torch.dtype,
    *,
    interleave: int = 1,
    comm: str = "merge",
    backend: str = "torch",
) -> tuple[list[torch.Tensor], torch.Tensor, list[torch.Tensor]]:
    """One decode token per request on this DCP rank (collective over ``group``); updates ``shards`` in place.

    Args:
        weights: the stack; attention runs in ``dtype``.
        x0: layer-0 inputs ``[B, hidden]`` of the decode tokens (for the indexer).
        layer_inputs: per layer, the decode tokens' inputs ``[B, hidden]`` (teacher forcing).
        shards: per request, this rank's shard of the cache *before* the token; position of the token =
            ``shards[b].num_tokens``.
        comm: ``"merge"`` or ``"correct_allreduce"``; backend: ``"torch"`` or ``"triton"`` for the LSE kernels.

    Returns:
        ``(layer outputs [L] of [B, hidden], global top-k [B, topk] (-1 padded), new rows [L] of uint8 [B, 656]
        written by this rank (zeros where another rank owns the token))``.
    """
    if comm not in ("merge", "correct_allreduce"):
        raise ValueError(f"comm={comm!r}: choose 'merge' (all-gather outputs) or 'correct_allreduce' (vLLM ag+ar)")
    cfg = weights.config
    w = weights.to(dtype)
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    batch = len(shards)
    positions = torch.tensor([s.num_tokens for s in shards])
    owners = dcp_owner(positions, world, interleave)
    new_ik = stack.index_keys(weights, x0)
    topks = []
    for b, shard in enumerate(shards):
        if int(owners[b]) == rank:
            shard.index_k = torch.cat([shard.index_k, new_ik[b : b + 1]])
        shard.num_tokens += 1
        topks.append(_global_topk(weights, x0[b : b + 1], shard, group, interleave))
    topk = torch.cat(topks)
    outputs, written = [], []
    for li, layer in enumerate(w.layers):
        x_in = layer_inputs[li].to(dtype)
        q = stack.queries(layer, x_in, positions, cfg.rope_theta)
        new_rows = stack.kv_rows(layer, x_in, positions, cfg.rope_theta)
        packed = quantize_fp8_ds_mla(new_rows[:, :KV_LORA_RANK], new_rows[:, KV_LORA_RANK:])
        mine = torch.zeros((batch, ROW_BYTES), dtype=torch.uint8)
        o_parts, l_parts = [], []
        for b, shard in enumerate(shards):
            if int(owners[b]) == rank:
                shard.rows[li] = torch.cat([shard.rows[li], packed[b : b + 1]])
                mine[b] = packed[b]
            ids = topk[b : b + 1]
            owned = (ids >= 0) & (dcp_owner(ids.clamp(min=0), world, interleave) == rank)
            local = torch.where(owned, dcp_local_slot(ids.clamp(min=0), world, interleave), torch.full_like(ids, -1))
            kv = dequantize_fp8_ds_mla(shard.rows[li], dtype)
            o, lse = sparse_mla_attention_ref(q[b : b + 1], kv, local)
            o_parts.append(o)
            l_parts.append(lse)
        o_local, l_local = torch.cat(o_parts), torch.cat(l_parts)
        lses = [torch.empty_like(l_local) for _ in range(world)]
        dist.all_gather(lses, l_local, group=group)
        if comm == "merge":
            outs = [torch.empty_like(o_local) for _ in range(world)]
            dist.all_gather(outs, o_local, group=group)
            out, _ = lse_merge(torch.stack(outs), torch.stack(lses), backend=backend)
        else:
            out, _ = lse_correct(o_local, torch.stack(lses), rank, backend=backend)
            dist.all_reduce(out, group=group)
        outputs.append(stack.project(layer, x_in, out))
        written.append(mine)
    return outputs, topk, written
