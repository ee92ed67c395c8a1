"""Model and GPU profiles the planner knows.

Only the facts the renderer and the rules need today live here; the capacity planner extends
these profiles with layer counts, MLA/indexer dimensions and parameter counts.

Sources:
- context limits: ``max_position_embeddings`` of the Hugging Face configs (``reference/vllm.md``
  §2.2): GLM-5/5.1 202,752; GLM-5.2/5.3 1,048,576; DeepSeek-V3.2 163,840; Kimi K2.6 262,144
  (its model card). MTP layers: ``num_nextn_predict_layers`` = 1 for GLM-5.x and DeepSeek-V3.2;
  Kimi K2.6 ships none. Attention heads: 64 for GLM-5.x and Kimi K2.x, 128 for DeepSeek-V3.2
  (``num_attention_heads`` of the HF configs).
- ``sparse_mla``: DeepSeek sparse attention (lightning indexer + top-k sparse MLA). vLLM's
  FLASHMLA_SPARSE backend supports block size 64 only (``reference/vllm.md`` §0, §1.4).
- GPU node labels: NVIDIA GPU feature discovery's ``nvidia.com/gpu.product``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class ModelProfile:
    """Architecture facts of one model family.

    Attributes:
        name: profile key used in ``spec.model.profile``.
        max_context_tokens: the model's context limit (tokens).
        mla: Multi-head latent attention (one shared latent KV row per token).
        sparse_mla: DeepSeek sparse attention (indexer + top-k); implies ``mla``.
        sparse_mla_block_size: the only KV block size the sparse-MLA kernels accept (tokens).
        mtp_layers: multi-token-prediction layers in the checkpoint (``num_nextn_predict_layers``);
            0 means ``speculative.method: mtp`` is impossible.
        attention_heads: query heads (``num_attention_heads``); tensor parallelism splits them, so
            TP must divide this number.
        name_pattern: case-insensitive regex that Hugging Face repository ids of this model family
            match (used to catch a CR whose ``model.name`` and ``model.profile`` disagree).
    """

    name: str
    max_context_tokens: int
    mla: bool = True
    sparse_mla: bool = True
    sparse_mla_block_size: int = 64
    mtp_layers: int = 1
    attention_heads: int = 64
    name_pattern: str = ""


MODELS: Final[dict[str, ModelProfile]] = {
    p.name: p
    for p in (
        ModelProfile("glm-5.3", 1_048_576, name_pattern=r"glm-?5\.3"),
        ModelProfile("glm-5.2", 1_048_576, name_pattern=r"glm-?5\.2"),
        ModelProfile("glm-5.1", 202_752, name_pattern=r"glm-?5\.1"),
        ModelProfile("glm-5", 202_752, name_pattern=r"glm-?5(?![.\d])"),
        ModelProfile("deepseek-v3.2", 163_840, attention_heads=128, name_pattern=r"deepseek-v3\.2"),
        ModelProfile("kimi-k2.6", 262_144, sparse_mla=False, mtp_layers=0, name_pattern=r"kimi-k2\.6"),
    )
}


@dataclass(frozen=True)
class GpuProfile:
    """A GPU product.

    Attributes:
        name: ``spec.gpu.product``.
        node_label_value: value of the ``nvidia.com/gpu.product`` node label (GPU feature discovery).
        hbm_bytes: memory per GPU in bytes (H200: 141 GB HBM3e; B200: 180 GB HBM3e).
    """

    name: str
    node_label_value: str
    hbm_bytes: int


GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"

GPUS: Final[dict[str, GpuProfile]] = {
    "H200": GpuProfile("H200", "NVIDIA-H200", 141 * 10**9),
    "B200": GpuProfile("B200", "NVIDIA-B200", 180 * 10**9),
}
