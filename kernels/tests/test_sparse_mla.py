"""fp8_ds_mla row layout, top-k gather and the reference sparse-MLA attention."""

from __future__ import annotations

import pytest
import torch

from glm_kernels.sparse_mla import (
    FP8_E4M3_MAX,
    QK_DIM,
    ROW_BYTES,
    dequantize_fp8_ds_mla,
    gather_topk,
    indexer_topk,
    quantize_fp8_ds_mla,
    select_topk,
    sparse_mla_attention_ref,
)
from glm_kernels.testing import assert_within_ref_error


def _rows(t: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(t, 512, generator=gen) * 3, torch.randn(t, 64, generator=gen)


def test_row_is_656_bytes_with_the_documented_layout() -> None:
    # SEED-FACTS: 512 FP8 values + 4 FP32 scales + 64 BF16 RoPE values = 656 B.
    assert ROW_BYTES == 512 + 4 * 4 + 64 * 2 == 656
    latent, rope = _rows(3)
    latent[1, 128:256] = 0.0  # an all-zero tile gets scale 1.0
    rows = quantize_fp8_ds_mla(latent, rope)
    assert rows.shape == (3, 656) and rows.dtype == torch.uint8
    scales = rows[:, 512:528].contiguous().view(torch.float32)
    assert torch.allclose(scales[0], latent[0].reshape(4, 128).abs().amax(1) / FP8_E4M3_MAX)
    assert scales[1, 1] == 1.0
    assert torch.equal(rows[:, 528:].contiguous().view(torch.bfloat16), rope.bfloat16())
    fp8 = rows[:, :512].contiguous().view(torch.float8_e4m3fn).float()
    assert float(fp8.abs().max()) == FP8_E4M3_MAX  # each tile's amax maps to the largest e4m3 value


def test_dequantize_round_trip_is_within_fp8_precision() -> None:
    latent, rope = _rows(50)
    back = dequantize_fp8_ds_mla(quantize_fp8_ds_mla(latent, rope))
    assert back.shape == (50, QK_DIM)
    tile_amax = latent.reshape(50, 4, 128).abs().amax(2, keepdim=True).expand(50, 4, 128).reshape(50, 512)
    # e4m3 has 3 mantissa bits: relative step 2^-3, so rounding error <= 2^-4 of the value, or of the
    # subnormal step (2^-9 of the tile scale) near zero.
    bound = torch.maximum(latent.abs() * 2**-4, tile_amax / FP8_E4M3_MAX * 2**-9)
    assert ((back[:, :512] - latent).abs() <= bound * 1.0001).all()
    assert torch.equal(back[:, 512:], rope.bfloat16().float())


def test_empty_shard_round_trips() -> None:
    rows = quantize_fp8_ds_mla(torch.zeros(0, 512), torch.zeros(0, 64))
    assert rows.shape == (0, 656) and dequantize_fp8_ds_mla(rows).shape == (0, QK_DIM)


def test_gather_topk_zeroes_invalid_entries() -> None:
    rows = torch.arange(10.0)[:, None].expand(10, 3)
    got, valid = gather_topk(rows, torch.tensor([[3, -1, 9], [-1, -1, -1]]))
    assert got[0, :, 0].tolist() == [3.0, 0.0, 9.0]
    assert valid.tolist() == [[True, False, True], [False, False, False]]
    assert (got[1] == 0).all()


def _attention_case(dtype: torch.dtype, t: int = 30, k: int = 12):  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(5, 8, QK_DIM, generator=gen, dtype=torch.float64)
    kv = torch.randn(t, QK_DIM, generator=gen, dtype=torch.float64)
    idx = torch.stack([torch.randperm(t, generator=gen)[:k] for _ in range(5)])
    idx[1, 4:] = -1  # a query with fewer than k earlier tokens
    return q.to(dtype), kv.to(dtype), idx


def test_attention_matches_dense_softmax_over_the_selected_rows() -> None:
    q, kv, idx = _attention_case(torch.float64)
    out, lse = sparse_mla_attention_ref(q, kv, idx)
    for i in range(5):
        sel = kv[idx[i][idx[i] >= 0]]
        s = q[i] @ sel.T * QK_DIM**-0.5
        assert torch.allclose(out[i], torch.softmax(s, -1) @ sel[:, :512], atol=1e-12)
        assert torch.allclose(lse[i], torch.logsumexp(s, -1), atol=1e-12)
    assert out.shape == (5, 8, 512)


def test_fp8_attention_within_reference_error() -> None:
    q, kv, idx = _attention_case(torch.float64)
    rows = quantize_fp8_ds_mla(kv[:, :512], kv[:, 512:])
    truth, _ = sparse_mla_attention_ref(q, rows, idx)  # float64 over the dequantized bytes
    out32, _ = sparse_mla_attention_ref(q.float(), rows, idx)
    out_bf, _ = sparse_mla_attention_ref(q.bfloat16(), rows, idx)
    assert_within_ref_error(out32, out_bf, truth, name="fp32 vs bf16 reference")


def test_no_valid_index_gives_zero_output_and_minus_inf_lse() -> None:
    q, kv, _ = _attention_case(torch.float32)
    out, lse = sparse_mla_attention_ref(q[:2], kv, torch.full((2, 4), -1))
    assert torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all()
    out, lse = sparse_mla_attention_ref(q[:2], kv[:0], torch.full((2, 4), -1))  # an empty shard
    assert torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all()


def test_indexer_is_causal_pads_short_prompts_and_breaks_ties_by_position() -> None:
    gen = torch.Generator().manual_seed(0)
    qi = torch.randn(6, 2, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(6, 8, generator=gen, dtype=torch.float64)
    idx, _ = indexer_topk(qi, torch.ones(6, 2, dtype=torch.float64), k, torch.arange(6), topk=4)
    for p in range(6):
        chosen = idx[p][idx[p] >= 0]
        assert chosen.numel() == min(4, p + 1) and (chosen <= p).all()
        assert torch.equal(chosen, torch.sort(chosen).values)
    assert idx[0].tolist() == [0, -1, -1, -1]
    cols, _ = select_topk(torch.zeros(1, 5, dtype=torch.float64), 2)
    assert cols.tolist() == [[0, 1]]
    cols, _ = select_topk(torch.zeros(1, 5, dtype=torch.float64), 2, ids=torch.tensor([[9, 4, 7, 3, 8]]))
    assert cols.tolist() == [[3, 1]]


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match=r"latent.shape=\(2, 500\)"):
        quantize_fp8_ds_mla(torch.zeros(2, 500), torch.zeros(2, 64))
    with pytest.raises(ValueError, match=r"rows: dtype=torch\.float32"):
        dequantize_fp8_ds_mla(torch.zeros(2, 656))
    with pytest.raises(ValueError, match=r"q\.shape"):
        sparse_mla_attention_ref(torch.zeros(2, 8, 512), torch.zeros(3, 576), torch.zeros(2, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="topk=0"):
        indexer_topk(torch.zeros(1, 1, 2), torch.zeros(1, 1), torch.zeros(3, 2), torch.arange(1), 0)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: indexer_topk(torch.randn(2, 1, 4), torch.ones(2, 1), torch.randn(3, 4), torch.tensor([2]), 2),
         r"query_positions\.shape=\(1,\).*Q=2"),
        (lambda: indexer_topk(torch.randn(1, 1, 4), torch.ones(1, 1), torch.randn(3, 5), torch.tensor([2]), 2),
         r"k_idx\.shape=\(3, 5\).*Di=4"),
        (lambda: indexer_topk(torch.randn(1, 2, 4), torch.ones(1, 3), torch.randn(3, 4), torch.tensor([2]), 2),
         r"weights\.shape=\(1, 3\).*\[Q=1, Hi=2\]"),
        (lambda: indexer_topk(torch.randn(1, 1, 4), torch.ones(1, 1), torch.randn(3, 4), torch.tensor([2]), 2,
                              key_positions=torch.arange(2)),
         r"key_positions\.shape=\(2,\).*T=3"),
        (lambda: indexer_topk(torch.randn(1, 1, 4), torch.ones(1, 1), torch.randn(3, 4), torch.tensor([2]), -1),
         "topk=-1"),
        (lambda: select_topk(torch.zeros(1, 5), -3), "topk=-3"),
        (lambda: select_topk(torch.zeros(5), 2), r"scores\.shape=\(5,\)"),
        (lambda: select_topk(torch.zeros(2, 5), 2, ids=torch.arange(5)), r"ids\.shape=\(5,\)"),
    ],
)
def test_indexer_and_select_topk_validate_shapes_and_k(call, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=needle):
        call()


def test_select_topk_zero_gives_empty_selection() -> None:
    cols, vals = select_topk(torch.zeros(2, 5), 0)
    assert cols.shape == (2, 0) and vals.shape == (2, 0)


def test_attention_rejects_indices_below_minus_one() -> None:
    q = torch.randn(2, 4, 576)
    kv = torch.randn(10, 576)
    with pytest.raises(ValueError, match=r"indices hold -2.*-1"):
        sparse_mla_attention_ref(q, kv, torch.tensor([[0, -2], [1, 2]]))
    with pytest.raises(ValueError, match=r"indices hold -2.*-1"):
        gather_topk(kv, torch.tensor([[0, -2]]))
    with pytest.raises(ValueError, match=r"indices\.dtype=torch\.float32"):
        sparse_mla_attention_ref(q, kv, torch.tensor([[0.0, 1.0], [1.0, 2.0]]))


def test_repeated_indices_count_twice() -> None:
    # Documented choice: no dedupe; a repeated index is read (and weighted) twice, as FlashMLA would read it twice.
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 576, generator=gen, dtype=torch.float64)
    kv = torch.randn(4, 576, generator=gen, dtype=torch.float64)
    out, lse = sparse_mla_attention_ref(q, kv, torch.tensor([[1, 1, 2]]))
    s = (q[0] @ kv[[1, 1, 2]].T) * 576**-0.5
    assert torch.allclose(lse[0], torch.logsumexp(s, -1), atol=1e-12)
    assert torch.allclose(out[0], torch.softmax(s, -1) @ kv[[1, 1, 2], :512], atol=1e-12)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_quantize_rejects_non_finite_latent(bad: float) -> None:
    # A tile with inf would get scale inf and dequantize to NaN for every value of the tile; refuse it instead.
    latent = torch.randn(3, 512)
    latent[1, 200] = bad
    with pytest.raises(ValueError, match=r"^latent holds non-finite values.*row 1"):
        quantize_fp8_ds_mla(latent, torch.zeros(3, 64))
