"""Reference sparse-MLA attention over the 656-byte ``fp8_ds_mla`` KV row.

Row layout (SEED-FACTS "KV arithmetic per token"; FlashMLA's FP8 sparse format; vLLM cache shape
``(num_blocks, block_size, 656)``), per token:

=========  =======  ===========================================================
bytes      count    content
=========  =======  ===========================================================
0..511     512      latent (NoPE) values, FP8 e4m3, in 4 tiles of 128 values
512..527   4        FP32 scales, one per 128-value tile (value = fp8 * scale)
528..655   64       RoPE values, BF16, not quantized
=========  =======  ===========================================================

Scale rule (ours): ``scale = amax(|tile|) / 448`` (448 = largest finite e4m3 value), 1.0 for an all-zero tile.

Attention (MQA form of MLA, ``sparse_mla_force_mqa``): all ``H`` query heads share each KV row. Scores use the full
576-dim row (QK: 512 latent + 64 RoPE), values are the 512 latent dims (PV). Each query attends only to the rows
named by its top-k indices (``-1`` = no token, e.g. a prompt shorter than ``index_topk``).
"""

from __future__ import annotations

import torch

__all__ = [
    "FP8_E4M3_MAX",
    "KV_LORA_RANK",
    "QK_DIM",
    "QUANT_TILE",
    "ROPE_DIM",
    "ROW_BYTES",
    "dequantize_fp8_ds_mla",
    "gather_topk",
    "indexer_topk",
    "quantize_fp8_ds_mla",
    "sparse_mla_attention_ref",
]

#: Latent (NoPE) width, GLM-5.x ``kv_lora_rank`` (reference/vllm.md §2.2).
KV_LORA_RANK = 512
#: RoPE width, GLM-5.x ``qk_rope_head_dim``.
ROPE_DIM = 64
#: QK width of the MQA form: latent + RoPE.
QK_DIM = KV_LORA_RANK + ROPE_DIM
#: Values per FP32 scale (FlashMLA: four 1x128 tiles).
QUANT_TILE = 128
#: Bytes per row: 512 x 1 (fp8) + 4 x 4 (fp32 scales) + 64 x 2 (bf16) = 656 (vLLM ``FP8_DS_MLA_ROW_BYTES``).
ROW_BYTES = KV_LORA_RANK + 4 * (KV_LORA_RANK // QUANT_TILE) + 2 * ROPE_DIM
#: Largest finite float8 e4m3fn value.
FP8_E4M3_MAX = 448.0

_SCALE_START = KV_LORA_RANK
_ROPE_START = KV_LORA_RANK + 4 * (KV_LORA_RANK // QUANT_TILE)


def quantize_fp8_ds_mla(latent: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """Pack rows into the ``fp8_ds_mla`` layout.

    Args:
        latent: ``[T, 512]`` float latent (NoPE) values.
        rope: ``[T, 64]`` float RoPE values (stored as bf16).

    Returns:
        uint8 ``[T, 656]``.

    Raises ``ValueError`` when ``latent`` holds inf or NaN (it would poison the whole 128-value tile's scale).
    """
    if latent.ndim != 2 or latent.shape[1] != KV_LORA_RANK:
        raise ValueError(f"latent.shape={tuple(latent.shape)}: expected [T, {KV_LORA_RANK}] (kv_lora_rank)")
    if rope.shape != (latent.shape[0], ROPE_DIM):
        raise ValueError(f"rope.shape={tuple(rope.shape)}: expected [T={latent.shape[0]}, {ROPE_DIM}]")
    finite = torch.isfinite(latent.detach()).all(dim=1)
    if not bool(finite.all()):
        row = int(torch.nonzero(~finite)[0, 0])
        raise ValueError(
            f"latent holds non-finite values (first at row {row}): an inf/NaN makes its tile's scale inf/NaN and "
            f"every value of the 128-value tile dequantize to NaN; fix the producer (or mask the row) before caching"
        )
    t = latent.shape[0]
    tiles = latent.detach().float().reshape(t, KV_LORA_RANK // QUANT_TILE, QUANT_TILE)
    amax = tiles.abs().amax(dim=2)
    scales = torch.where(amax > 0, amax / FP8_E4M3_MAX, torch.ones_like(amax))  # [T, 4] float32
    fp8 = (tiles / scales[:, :, None]).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    rows = torch.empty((t, ROW_BYTES), dtype=torch.uint8, device=latent.device)
    rows[:, :_SCALE_START] = fp8.reshape(t, KV_LORA_RANK).view(torch.uint8)
    rows[:, _SCALE_START:_ROPE_START] = scales.contiguous().view(torch.uint8).reshape(t, _ROPE_START - _SCALE_START)
    rows[:, _ROPE_START:] = rope.detach().to(torch.bfloat16).contiguous().view(torch.uint8).reshape(t, 2 * ROPE_DIM)
    return rows


def dequantize_fp8_ds_mla(rows: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Unpack uint8 ``[..., 656]`` rows to ``[..., 576]`` values in ``dtype`` (latent first, then RoPE)."""
    if rows.dtype != torch.uint8 or rows.shape[-1] != ROW_BYTES:
        raise ValueError(f"rows: dtype={rows.dtype}, shape={tuple(rows.shape)}: expected uint8 [..., {ROW_BYTES}]")
    lead = rows.shape[:-1]
    flat = rows.reshape(-1, ROW_BYTES)
    n = flat.shape[0]
    fp8 = flat[:, :_SCALE_START].contiguous().view(torch.float8_e4m3fn).to(dtype)
    scales = flat[:, _SCALE_START:_ROPE_START].contiguous().view(torch.float32).to(dtype)
    latent = (fp8.reshape(n, KV_LORA_RANK // QUANT_TILE, QUANT_TILE) * scales[:, :, None]).reshape(n, KV_LORA_RANK)
    rope = flat[:, _ROPE_START:].contiguous().view(torch.bfloat16).to(dtype)
    return torch.cat([latent, rope], dim=1).reshape(*lead, QK_DIM)


def gather_topk(rows: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows named by top-k indices.

    Args:
        rows: ``[T, ...]`` KV rows (any dtype, e.g. uint8 ``fp8_ds_mla`` or dequantized floats).
        indices: int64 ``[Q, K]`` row indices into ``rows``, ``-1`` for none.

    Returns:
        ``(gathered [Q, K, ...] with zeros at invalid entries, valid bool [Q, K])``.
    """
    if indices.ndim != 2:
        raise ValueError(f"indices.shape={tuple(indices.shape)}: expected [Q, K] (-1 = no token)")
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype == torch.bool:
        raise ValueError(f"indices.dtype={indices.dtype}: expected integer row indices (int64); convert with .long()")
    if indices.numel() and int(indices.max()) >= rows.shape[0]:
        raise ValueError(f"indices hold {int(indices.max())} >= number of rows {rows.shape[0]}; "
                         f"index rows of this shard only")
    if indices.numel() and int(indices.min()) < -1:
        raise ValueError(f"indices hold {int(indices.min())}: row indices are >= 0, or -1 for no token; "
                         f"map other sentinels to -1")
    valid = indices >= 0
    safe = torch.where(valid, indices, torch.zeros_like(indices))
    if rows.shape[0] == 0:
        gathered = torch.zeros((*indices.shape, *rows.shape[1:]), dtype=rows.dtype, device=rows.device)
    else:
        gathered = rows[safe]
    mask = valid.reshape(*valid.shape, *([1] * (gathered.ndim - 2)))
    return torch.where(mask, gathered, torch.zeros((), dtype=rows.dtype)), valid


def sparse_mla_attention_ref(
    q: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor, *, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse MLA (MQA form) over the selected rows, computed in ``q.dtype``.

    Args:
        q: ``[Q, H, 576]`` queries (512 latent + 64 RoPE dims).
        kv: ``[T, 576]`` KV rows in a float dtype (dequantize ``fp8_ds_mla`` rows first), or uint8 ``[T, 656]``
            rows, which are dequantized to ``q.dtype``.
        indices: int64 ``[Q, K]`` rows of ``kv`` per query, ``-1`` = none; values ``< -1`` raise ``ValueError``.
            Repeated indices are **not** deduplicated: a row named twice is read twice and counts twice in the
            softmax (its weight doubles), as FlashMLA's sparse kernel would read it twice. Deduplicate upstream
            (the indexer's top-k never repeats a row) if set semantics are wanted.
        scale: softmax scale; default ``1/sqrt(576)``.

    Returns:
        ``(out [Q, H, 512], lse [Q, H])`` in ``q.dtype``; natural-log LSE of the scaled scores. A query with no valid
        index gets ``out = 0`` and ``lse = -inf`` (an empty DCP shard).
    """
    if q.ndim != 3 or q.shape[2] != QK_DIM:
        raise ValueError(f"q.shape={tuple(q.shape)}: expected [Q, H, {QK_DIM}] (512 latent + 64 RoPE)")
    if kv.dtype == torch.uint8:
        kv = dequantize_fp8_ds_mla(kv, q.dtype)
    if kv.ndim != 2 or kv.shape[1] != QK_DIM:
        raise ValueError(f"kv.shape={tuple(kv.shape)}: expected [T, {QK_DIM}] or uint8 [T, {ROW_BYTES}]")
    if indices.shape[0] != q.shape[0]:
        raise ValueError(f"indices.shape={tuple(indices.shape)}: expected [Q={q.shape[0]}, K]")
    scale = QK_DIM**-0.5 if scale is None else scale
    rows, valid = gather_topk(kv.to(q.dtype), indices)  # [Q, K, 576]
    scores = torch.einsum("qhd,qkd->qhk", q, rows) * scale
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=2)  # [Q, H]; -inf when no valid row
    probs = torch.exp(scores - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[:, :, None])
    out = torch.einsum("qhk,qkd->qhd", probs, rows[:, :, :KV_LORA_RANK])
    return out, lse


def indexer_topk(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    k_idx: torch.Tensor,
    query_positions: torch.Tensor,
    topk: int,
    key_positions: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lightning-indexer style selection (DeepSeek-V3.2): ``score[q, t] = sum_h w[q, h] * relu(q_idx[q, h] . k[t])``
    over causal keys (``key position <= query position``), then the ``topk`` best (ties: lower key position).

    Args:
        q_idx: ``[Q, Hi, Di]`` indexer queries; weights: ``[Q, Hi]``; k_idx: ``[T, Di]`` indexer keys.
        query_positions: int64 ``[Q]``; key_positions: int64 ``[T]`` (default ``arange(T)``).
        topk: ``index_topk`` (2,048 for GLM-5.x; scaled down in tests).

    Returns:
        ``(indices int64 [Q, topk] into k_idx rows, ascending, -1 padded; scores [Q, topk] of the same entries,
        -inf padded)``. Computed in the inputs' dtype (the tests use float64 so selection is exact).
    """
    if topk < 1:
        raise ValueError(f"topk={topk}: must be >= 1 (index_topk)")
    if q_idx.ndim != 3:
        raise ValueError(f"q_idx.shape={tuple(q_idx.shape)}: expected [Q, Hi, Di] indexer queries")
    q_count, heads, dim = q_idx.shape
    if weights.shape != (q_count, heads):
        raise ValueError(f"weights.shape={tuple(weights.shape)}: expected [Q={q_count}, Hi={heads}] (one weight per "
                         f"query and indexer head)")
    if k_idx.ndim != 2 or k_idx.shape[1] != dim:
        raise ValueError(f"k_idx.shape={tuple(k_idx.shape)}: expected [T, Di={dim}] (same head dim as q_idx)")
    if query_positions.shape != (q_count,):
        raise ValueError(f"query_positions.shape={tuple(query_positions.shape)}: expected [Q={q_count}], one "
                         f"position per query row of q_idx")
    key_positions = torch.arange(k_idx.shape[0]) if key_positions is None else key_positions
    if key_positions.shape != (k_idx.shape[0],):
        raise ValueError(f"key_positions.shape={tuple(key_positions.shape)}: expected [T={k_idx.shape[0]}], one "
                         f"position per row of k_idx")
    scores = torch.einsum("qhd,td->qht", q_idx, k_idx).relu()
    scores = torch.einsum("qht,qh->qt", scores, weights)
    causal = key_positions[None, :] <= query_positions[:, None]
    scores = scores.masked_fill(~causal, float("-inf"))
    return select_topk(scores, topk, key_positions.expand(scores.shape[0], -1))


def select_topk(
    scores: torch.Tensor, topk: int, ids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``topk`` best columns per row of ``scores`` ``[Q, T]`` (``-inf`` = not a candidate).

    Ties (e.g. ReLU scores of exactly 0) go to the lower id (``ids [Q, T]``, default the column index), so the
    choice does not depend on how many candidates there are or how they are ordered, as a distributed selection
    needs. ``topk >= 0`` (0 gives an empty ``[Q, 0]`` selection). Returns ``(columns int64 [Q, topk] ordered by
    ascending id, -1 padded; their scores, -inf padded)``.
    """
    if topk < 0:
        raise ValueError(f"topk={topk}: must be >= 0 (number of columns to keep per row)")
    if scores.ndim != 2:
        raise ValueError(f"scores.shape={tuple(scores.shape)}: expected [Q, T] (-inf = not a candidate)")
    if ids is not None and ids.shape != scores.shape:
        raise ValueError(f"ids.shape={tuple(ids.shape)}: expected the shape of scores {tuple(scores.shape)}; "
                         f"expand a [T] id row with .expand(Q, -1)")
    q_count, t_count = scores.shape
    k = min(topk, t_count)
    vals = torch.full((q_count, topk), float("-inf"), dtype=scores.dtype)
    idx = torch.full((q_count, topk), -1, dtype=torch.int64)
    if k:
        ids = torch.arange(t_count).expand(q_count, t_count) if ids is None else ids
        by_id = torch.argsort(ids, dim=1, stable=True)
        by_score = torch.argsort(torch.gather(scores, 1, by_id), dim=1, descending=True, stable=True)
        top_idx = torch.gather(by_id, 1, by_score[:, :k])
        top_vals = torch.gather(scores, 1, top_idx)
        top_idx = torch.where(top_vals == float("-inf"), torch.full_like(top_idx, -1), top_idx)
        key = torch.where(top_idx < 0, torch.iinfo(torch.int64).max, torch.gather(ids, 1, top_idx.clamp(min=0)))
        order = torch.argsort(key, dim=1, stable=True)
        idx[:, :k] = torch.gather(top_idx, 1, order)
        vals[:, :k] = torch.gather(top_vals, 1, order)
    return idx, vals
