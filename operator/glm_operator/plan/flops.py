"""The FLOP model of sparse-MLA serving (``docs/SEED-FACTS.md``, "Why PCP, why DCP").

- Sparse-MLA decode reads ``index_topk`` KV rows per query: each row is the 656-B ``fp8_ds_mla`` row
  plus a 4-B index (660 B). Each head adds its BF16 query (576 values) and output (512 values),
  2,176 B, and per row 2 × 576 (QK) + 2 × 512 (PV) = 2,176 FLOPs. 8 heads per GPU (TP8):
  35.7 MFLOP over 1.37 MB ≈ **26 FLOP/B**; 64 heads (PCP/DP, TP1): 285 MFLOP over 1.49 MB ≈ **191 FLOP/B**.
  Against the H200 ridge point (989 TFLOP/s ÷ 4.8 TB/s ≈ **206 FLOP/B**) TP8 leaves decode deeply
  memory-bound.
- Prefill from zero: the indexer scores every earlier token with ``indexer_heads × indexer_head_dim``
  MACs (quadratic in the prompt), the sparse MLA reads ``index_topk`` rows per query (linear). Both
  are counted on every GPU of one engine: TP splits the MLA heads but not the indexer, PCP splits
  both by token. Taking every query as reading top-k rows (true for all but the first top-k
  tokens), the crossover prompt length is
  ``2 · mla_layers · heads_per_gpu · topk · 2176 / (2 · indexer_layers · indexer_heads · indexer_head_dim)``:
  ≈ **32K** tokens under TP8 and ≈ **256K** under PCP8 for GLM-5.3 (21 indexer vs 78 MLA layers).
- PCP load balance: a causal query at position t attends to t + 1 tokens. Contiguous sharding over
  N ranks gives the last rank (2N − 1)/N × the mean work (1.875 at N = 8); the load-balanced 2N-chunk
  "V" sharding (rank i owns chunks i and 2N − 1 − i) gives every rank the same work (1.0).
- DCP all-gather in the prefill engine: each layer gathers the KV shards of the whole context into a
  temporary full copy, so each GPU receives (DCP − 1)/DCP of the context's rows of that layer.
"""

from __future__ import annotations

from glm_operator.plan.kv import BF16_BYTES
from glm_operator.plan.profiles import ModelProfile

#: Index bytes the sparse-MLA kernel reads per selected row (int32 top-k index).
INDEX_BYTES = 4


def sparse_mla_flops_per_row_per_head(model: ModelProfile) -> int:
    """FLOPs one head spends on one KV row: 2 × (kv_lora + rope) for QK + 2 × kv_lora for PV (2,176)."""
    return 2 * (model.kv_lora_rank + model.qk_rope_head_dim) + 2 * model.kv_lora_rank


def sparse_mla_query_bytes_per_head(model: ModelProfile) -> int:
    """BF16 query (kv_lora + rope values) + output (kv_lora values) of one head: 2,176 B."""
    return BF16_BYTES * (2 * model.kv_lora_rank + model.qk_rope_head_dim)


def sparse_mla_flop_per_byte(model: ModelProfile, heads_per_gpu: int, row_bytes: int) -> float:
    """Arithmetic intensity of one decode query's sparse-MLA attention on one GPU (FLOP/B).

    Args:
        model: the profile (needs ``index_topk`` > 0).
        heads_per_gpu: query heads one GPU serves (``attention_heads / TP``).
        row_bytes: KV row bytes (656 for ``fp8_ds_mla``).

    Raises:
        ValueError: the model has no sparse attention or ``heads_per_gpu`` < 1.
    """
    if not model.sparse_mla:
        raise ValueError(f"{model.name} has no sparse-MLA attention (index_topk 0)")
    if heads_per_gpu < 1:
        raise ValueError(f"heads_per_gpu={heads_per_gpu} must be >= 1")
    flops = heads_per_gpu * model.index_topk * sparse_mla_flops_per_row_per_head(model)
    bytes_read = model.index_topk * (row_bytes + INDEX_BYTES) + heads_per_gpu * sparse_mla_query_bytes_per_head(model)
    return flops / bytes_read


def indexer_flops_prefill(model: ModelProfile, prompt_tokens: int) -> float:
    """Indexer FLOPs of a prefill from zero over the whole model (causal: query t scores t + 1 keys)."""
    macs_per_pair = model.indexer_heads * model.indexer_head_dim
    pairs = prompt_tokens * (prompt_tokens + 1) / 2
    return 2.0 * macs_per_pair * pairs * model.indexer_layers


def sparse_mla_flops_prefill(model: ModelProfile, prompt_tokens: int, heads: int) -> float:
    """Sparse-MLA FLOPs of a prefill from zero for ``heads`` heads, every query reading top-k rows."""
    per_query = heads * model.index_topk * sparse_mla_flops_per_row_per_head(model)
    return float(per_query) * prompt_tokens * model.layers


def indexer_crossover_tokens(model: ModelProfile, tensor: int) -> float:
    """Prompt length (tokens) above which one GPU spends more FLOPs in the indexer than in sparse MLA
    during a prefill from zero. TP splits the MLA heads but repeats the indexer on every GPU, so the
    crossover falls by TP; PCP splits both by token and leaves it unchanged.

    GLM-5.3: ≈ 32.3K at TP8, ≈ 259K at TP1 (PCP8) — the seed's "≈ 32K" and "≈ 256K".

    Raises:
        ValueError: the model has no indexer, or ``tensor`` < 1.
    """
    if not model.sparse_mla:
        raise ValueError(f"{model.name} has no indexer")
    if tensor < 1:
        raise ValueError(f"tensor={tensor} must be >= 1")
    heads = model.attention_heads / tensor
    mla = heads * model.index_topk * sparse_mla_flops_per_row_per_head(model) * model.layers
    indexer_per_pair = model.indexer_heads * model.indexer_head_dim * model.indexer_layers  # 2 FLOP/MAC ÷ 2 causal
    return mla / indexer_per_pair


def causal_work(start: int, stop: int) -> int:
    """Attention work of queries ``start … stop-1`` under a causal mask: Σ (t + 1) key visits."""
    return (stop * (stop + 1) - start * (start + 1)) // 2


def pcp_imbalance(prompt_tokens: int, ranks: int, *, balanced: bool) -> float:
    """Max/mean causal attention work over ``ranks`` PCP ranks for one prompt.

    ``balanced``: 2N chunks, rank i owns chunks i and 2N − 1 − i (vLLM's PCP split); otherwise N
    contiguous slices. Chunk boundaries are ``prompt_tokens · c // (2N)``. 1,048,576 tokens over 8
    ranks: 1.875 contiguous, 1.0 balanced.

    Raises:
        ValueError: ``prompt_tokens`` < 1 or ``ranks`` < 1.
    """
    if prompt_tokens < 1 or ranks < 1:
        raise ValueError(f"prompt_tokens={prompt_tokens} and ranks={ranks} must both be >= 1")
    if balanced:
        chunks = 2 * ranks
        bounds = [prompt_tokens * c // chunks for c in range(chunks + 1)]
        work = [causal_work(bounds[i], bounds[i + 1]) + causal_work(bounds[chunks - 1 - i], bounds[chunks - i])
                for i in range(ranks)]
    else:
        bounds = [prompt_tokens * r // ranks for r in range(ranks + 1)]
        work = [causal_work(bounds[r], bounds[r + 1]) for r in range(ranks)]
    mean = sum(work) / ranks
    return max(work) / mean


def dcp_allgather_bytes_per_layer(context_tokens: int, row_bytes: int, dcp: int) -> float:
    """Bytes one GPU receives in one layer's DCP all-gather of ``context_tokens`` tokens (the cached
    context plus the new chunk): (DCP − 1)/DCP of the rows. 64K cached + 2K chunk at DCP8 with
    656-B rows: 38.8 MB per layer per step.

    Raises:
        ValueError: ``dcp`` < 1.
    """
    if dcp < 1:
        raise ValueError(f"dcp={dcp} must be >= 1")
    return context_tokens * row_bytes * (dcp - 1) / dcp
