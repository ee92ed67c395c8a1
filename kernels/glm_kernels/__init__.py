"""glm_kernels: PCP/DCP/HiSparse mechanisms for long-context sparse-MLA GLM serving.

Modules: ``pcp`` (load-balanced prompt sharding), ``dcp`` (round-robin KV sharding, LSE merge), ``sparse_mla``
(``fp8_ds_mla`` rows, reference attention), ``hisparse`` (host pool + hot buffer gather), ``overlap`` (PCP x DCP
prefill loop with the all-gather overlapped), ``decode`` (DCP decode step), ``stack`` (scaled-down GLM-like stack
for tests), ``vllm_plugin`` (the ``vllm.general_plugins`` entry point). Triton kernels live in ``triton_kernels``
and are imported only when a ``backend="triton"`` call needs them.
"""

from glm_kernels.dcp import dcp_local_slot, dcp_owner, lse_correct, lse_correct_ref, lse_merge, lse_merge_ref
from glm_kernels.hisparse import HiSparseState, hisparse_gather, hisparse_gather_ref
from glm_kernels.pcp import causal_work, pcp_local_positions, pcp_restore_index, pcp_slot_positions
from glm_kernels.sparse_mla import (
    ROW_BYTES,
    dequantize_fp8_ds_mla,
    gather_topk,
    quantize_fp8_ds_mla,
    sparse_mla_attention_ref,
)

__version__ = "0.1.0"

__all__ = [
    "ROW_BYTES",
    "HiSparseState",
    "causal_work",
    "dcp_local_slot",
    "dcp_owner",
    "dequantize_fp8_ds_mla",
    "gather_topk",
    "hisparse_gather",
    "hisparse_gather_ref",
    "lse_correct",
    "lse_correct_ref",
    "lse_merge",
    "lse_merge_ref",
    "pcp_local_positions",
    "pcp_restore_index",
    "pcp_slot_positions",
    "quantize_fp8_ds_mla",
    "sparse_mla_attention_ref",
]
