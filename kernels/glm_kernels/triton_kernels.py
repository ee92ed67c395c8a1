"""Triton kernels and their launchers (imported lazily: triton is an optional dependency).

On a machine without a GPU they run under Triton's interpreter (``TRITON_INTERPRET=1``, set before triton is
imported). Every kernel has a torch reference beside it (``dcp.lse_merge_ref``, ``dcp.lse_correct_ref``,
``hisparse.hisparse_gather_ref``) that the tests compare against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import triton
import triton.language as tl

if TYPE_CHECKING:
    from glm_kernels.hisparse import HiSparseState


@triton.jit
def _lse_merge_kernel(
    outs_ptr,
    lses_ptr,
    out_ptr,
    lse_ptr,
    N,
    D,
    rank,
    s_on,
    s_ob,
    s_oh,
    s_od,
    s_ln,
    s_lb,
    s_lh,
    s_yb,
    s_yh,
    s_yd,
    s_zb,
    s_zh,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    CORRECT_ONLY: tl.constexpr,
    IS_BASE_E: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    n = tl.arange(0, BLOCK_N)
    nmask = n < N
    lse_n = tl.load(lses_ptr + n * s_ln + b * s_lb + h * s_lh, mask=nmask, other=-float("inf")).to(tl.float32)
    lse_n = tl.where((lse_n != lse_n) | (lse_n == float("inf")), -float("inf"), lse_n)
    lse_max = tl.max(lse_n, axis=0)
    lse_max = tl.where(lse_max == -float("inf"), 0.0, lse_max)  # finite from here on
    # Stable weights w_r = exp(L_r - M) / sum_r' exp(L_r' - M) (M = max): normalised for any |L|, no L_r - L.
    if IS_BASE_E:
        wsum = tl.sum(tl.exp(lse_n - lse_max), axis=0)
        total = tl.log(wsum) + lse_max
    else:
        wsum = tl.sum(tl.exp2(lse_n - lse_max), axis=0)
        total = tl.log2(wsum) + lse_max
    wdiv = tl.where(wsum > 0.0, wsum, 1.0)  # every shard empty: all weights 0, L = -inf
    tl.store(lse_ptr + b * s_zb + h * s_zh, total.to(lse_ptr.dtype.element_ty))

    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    if CORRECT_ONLY:
        lse_r = tl.load(lses_ptr + rank * s_ln + b * s_lb + h * s_lh).to(tl.float32)
        lse_r = tl.where((lse_r != lse_r) | (lse_r == float("inf")), -float("inf"), lse_r)
        factor = (tl.exp(lse_r - lse_max) if IS_BASE_E else tl.exp2(lse_r - lse_max)) / wdiv
        o = tl.load(outs_ptr + b * s_ob + h * s_oh + d * s_od, mask=dmask, other=0.0).to(tl.float32)
        acc = tl.where(factor == 0.0, 0.0, o * factor)
    else:
        for r in range(N):
            lse_r = tl.load(lses_ptr + r * s_ln + b * s_lb + h * s_lh).to(tl.float32)
            lse_r = tl.where((lse_r != lse_r) | (lse_r == float("inf")), -float("inf"), lse_r)
            factor = (tl.exp(lse_r - lse_max) if IS_BASE_E else tl.exp2(lse_r - lse_max)) / wdiv
            o = tl.load(outs_ptr + r * s_on + b * s_ob + h * s_oh + d * s_od, mask=dmask, other=0.0).to(tl.float32)
            acc += tl.where(factor == 0.0, 0.0, o * factor)
    tl.store(out_ptr + b * s_yb + h * s_yh + d * s_yd, acc.to(out_ptr.dtype.element_ty), mask=dmask)


def _merge_blocks(n: int, d: int) -> tuple[int, int]:
    return max(triton.next_power_of_2(n), 2), max(triton.next_power_of_2(d), 16)


def launch_lse_merge(
    outs: torch.Tensor, lses: torch.Tensor, *, base_e: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """``outs`` ``[N, B, H, D]``, ``lses`` ``[N, B, H]`` -> ``(out [B, H, D] outs.dtype, lse [B, H] float32)``."""
    n, b, h, d = outs.shape
    out = torch.empty((b, h, d), dtype=outs.dtype, device=outs.device)
    lse = torch.empty((b, h), dtype=torch.float32, device=outs.device)
    if b == 0 or h == 0:
        return out, lse
    block_n, block_d = _merge_blocks(n, d)
    _lse_merge_kernel[(b, h)](
        outs, lses, out, lse, n, d, 0,
        *outs.stride(), *lses.stride(), *out.stride(), *lse.stride(),
        BLOCK_N=block_n, BLOCK_D=block_d, CORRECT_ONLY=False, IS_BASE_E=base_e,
    )  # fmt: skip
    return out, lse


def launch_lse_correct(
    out: torch.Tensor, lses: torch.Tensor, rank: int, *, base_e: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """In place: ``out`` ``[B, H, D]`` *= ``exp(lses[rank] - L)``; returns ``(out, L [B, H] lses.dtype)``."""
    n, b, h = lses.shape
    d = out.shape[2]
    lse = torch.empty((b, h), dtype=lses.dtype, device=lses.device)
    if b == 0 or h == 0:
        return out, lse
    block_n, block_d = _merge_blocks(n, d)
    _lse_merge_kernel[(b, h)](
        out, lses, out, lse, n, d, rank,
        0, *out.stride(), *lses.stride(), *out.stride(), *lse.stride(),
        BLOCK_N=block_n, BLOCK_D=block_d, CORRECT_ONLY=True, IS_BASE_E=base_e,
    )  # fmt: skip
    return out, lse


@triton.jit
def _hisparse_gather_kernel(
    topk_ptr,
    residency_ptr,
    host_index_ptr,
    device_cache_ptr,
    host_pool_ptr,
    hot_rows_ptr,
    hot_token_ptr,
    hot_last_ptr,
    staging_ptr,
    source_ptr,
    step,
    K,
    MAX_TOKENS,
    HOT,
    ROW_BYTES: tl.constexpr,
    BLOCK_ROW: tl.constexpr,
    BLOCK_HOT: tl.constexpr,
):
    # One program per request: the top-k entries are resolved in order, so LRU decisions are sequential and
    # identical to the torch reference.
    r = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_ROW)
    cmask = cols < ROW_BYTES
    slots = tl.arange(0, BLOCK_HOT)
    smask = slots < HOT
    for k in range(K):
        t = tl.load(topk_ptr + r * K + k).to(tl.int64)
        valid = (t >= 0).to(tl.int32)
        t_safe = tl.where(valid != 0, t, 0)
        dev_row = tl.load(residency_ptr + r * MAX_TOKENS + t_safe).to(tl.int64)
        on_dev = valid * (dev_row >= 0).to(tl.int32)
        off_dev = valid * (dev_row < 0).to(tl.int32)
        tokens = tl.load(hot_token_ptr + r * HOT + slots, mask=smask, other=-2)
        match = ((tokens == t) & smask).to(tl.int32) * off_dev
        hit = tl.max(match, axis=0)
        hit_slot = tl.argmax(match, axis=0)
        lasts = tl.load(hot_last_ptr + r * HOT + slots, mask=smask, other=9223372036854775807)
        victim = tl.argmin(lasts, axis=0)
        miss = off_dev * (1 - hit)
        slot = tl.where(hit != 0, hit_slot, victim).to(tl.int64)
        host_row = tl.load(host_index_ptr + r * MAX_TOKENS + t_safe).to(tl.int64)
        dev_mask = cmask & (cols * 0 + on_dev != 0)
        hot_mask = cmask & (cols * 0 + hit != 0)
        host_mask = cmask & (cols * 0 + miss != 0)
        dev_src = device_cache_ptr + tl.where(on_dev != 0, dev_row, 0) * ROW_BYTES
        host_src = host_pool_ptr + tl.where(miss != 0, host_row, 0) * ROW_BYTES
        from_dev = tl.load(dev_src + cols, mask=dev_mask, other=0)
        from_hot = tl.load(hot_rows_ptr + (r * HOT + slot) * ROW_BYTES + cols, mask=hot_mask, other=0)
        from_host = tl.load(host_src + cols, mask=host_mask, other=0)
        row = tl.where(dev_mask, from_dev, tl.where(hot_mask, from_hot, from_host))
        tl.store(staging_ptr + (r * K + k) * ROW_BYTES + cols, row, mask=cmask)
        tl.store(hot_rows_ptr + (r * HOT + slot) * ROW_BYTES + cols, from_host, mask=host_mask)
        tl.store(hot_token_ptr + r * HOT + slot, t, mask=miss != 0)
        tl.store(hot_last_ptr + r * HOT + slot, step, mask=(hit + miss) != 0)
        src = tl.where(valid != 0, tl.where(on_dev != 0, 0, tl.where(hit != 0, 1, 2)), -1)
        tl.store(source_ptr + r * K + k, src.to(tl.int32))
        tl.debug_barrier()


def launch_hisparse_gather(
    topk: torch.Tensor,
    residency: torch.Tensor,
    host_index: torch.Tensor,
    device_cache: torch.Tensor,
    host_pool: torch.Tensor,
    state: HiSparseState,
    step: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launcher of the HiSparse gather (arguments validated by ``hisparse.hisparse_gather``)."""
    r, k = topk.shape
    row_bytes = device_cache.shape[1]
    staging = torch.empty((r, k, row_bytes), dtype=torch.uint8, device=device_cache.device)
    source = torch.empty((r, k), dtype=torch.int32, device=device_cache.device)
    if r == 0 or k == 0:
        return staging, source
    hot = state.hot_token.shape[1]
    _hisparse_gather_kernel[(r,)](
        topk.contiguous(), residency.contiguous(), host_index.contiguous(), device_cache, host_pool,
        state.hot_rows, state.hot_token, state.hot_last_used, staging, source,
        step, k, residency.shape[1], hot,
        ROW_BYTES=row_bytes, BLOCK_ROW=triton.next_power_of_2(row_bytes),
        BLOCK_HOT=max(triton.next_power_of_2(hot), 2),
    )  # fmt: skip
    return staging, source
