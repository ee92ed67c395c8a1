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
    hisparse_gather,
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


def _bad_cases():  # type: ignore[no-untyped-def]
    """(name, kwargs overriding a valid call, regex the ValueError must match)."""
    host, device, residency, host_index = _pools(tokens=8, resident=2)
    bad_res = residency.clone()
    bad_res[0, 1] = 5  # device_cache has 2 rows
    neg_res = residency.clone()
    neg_res[0, 6] = -3
    bad_host = host_index.clone()
    bad_host[0, 5] = 99  # host_pool has 8 rows
    minus_host = host_index.clone()
    minus_host[0, 5] = -1  # would silently read the last host row
    state_ok = HiSparseState.create(1, 4)
    short_rows = HiSparseState(torch.zeros(1, 1, 656, dtype=torch.uint8), state_ok.hot_token, state_ok.hot_last_used)
    short_last = HiSparseState(state_ok.hot_rows, state_ok.hot_token, torch.full((1, 3), -1))
    float_rows = HiSparseState(torch.zeros(1, 4, 656), state_ok.hot_token, state_ok.hot_last_used)
    return [
        ("residency row 5", {"topk": torch.tensor([[1]]), "residency": bad_res}, r"residency.*5.*device_cache"),
        ("residency -3", {"topk": torch.tensor([[6]]), "residency": neg_res}, r"residency.*-3"),
        ("host_index 99", {"topk": torch.tensor([[5]]), "host_index": bad_host}, r"host_index.*99.*host_pool"),
        ("host_index -1", {"topk": torch.tensor([[5]]), "host_index": minus_host}, r"host_index.*-1.*host_pool"),
        ("topk float", {"topk": torch.tensor([[5.0]])}, r"topk.*dtype.*float32.*integer"),
        ("topk -5", {"topk": torch.tensor([[-5]])}, r"topk.*-5"),
        ("device_cache float", {"device_cache": device.float()}, r"device_cache.*dtype.*uint8"),
        ("host_pool float", {"host_pool": host.float()}, r"host_pool.*dtype.*uint8"),
        ("hot_rows float", {"state": float_rows}, r"hot_rows.*dtype.*uint8"),
        ("hot_rows slots", {"state": short_rows}, r"hot_rows.*1.*hot_token.*4"),
        ("hot_last_used slots", {"state": short_last}, r"hot_last_used.*3.*hot_token.*4"),
    ]


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("case", _bad_cases(), ids=lambda c: c[0])
def test_gather_rejects_out_of_range_rows_and_wrong_dtypes(case, backend: str) -> None:  # type: ignore[no-untyped-def]
    if backend == "triton":
        pytest.importorskip("triton")
    host, device, residency, host_index = _pools(tokens=8, resident=2)
    args = {
        "topk": torch.tensor([[5]]),
        "residency": residency,
        "host_index": host_index,
        "device_cache": device,
        "host_pool": host,
        "state": HiSparseState.create(1, 4),
        "step": 1,
    }
    _, override, needle = case
    args.update(override)
    with pytest.raises(ValueError, match=needle):
        hisparse_gather(**args, backend=backend)


def test_host_index_of_resident_or_unrequested_tokens_is_not_checked() -> None:
    # Only rows the step actually reads from the host pool must be valid host rows.
    host, device, residency, host_index = _pools(tokens=8, resident=2)
    host_index = host_index.clone()
    host_index[0, 0] = -1  # token 0 is resident
    host_index[0, 7] = 1000  # token 7 is not requested
    staging, source = hisparse_gather_ref(
        torch.tensor([[0, 5]]), residency, host_index, device, host, HiSparseState.create(1, 4), 1
    )
    assert source.tolist() == [[SOURCE_RESIDENT, SOURCE_HOST]]
    assert torch.equal(staging[0, 1], host[5])


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"row_bytes": -1}, r"^row_bytes=-1"), ({"row_bytes": 0}, r"^row_bytes=0"), ({"buffer_rows": 0}, "buffer_rows=0")],
)
def test_create_rejects_bad_sizes(kwargs: dict[str, int], needle: str) -> None:
    args = {"num_requests": 1, "buffer_rows": 2, **kwargs}
    with pytest.raises(ValueError, match=needle):
        HiSparseState.create(args.pop("num_requests"), args.pop("buffer_rows"), **args)
