"""A scaled-down GLM-like sparse-MLA stack with random weights, for multi-rank correctness tests.

What is kept from GLM-5.x (reference/vllm.md §2.2): 64 query heads sharing one latent KV row (MQA form of MLA,
``sparse_mla_force_mqa``), latent 512 + RoPE 64 (QK over 576 dims, PV over 512), a lightning indexer choosing the
top-k earlier tokens per query, several layers, residual stream. What is scaled down: hidden size (64 instead of
6,144), indexer heads/dims (4 x 32 instead of 32 x 128), ``index_topk`` (tens instead of 2,048), no MoE/MLP.

IndexShare (GLM-5.2/5.3 ``index_topk_freq``): one indexer, evaluated on the layer-0 input, gives the top-k used by
every layer. The indexer runs in float64 everywhere, so the selected set is the same in the distributed run, the
reference and the float64 ground truth, and the tolerance rule measures only the attention arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from glm_kernels.sparse_mla import KV_LORA_RANK, QK_DIM, ROPE_DIM, indexer_topk, sparse_mla_attention_ref

__all__ = ["LayerWeights", "StackConfig", "StackWeights", "make_inputs", "make_weights", "reference_forward"]


@dataclass(frozen=True)
class StackConfig:
    """Shape of the scaled-down stack (sizes in elements, ``topk`` in tokens)."""

    num_layers: int = 3
    hidden: int = 64
    num_heads: int = 64
    topk: int = 32
    index_heads: int = 4
    index_dim: int = 32
    rope_theta: float = 10000.0
    seed: int = 0


@dataclass
class LayerWeights:
    """One layer: latent KV down-projection ``w_kv [hidden, 512]``, RoPE key ``w_kr [hidden, 64]``, absorbed query
    ``w_q [hidden, H*576]``, absorbed output ``w_o [H*512, hidden]``."""

    w_kv: torch.Tensor
    w_kr: torch.Tensor
    w_q: torch.Tensor
    w_o: torch.Tensor


@dataclass
class StackWeights:
    """All layers plus the (float64) indexer: queries ``w_iq [hidden, Hi*Di]``, head weights ``w_iw [hidden, Hi]``,
    keys ``w_ik [hidden, Di]``."""

    layers: list[LayerWeights]
    w_iq: torch.Tensor
    w_iw: torch.Tensor
    w_ik: torch.Tensor
    config: StackConfig = field(default_factory=StackConfig)

    def to(self, dtype: torch.dtype) -> StackWeights:
        """Attention weights cast to ``dtype``; the indexer stays float64."""
        layers = [LayerWeights(*(getattr(w, n).to(dtype) for n in ("w_kv", "w_kr", "w_q", "w_o"))) for w in self.layers]
        return StackWeights(layers, self.w_iq, self.w_iw, self.w_ik, self.config)


def make_weights(cfg: StackConfig) -> StackWeights:
    """Random float64 weights (seeded by ``cfg.seed``), scaled by ``1/sqrt(fan_in)``."""
    gen = torch.Generator().manual_seed(cfg.seed)

    def rand(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, generator=gen, dtype=torch.float64) / rows**0.5

    h = cfg.hidden
    layers = [
        LayerWeights(
            w_kv=rand(h, KV_LORA_RANK),
            w_kr=rand(h, ROPE_DIM),
            w_q=rand(h, cfg.num_heads * QK_DIM),
            w_o=rand(cfg.num_heads * KV_LORA_RANK, h),
        )
        for _ in range(cfg.num_layers)
    ]
    return StackWeights(
        layers, rand(h, cfg.index_heads * cfg.index_dim), rand(h, cfg.index_heads), rand(h, cfg.index_dim), cfg
    )


def make_inputs(cfg: StackConfig, num_tokens: int, seed: int = 1) -> torch.Tensor:
    """Layer-0 hidden states ``[num_tokens, hidden]`` float64 (stands in for token embeddings)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(num_tokens, cfg.hidden, generator=gen, dtype=torch.float64)


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` accumulated in float64 and rounded to ``x.dtype`` (as tensor-core GEMMs accumulate bf16 products
    in fp32). CPU BLAS sums one row (gemv) and many rows (blocked gemm) in different orders, with errors 10x apart
    for the 32,768-long output projection; accumulating in float64 makes a row's result independent of how many
    rows a rank holds, so the comparison measures the sharding, not the BLAS path."""
    return (x.double() @ w.double()).to(x.dtype)


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Rotary embedding (rotate-half) of ``x [n, ..., 64]`` at int64 ``positions [n]``."""
    half = ROPE_DIM // 2
    inv = theta ** (-torch.arange(half, dtype=torch.float64) / half)
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    shape = (positions.shape[0],) + (1,) * (x.ndim - 2) + (half,)
    cos, sin = ang.cos().to(x.dtype).reshape(shape), ang.sin().to(x.dtype).reshape(shape)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def kv_rows(w: LayerWeights, x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Latent KV rows ``[n, 576]`` (512 latent, then 64 RoPE) of tokens ``x [n, hidden]``."""
    h = _rms_norm(x)
    return torch.cat([linear(h, w.w_kv), rope(linear(h, w.w_kr), positions, theta)], dim=1)


def queries(w: LayerWeights, x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Absorbed queries ``[n, H, 576]``."""
    h = _rms_norm(x)
    q = linear(h, w.w_q).reshape(x.shape[0], w.w_q.shape[1] // QK_DIM, QK_DIM)
    return torch.cat([q[..., :KV_LORA_RANK], rope(q[..., KV_LORA_RANK:], positions, theta)], dim=-1)


def project(w: LayerWeights, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """Residual update ``x + attn.reshape(n, H*512) @ w_o``."""
    return x + linear(attn.reshape(x.shape[0], w.w_o.shape[0]), w.w_o)


def index_keys(weights: StackWeights, x0: torch.Tensor) -> torch.Tensor:
    """Indexer keys ``[n, Di]`` (float64) from layer-0 inputs."""
    return _rms_norm(x0.double()) @ weights.w_ik


def index_queries(weights: StackWeights, x0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Indexer queries ``[n, Hi, Di]`` and head weights ``[n, Hi]`` (float64)."""
    h = _rms_norm(x0.double())
    cfg = weights.config
    return (h @ weights.w_iq).reshape(x0.shape[0], cfg.index_heads, cfg.index_dim), h @ weights.w_iw


def reference_forward(
    weights: StackWeights, x0: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """Single-process causal forward over all tokens, computed in ``dtype``.

    Returns ``(x_out [T, hidden], layer_inputs [L] of [T, hidden], kv_rows [L] of [T, 576], topk indices [T, k])``.
    """
    cfg = weights.config
    w = weights.to(dtype)
    pos = torch.arange(x0.shape[0])
    iq, iw = index_queries(weights, x0)
    idx, _ = indexer_topk(iq, iw, index_keys(weights, x0), pos, cfg.topk)
    x = x0.to(dtype)
    inputs, rows = [], []
    for layer in w.layers:
        inputs.append(x)
        kv = kv_rows(layer, x, pos, cfg.rope_theta)
        rows.append(kv)
        out, _ = sparse_mla_attention_ref(queries(layer, x, pos, cfg.rope_theta), kv, idx)
        x = project(layer, x, out)
    return x, inputs, rows, idx
