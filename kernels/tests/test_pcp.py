"""PCP load-balanced sharding: coverage, inverse permutation, balance, padding rule, bad input."""

from __future__ import annotations

import pytest
import torch

from glm_kernels.pcp import causal_work, pcp_chunk_size, pcp_local_positions, pcp_restore_index, pcp_slot_positions

LENGTHS = [0, 1, 5, 15, 16, 17, 37, 45, 63, 64, 100, 257]


@pytest.mark.parametrize("world", [1, 2, 8])
@pytest.mark.parametrize("num_tokens", LENGTHS)
def test_every_token_is_owned_exactly_once(num_tokens: int, world: int) -> None:
    owned = torch.cat([pcp_local_positions(num_tokens, world, r) for r in range(world)])
    assert torch.equal(torch.sort(owned).values, torch.arange(num_tokens))


@pytest.mark.parametrize("num_tokens", LENGTHS)
def test_restore_index_inverts_the_gathered_layout(num_tokens: int) -> None:
    world = 8
    slots = pcp_slot_positions(num_tokens, world)
    assert slots.numel() == 2 * world * pcp_chunk_size(num_tokens, world)
    restore = pcp_restore_index(num_tokens, world)
    assert torch.equal(slots[restore], torch.arange(num_tokens))
    # A gather of per-rank rows (real rows first, then padding) restores prompt order.
    chunk = pcp_chunk_size(num_tokens, world)
    gathered = torch.full((2 * world * chunk,), -7)
    for r in range(world):
        local = pcp_local_positions(num_tokens, world, r)
        gathered[r * 2 * chunk : r * 2 * chunk + local.numel()] = local
    assert torch.equal(gathered[restore], torch.arange(num_tokens))


def test_rank_owns_chunk_i_and_its_mirror() -> None:
    # 32 tokens, 8 ranks: 16 chunks of 2; rank 3 owns chunks 3 and 12.
    assert pcp_local_positions(32, 8, 3).tolist() == [6, 7, 24, 25]
    assert pcp_local_positions(32, 8, 0).tolist() == [0, 1, 30, 31]


def test_padding_rule_pads_at_the_end_and_can_leave_ranks_empty() -> None:
    # 5 tokens over 8 ranks: chunk = ceil(5/16) = 1, tokens 0..4 on ranks 0..4, ranks 5..7 empty.
    sizes = [pcp_local_positions(5, 8, r).numel() for r in range(8)]
    assert sizes == [1, 1, 1, 1, 1, 0, 0, 0]
    # 37 tokens: chunk 3, padded to 48; chunk 12 = positions 36..38 is partly padding, so rank 3 holds 9,10,11,36.
    assert pcp_local_positions(37, 8, 3).tolist() == [9, 10, 11, 36]
    assert (pcp_slot_positions(37, 8) == -1).sum() == 48 - 37


def test_balanced_work_is_equal_and_naive_split_is_1_875() -> None:
    # SEED-FACTS: contiguous split of 8 GPUs has max/mean causal work 1.875, balanced 1.0.
    n = 16 * 512
    balanced = causal_work(n, 8).double()
    naive = causal_work(n, 8, balanced=False).double()
    assert float(balanced.max() / balanced.mean()) == 1.0
    assert float(naive.max() / naive.mean()) == pytest.approx(1.875, abs=1e-3)
    assert int(balanced.sum()) == int(naive.sum()) == n * (n + 1) // 2


def test_cached_prefix_adds_work_evenly() -> None:
    w0, w1 = causal_work(64, 8), causal_work(64, 8, cached_tokens=1000)
    assert torch.equal(w1 - w0, torch.full((8,), 8 * 1000))


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: pcp_local_positions(10, 0, 0), r"^world_size=0"),
        (lambda: pcp_local_positions(10, -1, 0), r"^world_size=-1"),
        (lambda: pcp_chunk_size(10, -1), r"^world_size=-1"),
        (lambda: pcp_slot_positions(-1, 8), r"^num_tokens=-1"),
        (lambda: pcp_restore_index(-2, 8), r"^num_tokens=-2"),
        (lambda: causal_work(10, 0), r"^world_size=0"),
        (lambda: pcp_local_positions(-1, 8, 0), r"^num_tokens=-1"),
        (lambda: pcp_local_positions(10, 8, 8), r"^rank=8"),
        (lambda: causal_work(10, 8, cached_tokens=-5), "cached_tokens=-5"),
    ],
)
def test_bad_input_names_the_argument(call, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=needle):  # anchored: the message must start with the blamed argument
        call()
