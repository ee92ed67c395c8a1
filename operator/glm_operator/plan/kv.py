"""KV-cache bytes per token, by layer kind and KV dtype, and how parallelism shards them.

Layouts (``reference/vllm.md`` §2.3, FlashMLA README, vLLM ``flashmla_sparse.py``):

- sparse-MLA row, ``fp8_ds_mla``: ``kv_lora_rank`` FP8 values + one FP32 scale per 128 of them +
  ``qk_rope_head_dim`` BF16 RoPE values → 512 + 16 + 128 = **656 B** (GLM-5.x, DeepSeek-V3.2). vLLM
  rewrites any ``fp8*`` KV dtype of a sparse-MLA model to this layout;
- dense-MLA row, FP8: ``kv_lora_rank + qk_rope_head_dim`` FP8 values → 576 B (per-tensor scale);
- MLA row, BF16 (``bfloat16``/``auto``): (512 + 64) × 2 = 1,152 B;
- indexer key, always FP8 with one FP32 scale per 128 values (vLLM ``DeepseekV32IndexerCache``):
  128 + 4 = **132 B** per indexer layer, whatever ``--kv-cache-dtype`` says;
- each MTP layer holds one MLA row and, on a sparse-MLA model, one indexer key: 656 + 132 = 788 B.

GLM-5.2/5.3: 78 × 656 + 21 × 132 + 788 = **54,728 B/token**; GLM-5/5.1 (indexer on all 78 layers):
62,252 B/token (``docs/SEED-FACTS.md``).

Sharding: DCP shards *both* the MLA cache and the indexer cache by token (vLLM #46076), so a GPU
stores 1/DCP of every token. TP does not shard an MLA cache (one latent row serves every head);
PCP replicates it after the per-layer all-gather; DP ranks hold different requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from glm_operator.plan.profiles import ModelProfile

#: Values per FP32 scale in the FP8 layouts (FlashMLA ``fp8_ds_mla``, DeepSeek indexer ``k_scale_cache``).
FP8_SCALE_GROUP = 128
FP32_BYTES = 4
BF16_BYTES = 2


@dataclass(frozen=True)
class KvBytesPerToken:
    """KV bytes one token occupies across the whole model (all layers, all DCP shards together).

    Attributes:
        mla: MLA rows of every decoder and MTP layer (bytes/token) — what HiSparse can keep in host memory.
        indexer: indexer keys of every indexer layer and MTP layer (bytes/token) — always on the GPU.
        mla_row: bytes of one MLA row (one layer).
        indexer_row: bytes of one indexer key (one layer; 0 without sparse attention).
    """

    mla: int
    indexer: int
    mla_row: int
    indexer_row: int

    @property
    def total(self) -> int:
        """All KV bytes of one token (54,728 for GLM-5.3 in FP8)."""
        return self.mla + self.indexer


def mla_row_bytes(model: ModelProfile, kv_dtype: str) -> int:
    """Bytes of one token's MLA row in one layer for ``--kv-cache-dtype`` ``kv_dtype``.

    Raises:
        ValueError: for a KV dtype the planner has no layout for.
    """
    if kv_dtype in ("fp8", "fp8_ds_mla"):
        if model.sparse_mla:
            scales = -(-model.kv_lora_rank // FP8_SCALE_GROUP) * FP32_BYTES
            return model.kv_lora_rank + scales + model.qk_rope_head_dim * BF16_BYTES
        return model.kv_lora_rank + model.qk_rope_head_dim
    if kv_dtype in ("bfloat16", "auto"):
        return (model.kv_lora_rank + model.qk_rope_head_dim) * BF16_BYTES
    raise ValueError(f"kv dtype {kv_dtype!r} has no planner layout; use fp8, fp8_ds_mla, bfloat16 or auto")


def indexer_row_bytes(model: ModelProfile) -> int:
    """Bytes of one token's indexer key in one indexer layer (132 for a 128-dim indexer; 0 without one)."""
    if not model.sparse_mla:
        return 0
    return model.indexer_head_dim + -(-model.indexer_head_dim // FP8_SCALE_GROUP) * FP32_BYTES


def kv_bytes_per_token(model: ModelProfile, kv_dtype: str, *, mtp: bool = True) -> KvBytesPerToken:
    """KV bytes per token of the whole model.

    Args:
        model: the profile.
        kv_dtype: ``spec.kvCache.dtype``.
        mtp: whether the MTP layer(s) run (speculative decoding with MTP); their KV counts then.
    """
    mla_row = mla_row_bytes(model, kv_dtype)
    idx_row = indexer_row_bytes(model)
    mtp_layers = model.mtp_layers if mtp else 0
    mla = (model.layers + mtp_layers) * mla_row
    indexer = (model.indexer_layers + (mtp_layers if model.sparse_mla else 0)) * idx_row
    return KvBytesPerToken(mla=mla, indexer=indexer, mla_row=mla_row, indexer_row=idx_row)


def kv_bytes_per_gpu(tokens: int, bytes_per_token: int, dcp: int) -> float:
    """KV bytes one GPU stores for ``tokens`` tokens when DCP shards them over ``dcp`` GPUs
    (53.4 GiB for 1,048,576 GLM-5.3 tokens → 6.7 GiB per GPU at DCP8)."""
    if dcp < 1:
        raise ValueError(f"dcp={dcp} must be >= 1")
    return tokens * bytes_per_token / dcp
