"""Model and GPU profiles the planner knows.

Sources:
- architecture: the Hugging Face ``config.json`` of each family (``reference/vllm.md`` §2.2):
  GLM-5/5.1 (zai-org/GLM-5-FP8) and GLM-5.2/5.3 share 78 layers (3 dense + 75 MoE), hidden 6144,
  64 heads, q_lora_rank 2048, kv_lora_rank 512, qk_nope/rope/v 192/64/256, 256 routed experts + 1
  shared of moe_intermediate 2048, vocab 154,880, indexer 32 heads × 128 dims with top-k 2048;
  GLM-5.2/5.3 have IndexShare (``index_topk_freq`` 4, offset 3 → 21 indexer layers), GLM-5/5.1
  an indexer on every layer. DeepSeek-V3.2-Exp (``config_671B_v3.2.json``): 61 layers (3 dense),
  hidden 7168, 128 heads, q_lora_rank 1536, qk_nope/rope/v 128/64/128, indexer 64 heads on every
  layer, vocab 129,280. Kimi K2.x (moonshotai/Kimi-K2 config, DeepSeek-V3 architecture without
  the indexer): 61 layers (1 dense), hidden 7168, 64 heads, 384 routed experts, vocab 163,840, no
  MTP layer. Dense-layer ``intermediate_size``: 12,288 (GLM-5.x), 18,432 (DeepSeek-V3.x, Kimi K2.x).
- context limits: ``max_position_embeddings``: GLM-5/5.1 202,752; GLM-5.2/5.3 1,048,576;
  DeepSeek-V3.2 163,840; Kimi K2.6 262,144 (model card).
- ``sparse_mla``: DeepSeek sparse attention (lightning indexer + top-k sparse MLA). vLLM's
  FLASHMLA_SPARSE backend supports block size 64 only (``reference/vllm.md`` §0, §1.4).
- default weight format = what the family's repository without a format marker holds: GLM-5.x BF16
  (zai-org/GLM-5.3; the FP8 checkpoint is ``-FP8``), DeepSeek-V3.2 FP8 (native), Kimi K2.x INT4
  (native QAT). Seed system A runs GLM-5.3-FP8, seed system B Kimi-K2.6-NVFP4.
- GPUs: NVIDIA datasheets (H200 SXM: 141 GB HBM3e, 4.8 TB/s, 989 TFLOP/s dense BF16; B200: 180 GB
  HBM3e, 8 TB/s, 2,250 TFLOP/s dense BF16). ``hbm_bytes`` is what the driver reports as total
  memory (``nvidia-smi``: 143,771 MiB on H200, 183,359 MiB on B200), the figure vLLM's
  ``--gpu-memory-utilization`` is a fraction of. GPU node labels: NVIDIA GPU feature discovery's
  ``nvidia.com/gpu.product``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from glm_operator.api.quantity import parse_bytes
from glm_operator.api.spec import GLMDeploymentSpec

MIB: Final = 2**20


@dataclass(frozen=True)
class ModelProfile:
    """Architecture facts of one model family (names follow the Hugging Face config fields).

    Attributes:
        name: profile key used in ``spec.model.profile``.
        max_context_tokens: the model's context limit (``max_position_embeddings``, tokens).
        layers: decoder layers (``num_hidden_layers``), MTP layers excluded.
        dense_layers: leading layers with a dense MLP (``first_k_dense_replace``); the rest are MoE.
        hidden_size: model width.
        attention_heads: query heads (``num_attention_heads``); tensor parallelism splits them, so
            TP must divide this number.
        q_lora_rank: rank of the query down-projection (0: no query LoRA).
        kv_lora_rank: MLA latent width (512 for every profile here).
        qk_nope_head_dim / qk_rope_head_dim / v_head_dim: MLA per-head dimensions.
        routed_experts / shared_experts / moe_intermediate_size: MoE shape per MoE layer.
        intermediate_size: MLP width of the dense layers.
        vocab_size: embedding rows (embedding and LM head are separate matrices).
        indexer_layers: layers that carry a lightning indexer (0: no sparse attention).
        indexer_heads / indexer_head_dim: indexer shape (``index_n_heads``, ``index_head_dim``).
        index_topk: rows the sparse MLA reads per query (``index_topk``).
        mtp_layers: multi-token-prediction layers (``num_nextn_predict_layers``); 0 means
            ``speculative.method: mtp`` is impossible.
        default_quantization: weight format of the family's repository id without a format marker
            (``zai-org/GLM-5.3`` is BF16, ``deepseek-ai/DeepSeek-V3.2`` FP8, Kimi K2.x INT4);
            ``spec.model.quantization`` or a marker in the name (``-FP8``) override it.
        name_pattern: case-insensitive regex that Hugging Face repository ids of this model family
            match (used to catch a CR whose ``model.name`` and ``model.profile`` disagree).
        sparse_mla_block_size: the only KV block size the sparse-MLA kernels accept (tokens).
    """

    name: str
    max_context_tokens: int
    layers: int
    dense_layers: int
    hidden_size: int
    attention_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    routed_experts: int
    shared_experts: int
    moe_intermediate_size: int
    intermediate_size: int
    vocab_size: int
    indexer_layers: int
    indexer_heads: int
    indexer_head_dim: int
    index_topk: int
    mtp_layers: int
    default_quantization: str = "bf16"
    name_pattern: str = ""
    sparse_mla_block_size: int = 64

    @property
    def sparse_mla(self) -> bool:
        """DeepSeek sparse attention: a lightning indexer + top-k sparse MLA."""
        return self.indexer_layers > 0

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (one shared latent KV row per token). Every profile is MLA."""
        return self.kv_lora_rank > 0


def _glm5(name: str, context: int, indexer_layers: int, pattern: str) -> ModelProfile:
    return ModelProfile(
        name, context, layers=78, dense_layers=3, hidden_size=6144, attention_heads=64, q_lora_rank=2048,
        kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256, routed_experts=256,
        shared_experts=1, moe_intermediate_size=2048, intermediate_size=12288, vocab_size=154_880,
        indexer_layers=indexer_layers, indexer_heads=32, indexer_head_dim=128, index_topk=2048, mtp_layers=1,
        name_pattern=pattern,
    )


MODELS: Final[dict[str, ModelProfile]] = {
    p.name: p
    for p in (
        _glm5("glm-5.3", 1_048_576, 21, r"glm-?5\.3"),
        _glm5("glm-5.2", 1_048_576, 21, r"glm-?5\.2"),
        _glm5("glm-5.1", 202_752, 78, r"glm-?5\.1"),
        _glm5("glm-5", 202_752, 78, r"glm-?5(?![.\d])"),
        ModelProfile(
            "deepseek-v3.2", 163_840, layers=61, dense_layers=3, hidden_size=7168, attention_heads=128,
            q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
            routed_experts=256, shared_experts=1, moe_intermediate_size=2048, intermediate_size=18432,
            vocab_size=129_280, indexer_layers=61, indexer_heads=64, indexer_head_dim=128, index_topk=2048,
            mtp_layers=1, default_quantization="fp8", name_pattern=r"deepseek-v3\.2",
        ),
        ModelProfile(
            "kimi-k2.6", 262_144, layers=61, dense_layers=1, hidden_size=7168, attention_heads=64,
            q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
            routed_experts=384, shared_experts=1, moe_intermediate_size=2048, intermediate_size=18432,
            vocab_size=163_840, indexer_layers=0, indexer_heads=0, indexer_head_dim=0, index_topk=0,
            mtp_layers=0, default_quantization="int4", name_pattern=r"kimi-k2\.6",
        ),
    )
}


@dataclass(frozen=True)
class GpuProfile:
    """A GPU product.

    Attributes:
        name: ``spec.gpu.product``.
        node_label_value: value of the ``nvidia.com/gpu.product`` node label (GPU feature discovery).
        hbm_bytes: memory per GPU as the driver reports it (bytes).
        hbm_bandwidth_bytes_per_s: peak HBM bandwidth (bytes/s); 0 when unknown.
        bf16_flops_per_s: peak dense BF16 tensor-core throughput (FLOP/s); 0 when unknown.
    """

    name: str
    node_label_value: str
    hbm_bytes: int
    hbm_bandwidth_bytes_per_s: float = 0.0
    bf16_flops_per_s: float = 0.0

    @property
    def ridge_flop_per_byte(self) -> float | None:
        """Roofline ridge point: peak FLOP/s ÷ HBM bytes/s (H200: 989e12 / 4.8e12 ≈ 206 FLOP/B)."""
        if not self.hbm_bandwidth_bytes_per_s or not self.bf16_flops_per_s:
            return None
        return self.bf16_flops_per_s / self.hbm_bandwidth_bytes_per_s


GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"

GPUS: Final[dict[str, GpuProfile]] = {
    "H200": GpuProfile("H200", "NVIDIA-H200", 143_771 * MIB, 4.8e12, 989e12),
    "B200": GpuProfile("B200", "NVIDIA-B200", 183_359 * MIB, 8.0e12, 2250e12),
}


def model_profile(spec: GLMDeploymentSpec) -> ModelProfile:
    """The model profile of a spec: a built-in one, or the explicit ``model.architecture`` of
    ``profile: custom`` (the API layer guarantees that ``architecture`` is set then)."""
    arch = spec.model.architecture
    if spec.model.profile != "custom" or arch is None:
        return MODELS[spec.model.profile]
    return ModelProfile(
        "custom", arch.max_context_tokens, layers=arch.layers, dense_layers=arch.dense_layers,
        hidden_size=arch.hidden_size, attention_heads=arch.attention_heads, q_lora_rank=arch.q_lora_rank,
        kv_lora_rank=arch.kv_lora_rank, qk_nope_head_dim=arch.qk_nope_head_dim,
        qk_rope_head_dim=arch.qk_rope_head_dim, v_head_dim=arch.v_head_dim, routed_experts=arch.routed_experts,
        shared_experts=arch.shared_experts, moe_intermediate_size=arch.moe_intermediate_size,
        intermediate_size=arch.intermediate_size, vocab_size=arch.vocab_size, indexer_layers=arch.indexer_layers,
        indexer_heads=arch.indexer_heads, indexer_head_dim=arch.indexer_head_dim, index_topk=arch.index_topk,
        mtp_layers=arch.mtp_layers, default_quantization="bf16", name_pattern="",
    )


def gpu_profile(spec: GLMDeploymentSpec) -> GpuProfile:
    """The GPU profile of a spec: a known product, optionally with ``gpu.memory`` overriding its
    memory, or an unknown product described by ``gpu.memory`` alone (the API layer refuses an
    unknown product without it). An unknown product's node label value is the product string."""
    known = GPUS.get(spec.gpu.product) or next(
        (g for g in GPUS.values() if g.node_label_value == spec.gpu.product), None
    )
    memory = parse_bytes(spec.gpu.memory) if spec.gpu.memory is not None else None
    if known is not None:
        if memory is None:
            return known
        return GpuProfile(known.name, known.node_label_value, memory, known.hbm_bandwidth_bytes_per_s,
                          known.bf16_flops_per_s)
    return GpuProfile(spec.gpu.product, spec.gpu.product, memory or 0)
