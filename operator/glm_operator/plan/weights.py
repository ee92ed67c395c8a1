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
(EP), without it every expert tensor-sliced ("flatten TP across DP and PCP"). The MLA
down-projections (``fused_qkv_a_proj``), the indexer and the routers are replicated on every GPU;
the query up-projection is split by TP unless DCP query replication copies it to every GPU of the
DCP group; the rest is split by TP. Every PCP/DP rank runs the full attention.
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
        attention_a: MLA down-projections (``q_a_proj`` + ``kv_a_proj_with_mqa``, vLLM's
            ``fused_qkv_a_proj``) of every decoder and MTP layer — replicated on every GPU.
        attention_q: query up-projections (``q_b_proj``, or ``q_proj`` without query LoRA) — split by
            TP, or replicated in the DCP group under DCP query replication.
        attention_kv_o: ``kv_b_proj`` + ``o_proj`` — split by TP.
        indexer: indexer projections (``wq_b``, ``wk``) of every indexer layer — replicated.
        indexer_gates: indexer ``weights_proj`` (BF16) — replicated.
        dense_mlp: MLPs of the dense layers, shared experts of the MoE layers and the MTP ``eh_proj`` —
            split by TP.
        routers: MoE router matrices (BF16) — replicated.
        embeddings: embedding + LM head (BF16) — split by TP (vocab-parallel).
        routed_experts: routed experts of every MoE and MTP layer — split over TP × PCP × DP.
    """

    attention_a: int
    attention_q: int
    attention_kv_o: int
    indexer: int
    indexer_gates: int
    dense_mlp: int
    routers: int
    embeddings: int
    routed_experts: int

    @property
    def attention(self) -> int:
        """All MLA projections."""
        return self.attention_a + self.attention_q + self.attention_kv_o

    @property
    def total(self) -> int:
        """All parameters."""
        return (self.attention + self.indexer + self.indexer_gates + self.dense_mlp + self.routers
                + self.embeddings + self.routed_experts)


def parameter_counts(model: ModelProfile, *, mtp: bool = True) -> ParameterCounts:
    """Count the parameters of ``model`` (MTP layers included when ``mtp``)."""
    h, heads = model.hidden_size, model.attention_heads
    qk_dim = model.qk_nope_head_dim + model.qk_rope_head_dim
    q_a = h * model.q_lora_rank
    q_b = (model.q_lora_rank or h) * heads * qk_dim
    kv_a = h * (model.kv_lora_rank + model.qk_rope_head_dim)
    kv_b_o = model.kv_lora_rank * heads * (model.qk_nope_head_dim + model.v_head_dim) + heads * model.v_head_dim * h
    q_in = model.q_lora_rank or h
    indexer_per_layer = q_in * model.indexer_heads * model.indexer_head_dim + h * model.indexer_head_dim
    expert = 3 * h * model.moe_intermediate_size

    mtp_layers = model.mtp_layers if mtp else 0
    moe_layers = model.layers - model.dense_layers + mtp_layers
    attn_layers = model.layers + mtp_layers
    idx_layers = model.indexer_layers + (mtp_layers if model.sparse_mla else 0)
    return ParameterCounts(
        attention_a=attn_layers * (q_a + kv_a),
        attention_q=attn_layers * q_b,
        attention_kv_o=attn_layers * kv_b_o,
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
        replicated: on every GPU whatever the layout (MLA down-projections, indexer, routers).
        tp_split: split by TP (``kv_b_proj``, ``o_proj``, dense MLPs, shared experts, embeddings).
        query: the query up-projection: split by TP, or whole on every GPU of a DCP group under DCP
            query replication.
        routed_experts: split over all TP × PCP × DP GPUs of the engine.
    """

    replicated: float
    tp_split: float
    query: float
    routed_experts: float

    @property
    def total(self) -> float:
        """All weight bytes of the checkpoint as loaded."""
        return self.replicated + self.tp_split + self.query + self.routed_experts


def weight_bytes(model: ModelProfile, quantization: str, *, mtp: bool = True) -> WeightBytes:
    """Weight bytes of ``model`` in checkpoint format ``quantization`` (fp8, nvfp4, int4, bf16).

    Raises:
        ValueError: unknown format.
    """
    if quantization not in LINEAR_BYTES:
        raise ValueError(f"quantization {quantization!r} is not one of {sorted(LINEAR_BYTES)}")
    attn_b, mlp_b = LINEAR_BYTES[quantization]
    p = parameter_counts(model, mtp=mtp)
    return WeightBytes(
        replicated=(p.attention_a + p.indexer) * attn_b + (p.indexer_gates + p.routers) * BF16,
        tp_split=p.attention_kv_o * attn_b + p.dense_mlp * mlp_b + p.embeddings * BF16,
        query=p.attention_q * attn_b,
        routed_experts=p.routed_experts * mlp_b,
    )


def weight_bytes_per_gpu(weights: WeightBytes, *, tensor: int, prefill_context: int, data: int,
                         query_replicated: bool = False) -> float:
    """Weight bytes one GPU of an engine holds (GLM-5.3-FP8 on 8 GPUs with TP1: ≈ 105 GiB).

    Args:
        weights: :func:`weight_bytes` of the model.
        tensor / prefill_context / data: the engine's TP, PCP and DP sizes (EP or not, the routed
            experts are split over all of them).
        query_replicated: DCP query replication (``--dcp-q-replicate``; vLLM turns it on for
            DCP > 1 with PCP = 1, ``reference/vllm.md`` §1): the query projection is whole on every GPU.
    """
    query = weights.query if query_replicated else weights.query / tensor
    return (weights.replicated + weights.tp_split / tensor + query
            + weights.routed_experts / (tensor * prefill_context * data))
