"""HiSparse: sparse-MLA KV rows in a host pool, a per-request GPU hot buffer with LRU, and the top-k gather.

Model (vLLM ``vllm/v1/hisparse``, "hot-buffering" design of vLLM PR #53781; SEED-FACTS system A, decode):
each decode step the indexer picks ``K`` token positions per request (``index_topk`` = 2,048 for GLM-5.x). For
each one the resolver looks, in order, at

1. a **resident GPU page** — ``residency[r, t] >= 0`` is the row of ``device_cache`` holding token ``t``;
2. the request's **hot buffer** — ``state.hot_token[r, s] == t`` for some slot ``s`` (a hit refreshes its LRU stamp);
3. the **host pool** — row ``host_index[r, t]`` of ``host_pool`` (every token has a host copy, the
   "eager host mirror"); the row is copied into the hot buffer slot with the oldest stamp (LRU victim; empty slots
   first, lowest slot index on ties) and stamped with ``step``.

Every resolved row is written to a contiguous staging buffer ``[R, K, ROW_BYTES]`` in top-k order, which the
sparse-MLA kernel then reads. ``source[r, k]`` tells where row ``k`` came from (``SOURCE_*``). Top-k entries of
``-1`` (fewer than ``K`` earlier tokens) give a zero row and ``SOURCE_INVALID``.

Units: rows are ``ROW_BYTES`` = 656 bytes (``fp8_ds_mla``, vLLM's ``FP8_DS_MLA_ROW_BYTES``); ``K``, positions and
buffer sizes are in tokens (rows). The hot buffer must hold at least ``K`` rows (vLLM's
``hisparse_config.device_buffer_size``, default 2 x ``index_topk``), so the misses of one step never evict each
other. On a GPU the host pool is pinned host memory read directly by the kernel; on CPU it is a plain tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from glm_kernels.sparse_mla import ROW_BYTES

__all__ = [
    "SOURCE_HOST",
    "SOURCE_HOT",
    "SOURCE_INVALID",
    "SOURCE_RESIDENT",
    "HiSparseState",
    "hisparse_gather",
    "hisparse_gather_ref",
]

SOURCE_INVALID = -1
SOURCE_RESIDENT = 0
SOURCE_HOT = 1
SOURCE_HOST = 2

_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


@dataclass
class HiSparseState:
    """Per-request GPU hot buffer and its LRU state (all on the device).

    Attributes:
        hot_rows: uint8 ``[R, S, row_bytes]``, the cached KV rows (``S`` = buffer rows per request).
        hot_token: int64 ``[R, S]``, token position held by each slot, ``-1`` when empty.
        hot_last_used: int64 ``[R, S]``, the ``step`` at which each slot was last filled or hit, ``-1`` when never.
    """

    hot_rows: torch.Tensor
    hot_token: torch.Tensor
    hot_last_used: torch.Tensor

    @classmethod
    def create(
        cls, num_requests: int, buffer_rows: int, *, row_bytes: int = ROW_BYTES, device: str | torch.device = "cpu"
    ) -> HiSparseState:
        """Empty hot buffers: ``buffer_rows`` rows (tokens) of ``row_bytes`` bytes per request (default
        ``ROW_BYTES`` = 656, ``fp8_ds_mla``)."""
        if row_bytes < 1:
            raise ValueError(f"row_bytes={row_bytes}: a KV row has at least one byte; pass ROW_BYTES ({ROW_BYTES}, "
                             f"fp8_ds_mla) or the row width of your cache")
        if num_requests < 0 or buffer_rows < 1:
            raise ValueError(
                f"num_requests={num_requests}, buffer_rows={buffer_rows}: need num_requests >= 0 and buffer_rows >= 1"
            )
        return cls(
            hot_rows=torch.zeros((num_requests, buffer_rows, row_bytes), dtype=torch.uint8, device=device),
            hot_token=torch.full((num_requests, buffer_rows), -1, dtype=torch.int64, device=device),
            hot_last_used=torch.full((num_requests, buffer_rows), -1, dtype=torch.int64, device=device),
        )

    def clone(self) -> HiSparseState:
        """A deep copy (tests run the reference and the kernel from the same state)."""
        return HiSparseState(self.hot_rows.clone(), self.hot_token.clone(), self.hot_last_used.clone())


def _validate(
    topk: torch.Tensor,
    residency: torch.Tensor,
    host_index: torch.Tensor,
    device_cache: torch.Tensor,
    host_pool: torch.Tensor,
    state: HiSparseState,
    step: int,
) -> None:
    for name, t in (("topk", topk), ("residency", residency), ("host_index", host_index)):
        if t.dtype not in _INT_DTYPES:
            raise ValueError(f"{name}.dtype={t.dtype}: expected an integer tensor (int64 row/token indices); "
                             f"convert with .long()")
    for name, t in (("device_cache", device_cache), ("host_pool", host_pool), ("state.hot_rows", state.hot_rows)):
        if t.dtype != torch.uint8:
            raise ValueError(f"{name}.dtype={t.dtype}: expected uint8 rows of {ROW_BYTES} bytes (fp8_ds_mla); "
                             f"pass the raw cache bytes, e.g. quantize_fp8_ds_mla(...) or .view(torch.uint8)")
    if device_cache.ndim != 2 or host_pool.ndim != 2:
        raise ValueError(f"device_cache.shape={tuple(device_cache.shape)}, host_pool.shape={tuple(host_pool.shape)}: "
                         f"expected [rows, row_bytes] each (flatten blocks with .reshape(-1, row_bytes))")
    slots = tuple(state.hot_token.shape)
    if state.hot_token.ndim != 2 or state.hot_rows.ndim != 3 or tuple(state.hot_rows.shape[:2]) != slots:
        raise ValueError(f"state.hot_rows.shape={tuple(state.hot_rows.shape)} ([R, S, row_bytes]) does not match "
                         f"state.hot_token.shape={slots} ([R, S]); build the state with HiSparseState.create")
    if tuple(state.hot_last_used.shape) != slots:
        raise ValueError(f"state.hot_last_used.shape={tuple(state.hot_last_used.shape)} does not match "
                         f"state.hot_token.shape={slots} ([R, S]); build the state with HiSparseState.create")
    if topk.ndim != 2:
        raise ValueError(f"topk.shape={tuple(topk.shape)}: expected [R, K] token positions (-1 = none)")
    r, k = topk.shape
    if residency.shape != host_index.shape or residency.ndim != 2 or residency.shape[0] != r:
        raise ValueError(
            f"residency.shape={tuple(residency.shape)}, host_index.shape={tuple(host_index.shape)}: "
            f"expected both [R={r}, max_tokens]"
        )
    row_bytes = device_cache.shape[-1]
    if host_pool.shape[-1] != row_bytes or state.hot_rows.shape[-1] != row_bytes:
        raise ValueError(
            f"row sizes differ: device_cache {row_bytes} B, host_pool {host_pool.shape[-1]} B, hot buffer "
            f"{state.hot_rows.shape[-1]} B; use one row layout (fp8_ds_mla: {ROW_BYTES} B)"
        )
    if state.hot_token.shape[0] != r:
        raise ValueError(f"state has {state.hot_token.shape[0]} requests, topk has R={r}; create one state per batch")
    if state.hot_token.shape[1] < k:
        raise ValueError(
            f"hot buffer rows={state.hot_token.shape[1]} < top-k K={k}: one step's misses would evict each other; "
            f"size device_buffer_size >= K (vLLM default: 2 x index_topk)"
        )
    if k and int(topk.max()) >= residency.shape[1]:
        raise ValueError(f"topk holds position {int(topk.max())} >= max_tokens={residency.shape[1]} of residency")
    if k and int(topk.min()) < -1:
        raise ValueError(f"topk holds position {int(topk.min())}: positions are >= 0, or -1 for no token")
    rows = device_cache.shape[0]
    if residency.numel() and (int(residency.min()) < -1 or int(residency.max()) >= rows):
        bad = int(residency.min()) if int(residency.min()) < -1 else int(residency.max())
        raise ValueError(f"residency holds row {bad}: must be -1 (not resident) or a row of device_cache "
                         f"in [0, {rows}); fix the residency map or pass the matching device_cache")
    if k:
        # host rows are read only for requested tokens that are not resident
        valid = topk >= 0
        t_safe = torch.where(valid, topk, torch.zeros_like(topk)).long()
        res_t = torch.gather(residency, 1, t_safe)
        host_t = torch.gather(host_index, 1, t_safe)[valid & (res_t < 0)]
        pool = host_pool.shape[0]
        if host_t.numel() and (int(host_t.min()) < 0 or int(host_t.max()) >= pool):
            bad = int(host_t.min()) if int(host_t.min()) < 0 else int(host_t.max())
            raise ValueError(f"host_index holds row {bad} for a requested non-resident token: must be a row of "
                             f"host_pool in [0, {pool}); every token needs a host copy (eager host mirror)")
    if state.hot_last_used.numel() and step <= int(state.hot_last_used.max()):
        last = int(state.hot_last_used.max())
        raise ValueError(f"step={step}: must exceed every earlier step ({last}); pass a decode-step counter")


def hisparse_gather_ref(
    topk: torch.Tensor,
    residency: torch.Tensor,
    host_index: torch.Tensor,
    device_cache: torch.Tensor,
    host_pool: torch.Tensor,
    state: HiSparseState,
    step: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch reference of the gather (see module doc); updates ``state`` in place.

    Args:
        topk: int64 ``[R, K]`` token positions per request (``-1`` = none).
        residency: int64 ``[R, max_tokens]``: row of ``device_cache`` holding the token, or ``-1``.
        host_index: int64 ``[R, max_tokens]``: row of ``host_pool`` holding the token.
        device_cache: uint8 ``[P, row_bytes]`` resident GPU pages (flattened rows).
        host_pool: uint8 ``[Q, row_bytes]`` host pool (pinned host memory on a GPU machine).
        state: the hot buffers (device).
        step: the decode step, larger than every earlier one (LRU clock).

    Returns:
        ``(staging uint8 [R, K, row_bytes], source int32 [R, K])`` on ``device_cache.device``.
    """
    _validate(topk, residency, host_index, device_cache, host_pool, state, step)
    r_count, k_count = topk.shape
    row_bytes = device_cache.shape[-1]
    staging = torch.zeros((r_count, k_count, row_bytes), dtype=torch.uint8, device=device_cache.device)
    source = torch.full((r_count, k_count), SOURCE_INVALID, dtype=torch.int32, device=device_cache.device)
    for r in range(r_count):
        for k in range(k_count):
            t = int(topk[r, k])
            if t < 0:
                continue
            dev_row = int(residency[r, t])
            if dev_row >= 0:
                staging[r, k] = device_cache[dev_row]
                source[r, k] = SOURCE_RESIDENT
                continue
            hits = torch.nonzero(state.hot_token[r] == t)
            if hits.numel():
                slot = int(hits[0, 0])
                staging[r, k] = state.hot_rows[r, slot]
                state.hot_last_used[r, slot] = step
                source[r, k] = SOURCE_HOT
                continue
            slot = int(torch.argmin(state.hot_last_used[r]))  # first minimum: empty slots (-1) first
            row = host_pool[int(host_index[r, t])].to(device_cache.device)
            state.hot_rows[r, slot] = row
            state.hot_token[r, slot] = t
            state.hot_last_used[r, slot] = step
            staging[r, k] = row
            source[r, k] = SOURCE_HOST
    return staging, source


def hisparse_gather(
    topk: torch.Tensor,
    residency: torch.Tensor,
    host_index: torch.Tensor,
    device_cache: torch.Tensor,
    host_pool: torch.Tensor,
    state: HiSparseState,
    step: int,
    *,
    backend: str = "triton",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gather with a Triton kernel (one program per request) or the torch reference; same contract as
    ``hisparse_gather_ref``."""
    if backend == "torch":
        return hisparse_gather_ref(topk, residency, host_index, device_cache, host_pool, state, step)
    if backend != "triton":
        raise ValueError(f"backend={backend!r}: choose 'triton' or 'torch'")
    _validate(topk, residency, host_index, device_cache, host_pool, state, step)
    from glm_kernels import triton_kernels  # noqa: PLC0415

    return triton_kernels.launch_hisparse_gather(topk, residency, host_index, device_cache, host_pool, state, step)
