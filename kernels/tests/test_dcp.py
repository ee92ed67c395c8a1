"""DCP round-robin sharding and the torch LSE merge reference."""

from __future__ import annotations

import pytest
import torch

from glm_kernels.dcp import (
    dcp_local_positions,
    dcp_local_slot,
    dcp_owner,
    dcp_shard_len,
    dcp_unshard,
    lse_correct,
    lse_correct_ref,
    lse_merge,
    lse_merge_ref,
)
from glm_kernels.testing import assert_within_ref_error


@pytest.mark.parametrize("interleave", [1, 4, 64])
@pytest.mark.parametrize("num_tokens", [0, 3, 8, 37, 200])
def test_sharding_round_trip(num_tokens: int, interleave: int) -> None:
    world = 8
    rows = torch.randn(num_tokens, 5)
    lens = [dcp_shard_len(num_tokens, world, r, interleave) for r in range(world)]
    assert sum(lens) == num_tokens
    padded = torch.zeros(world, max(lens) if lens else 0, 5)
    for r in range(world):
        pos = dcp_local_positions(num_tokens, world, r, interleave)
        assert pos.numel() == lens[r]
        assert torch.equal(dcp_local_slot(pos, world, interleave), torch.arange(lens[r]))
        padded[r, : lens[r]] = rows[pos]
    assert torch.equal(dcp_unshard(padded, num_tokens, world, interleave), rows)


def test_owner_follows_vllm_rule() -> None:
    # reference/vllm.md: token i lives where (i // interleave) % dcp == dcp_local_rank.
    pos = torch.arange(40)
    assert dcp_owner(pos, 8, 1).tolist() == [i % 8 for i in range(40)]
    assert dcp_owner(pos, 8, 4).tolist() == [(i // 4) % 8 for i in range(40)]
    assert dcp_shard_len(5, 8, 6) == 0  # empty shard


def _split_attention(num_shards: int, dtype: torch.dtype, empty: tuple[int, ...] = ()):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(7)
    b, h, t, d = 3, 4, 40, 32
    q = torch.randn(b, h, d, generator=gen, dtype=torch.float64)
    k = torch.randn(t, d, generator=gen, dtype=torch.float64)
    v = torch.randn(t, d, generator=gen, dtype=torch.float64)
    owner = torch.arange(t) % num_shards
    keep = [r for r in range(num_shards) if r not in empty]
    for e in empty:
        owner[owner == e] = keep[e % len(keep)]  # move the tokens to a shard that stays non-empty
    assert all(int((owner == e).sum()) == 0 for e in empty)
    outs, lses = [], []
    for r in range(num_shards):
        s = (q.to(dtype) @ k[owner == r].to(dtype).T) * d**-0.5
        if s.shape[-1] == 0:
            outs.append(torch.full((b, h, d), float("nan"), dtype=dtype))
            lses.append(torch.full((b, h), float("-inf"), dtype=dtype))
            continue
        lse = torch.logsumexp(s, dim=-1)
        outs.append(torch.exp(s - lse[..., None]) @ v[owner == r].to(dtype))
        lses.append(lse)
    s = (q @ k.T) * d**-0.5
    full = torch.softmax(s, dim=-1) @ v
    return torch.stack(outs), torch.stack(lses), full, torch.logsumexp(s, dim=-1)


@pytest.mark.parametrize("empty", [(), (2,), (0, 5, 7)])
def test_merge_of_partials_equals_full_attention(empty: tuple[int, ...]) -> None:
    outs, lses, full, full_lse = _split_attention(8, torch.float32, empty)
    for r in range(8):  # each listed shard is truly empty, every other one holds tokens
        assert torch.isneginf(lses[r]).all() == (r in empty)
    out, lse = lse_merge_ref(outs, lses)
    assert not torch.isnan(out).any()
    # flash-attention rule: merged fp32 error within 2x of a plain fp32 softmax's error.
    ref = _split_attention(1, torch.float32)[0][0]
    assert_within_ref_error(out, ref, full, name="merged output")
    assert_within_ref_error(lse, torch.logsumexp(_scores32(), dim=-1), full_lse, name="merged lse")


def _scores32() -> torch.Tensor:
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(3, 4, 32, generator=gen, dtype=torch.float64)
    k = torch.randn(40, 32, generator=gen, dtype=torch.float64)
    return (q.float() @ k.float().T) * 32**-0.5


def test_all_shards_empty_gives_zero_and_minus_inf() -> None:
    outs = torch.full((8, 2, 3, 4), float("nan"))
    lses = torch.full((8, 2, 3), float("-inf"))
    out, lse = lse_merge_ref(outs, lses)
    assert torch.equal(out, torch.zeros(2, 3, 4))
    assert torch.isneginf(lse).all()


def test_nan_and_plus_inf_lse_are_treated_as_empty() -> None:
    outs, lses, _, _ = _split_attention(4, torch.float64)
    base, _ = lse_merge_ref(outs[:3], lses[:3])
    for bad in (float("nan"), float("inf")):
        poisoned = lses.clone()
        poisoned[3] = bad
        out, _ = lse_merge_ref(outs, poisoned)
        assert torch.allclose(out, base, rtol=0, atol=1e-12)


def test_base2_lse_matches_base_e() -> None:
    outs, lses, _, _ = _split_attention(4, torch.float64)
    out_e, lse_e = lse_merge_ref(outs, lses)
    out_2, lse_2 = lse_merge_ref(outs, lses / torch.log(torch.tensor(2.0, dtype=torch.float64)), base_e=False)
    assert torch.allclose(out_e, out_2, atol=1e-12)
    assert torch.allclose(lse_e / torch.log(torch.tensor(2.0, dtype=torch.float64)), lse_2, atol=1e-12)


def test_corrected_outputs_sum_to_the_merge() -> None:
    outs, lses, _, _ = _split_attention(8, torch.float64, empty=(3,))
    merged, lse = lse_merge_ref(outs, lses)
    parts = [lse_correct_ref(outs[r], lses, r) for r in range(8)]
    assert torch.allclose(sum(p[0] for p in parts), merged, atol=1e-12)
    assert all(torch.equal(p[1], lse) for p in parts)


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="interleave=0"):
        dcp_owner(torch.arange(3), 8, 0)
    with pytest.raises(ValueError, match=r"lses\.shape"):
        lse_merge_ref(torch.zeros(2, 3, 4, 5), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="rank=9"):
        lse_correct_ref(torch.zeros(3, 4, 5), torch.zeros(8, 3, 4), 9)
    with pytest.raises(ValueError, match="world_size=3"):
        dcp_unshard(torch.zeros(2, 4), 4, 3)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: dcp_owner(torch.arange(4), 0), r"^world_size=0"),
        (lambda: dcp_owner(torch.tensor([-1, -5]), 8), r"^positions hold -5"),
        (lambda: dcp_owner(torch.tensor([1.5, 3.0]), 8), r"^positions\.dtype=torch\.float32"),
        (lambda: dcp_local_slot(torch.tensor([-1]), 8), r"^positions hold -1"),
        (lambda: dcp_shard_len(-5, 8, 0), r"^num_tokens=-5"),
        (lambda: dcp_local_positions(4, 0, 0), r"^world_size=0"),
        (lambda: dcp_local_positions(-3, 8, 0), r"^num_tokens=-3"),
        (lambda: dcp_local_positions(4, 8, 0, 0), r"^interleave=0"),
        (lambda: dcp_unshard(torch.zeros(8, 1, 3), 20, 8), r"^shards\.shape\[1\]=1.*20 tokens.*3"),
        (lambda: dcp_unshard(torch.zeros(8, 1, 3), 4, 8, 0), r"^interleave=0"),
        (lambda: dcp_unshard(torch.zeros(8, 1, 3), -1, 8), r"^num_tokens=-1"),
        (lambda: lse_merge_ref(torch.ones(2, 2, 2, 4, dtype=torch.int32), torch.zeros(2, 2, 2)),
         r"^outs\.dtype=torch\.int32.*float"),
        (lambda: lse_merge_ref(torch.ones(2, 2, 2, 4), torch.zeros(2, 2, 2, dtype=torch.int64)),
         r"^lses\.dtype=torch\.int64.*float"),
        (lambda: lse_correct_ref(torch.ones(2, 2, 4, dtype=torch.int32), torch.zeros(3, 2, 2), 0),
         r"^out\.dtype=torch\.int32.*float"),
        (lambda: lse_correct(torch.ones(2, 2, 4, dtype=torch.int32), torch.zeros(3, 2, 2), 0, backend="torch"),
         r"^out\.dtype=torch\.int32.*float"),
    ],
)
def test_sharding_and_merge_reject_bad_input(call, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=needle):  # anchored: the message starts with the blamed argument
        call()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_merge_of_zero_shards_raises_in_both_backends(backend: str) -> None:
    if backend == "triton":
        pytest.importorskip("triton")
    with pytest.raises(ValueError, match=r"outs\.shape=\(0, 2, 2, 4\).*at least one shard"):
        lse_merge(torch.zeros(0, 2, 2, 4), torch.zeros(0, 2, 2), backend=backend)
    with pytest.raises(ValueError, match=r"lses\.shape=\(0, 2, 2\).*at least one shard"):
        lse_correct(torch.zeros(2, 2, 4), torch.zeros(0, 2, 2), 0, backend=backend)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_integer_outs_raise_in_both_backends(backend: str) -> None:
    if backend == "triton":
        pytest.importorskip("triton")
    with pytest.raises(ValueError, match=r"outs\.dtype=torch\.int32"):
        lse_merge(torch.ones(2, 2, 2, 4, dtype=torch.int32), torch.zeros(2, 2, 2), backend=backend)
    with pytest.raises(ValueError, match=r"out\.dtype=torch\.int32"):
        lse_correct(torch.ones(2, 2, 4, dtype=torch.int32), torch.zeros(3, 2, 2), 0, backend=backend)
