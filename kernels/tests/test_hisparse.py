"""HiSparse gather: the torch reference's semantics (resident, hot hit, host miss, LRU eviction)."""

from __future__ import annotations

import pytest
import torch

from glm_kernels.hisparse import (
    SOURCE_HOST,
    SOURCE_HOT,
    SOURCE_INVALID,
    SOURCE_RESIDENT,
    HiSparseState,
    hisparse_gather_ref,
)


def _pools(tokens: int = 20, resident: int = 4):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(0)
    host = torch.randint(0, 256, (tokens, 656), generator=gen, dtype=torch.uint8)
    device = torch.randint(0, 256, (resident, 656), generator=gen, dtype=torch.uint8)
    residency = torch.full((1, tokens), -1, dtype=torch.int64)
    residency[0, :resident] = torch.arange(resident)  # tokens 0..3 sit in resident GPU pages
    host_index = torch.arange(tokens)[None, :]
    return host, device, residency, host_index


def test_sources_rows_and_lru_updates() -> None:
    host, device, residency, host_index = _pools()
    state = HiSparseState.create(1, 3)
    topk = torch.tensor([[1, 10, 11, -1]])
    with pytest.raises(ValueError, match="hot buffer rows=3 < top-k K=4"):
        hisparse_gather_ref(topk, residency, host_index, device, host, state, 1)
    state = HiSparseState.create(1, 4)
    staging, source = hisparse_gather_ref(topk, residency, host_index, device, host, state, 1)
    assert source.tolist() == [[SOURCE_RESIDENT, SOURCE_HOST, SOURCE_HOST, SOURCE_INVALID]]
    assert torch.equal(staging[0, 0], device[1])
    assert torch.equal(staging[0, 1], host[10]) and torch.equal(staging[0, 2], host[11])
    assert (staging[0, 3] == 0).all()
    assert state.hot_token.tolist() == [[10, 11, -1, -1]]
    assert state.hot_last_used.tolist() == [[1, 1, -1, -1]]

    # step 2: 11 hits, 12 and 13 miss and fill the two empty slots
    _, source = hisparse_gather_ref(torch.tensor([[11, 12, 13, 2]]), residency, host_index, device, host, state, 2)
    assert source.tolist() == [[SOURCE_HOT, SOURCE_HOST, SOURCE_HOST, SOURCE_RESIDENT]]
    assert state.hot_token.tolist() == [[10, 11, 12, 13]]
    assert state.hot_last_used.tolist() == [[1, 2, 2, 2]]

    # step 3: 14 misses and evicts the least recently used slot (token 10, stamp 1)
    topk = torch.tensor([[14, 12, -1, -1]])
    staging, source = hisparse_gather_ref(topk, residency, host_index, device, host, state, 3)
    assert source.tolist() == [[SOURCE_HOST, SOURCE_HOT, SOURCE_INVALID, SOURCE_INVALID]]
    assert state.hot_token.tolist() == [[14, 11, 12, 13]]
    assert torch.equal(state.hot_rows[0, 0], host[14]) and torch.equal(staging[0, 1], host[12])


def test_step_must_increase_and_positions_must_fit() -> None:
    host, device, residency, host_index = _pools()
    state = HiSparseState.create(1, 4)
    hisparse_gather_ref(torch.tensor([[10]]), residency, host_index, device, host, state, 5)
    with pytest.raises(ValueError, match="step=5"):
        hisparse_gather_ref(torch.tensor([[11]]), residency, host_index, device, host, state, 5)
    with pytest.raises(ValueError, match="position 20 >= max_tokens=20"):
        hisparse_gather_ref(torch.tensor([[20]]), residency, host_index, device, host, state, 6)
