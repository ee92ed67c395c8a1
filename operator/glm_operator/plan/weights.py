"""Parameter counts of a model profile and the weight bytes each GPU holds under a parallel layout.

Counts follow the DeepSeek-V3 module shapes that GLM-5.x, DeepSeek-V3.2 and Kimi K2.x share
(vLLM ``deepseek_v2.py``): per layer an MLA block (``q_a_proj``/``q_b_proj`` or ``q_proj``,
``kv_a_proj_with_mqa``, ``kv_b_proj``, ``o_proj``), on indexer layers a lightning indexer (``wq_b``,
``wk``, ``weights_proj``), then a dense MLP (the first ``dense_layers``) or an MoE block (routed
experts, shared experts, router). Embedding and LM head are separate matrices. An MTP layer is a
full MoE layer plus ``eh_proj`` (2·hidden × hidden). Norms are ignored (< 0.01 %).

The totals reproduce the published sizes: GLM-5.3 ≈ 753 B parameters including MTP (Hugging Face
lists GLM-5.2-FP8 at 753 B), DeepSeek-V3.2 ≈ 671 B without MTP, Kimi K2 ≈ 1.03 T.

Bytes per parameter by checkpoint format (``spec.model.quantization``):

- ``fp8``: every linear layer FP8 E4M3 with one FP32 scale per 128×128 block (1 + 4/16,384 B);
  embeddings, LM head and routers BF16 (the GLM-5.x-FP8 and DeepSeek-V3.2 checkpoints);
- ``nvfp4`` / ``int4``: expert and MLP linears 4-bit with one 8-/16-bit scale per 16/32 values
  (0.5 + 1/16 B), attention, embeddings and routers BF16 (NVIDIA ModelOpt NVFP4 and Kimi's INT4
  checkpoints quantize the MoE weights);
- ``bf16``: 2 B for everything.

Sharding (vLLM 0.32.0, ``FusedMoEParallelConfig.make``): the routed experts are split over all
TP × PCP × DP GPUs of the engine either way — with ``--enable-expert-parallel`` whole experts per GPU
(EP), without it every expert tensor-sliced ("flatten TP across DP and PCP"). Everything else is
split by TP and *replicated* over PCP and DP ranks (every PCP/DP rank runs the full attention).
"""

from __future__ import annotations

from dataclasses import dataclass

from glm_operator.plan.profiles import ModelProfile

BF16 = 2.0
FP8_BLOCK = 1.0 + 4 / (128 * 128)
FP4_GROUP = 0.5 + 1 / 16

#: (bytes per attention/indexer linear parameter, bytes per MLP/expert linear parameter) by format.
LINEAR_BYTES: dict[str, tuple[float, float]] = {
    "fp8": (FP8_BLOCK, FP8_BLOCK),
    "nvfp4": (BF16, FP4_GROUP),
    "int4": (BF16, FP4_GROUP),
    "bf16": (BF16, BF16),
}


@dataclass(frozen=True)
class ParameterCounts:
    """Parameters of one model by where they live (counts, not bytes).

    Attributes:
        attention: MLA projections of every decoder and MTP layer.
        indexer: indexer projections (``wq_b``, ``wk``) of every indexer layer.
        indexer_gates: indexer ``weights_proj`` (kept in BF16).
        dense_mlp: MLPs of the dense layers, shared experts of the MoE layers and the MTP ``eh_proj``.
        routers: MoE router matrices (BF16).
        embeddings: embedding + LM head (BF16).
        routed_experts: routed experts of every MoE and MTP layer — the only weights EP shards.
    """

    attention: int
    indexer: int
    indexer_gates: int
    dense_mlp: int
    routers: int
    embeddings: int
    routed_experts: int

    @property
    def total(self) -> int:
        """All parameters."""
        return (self.attention + self.indexer + self.indexer_gates + self.dense_mlp + self.routers
                + self.embeddings + self.routed_experts)


def parameter_counts(model: ModelProfile, *, mtp: bool = True) -> ParameterCounts:
    """Count the parameters of ``model`` (MTP layers included when ``mtp``)."""
    h, heads = model.hidden_size, model.attention_heads
    qk_dim = model.qk_nope_head_dim + model.qk_rope_head_dim
    q = h * model.q_lora_rank + model.q_lora_rank * heads * qk_dim if model.q_lora_rank else h * heads * qk_dim
    kv = h * (model.kv_lora_rank + model.qk_rope_head_dim)
    kv += model.kv_lora_rank * heads * (model.qk_nope_head_dim + model.v_head_dim)
    attention_per_layer = q + kv + heads * model.v_head_dim * h
    q_in = model.q_lora_rank or h
    indexer_per_layer = q_in * model.indexer_heads * model.indexer_head_dim + h * model.indexer_head_dim
    expert = 3 * h * model.moe_intermediate_size

    mtp_layers = model.mtp_layers if mtp else 0
    moe_layers = model.layers - model.dense_layers + mtp_layers
    attn_layers = model.layers + mtp_layers
    idx_layers = model.indexer_layers + (mtp_layers if model.sparse_mla else 0)
    return ParameterCounts(
        attention=attn_layers * attention_per_layer,
        indexer=idx_layers * indexer_per_layer,
        indexer_gates=idx_layers * h * model.indexer_heads,
        dense_mlp=model.dense_layers * 3 * h * model.intermediate_size
        + moe_layers * model.shared_experts * expert + mtp_layers * 2 * h * h,
        routers=moe_layers * h * model.routed_experts,
        embeddings=2 * model.vocab_size * h,
        routed_experts=moe_layers * model.routed_experts * expert,
    )


@dataclass(frozen=True)
class WeightBytes:
    """Weight bytes of a model split by how an engine shards them.

    Attributes:
        dense: bytes of everything except routed experts (split by TP only).
        routed_experts: bytes of the routed experts (split by the EP group, or by TP without EP).
    """

    dense: float
    routed_experts: float

    @property
    def total(self) -> float:
        """All weight bytes of the checkpoint as loaded."""
        return self.dense + self.routed_experts


def weight_bytes(model: ModelProfile, quantization: str, *, mtp: bool = True) -> WeightBytes:
    """Weight bytes of ``model`` in checkpoint format ``quantization`` (fp8, nvfp4, int4, bf16).

    Raises:
        ValueError: unknown format.
    """
    if quantization not in LINEAR_BYTES:
        raise ValueError(f"quantization {quantization!r} is not one of {sorted(LINEAR_BYTES)}")
    attn_b, mlp_b = LINEAR_BYTES[quantization]
    p = parameter_counts(model, mtp=mtp)
    dense = (p.attention + p.indexer) * attn_b + p.dense_mlp * mlp_b + (p.indexer_gates + p.routers
                                                                          + p.embeddings) * BF16
    return WeightBytes(dense=dense, routed_experts=p.routed_experts * mlp_b)


def weight_bytes_per_gpu(weights: WeightBytes, *, tensor: int, prefill_context: int, data: int) -> float:
    """Weight bytes one GPU of an engine holds (GLM-5.3-FP8 on 8 GPUs with TP1: ≈ 105 GiB).

    Args:
        weights: :func:`weight_bytes` of the model.
        tensor / prefill_context / data: the engine's TP, PCP and DP sizes (EP or not, the routed
            experts are split over all of them).
    """
    return weights.dense / tensor + weights.routed_experts / (tensor * prefill_context * data)
