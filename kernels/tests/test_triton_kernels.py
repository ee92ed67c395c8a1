"""Triton kernels against their torch references (interpreter on CPU, TRITON_INTERPRET=1 from conftest)."""

from __future__ import annotations

import pytest
import torch

from glm_kernels.dcp import lse_correct, lse_correct_ref, lse_merge, lse_merge_ref
from glm_kernels.hisparse import HiSparseState, hisparse_gather, hisparse_gather_ref
from glm_kernels.testing import DEVICE, HAS_TRITON, assert_within_ref_error

pytestmark = [
    pytest.mark.interpret,
    pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed (make test-kernels installs it)"),
]


def _partials(n: int, b: int, h: int, d: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    outs = torch.randn(n, b, h, d, generator=gen, dtype=torch.float64)
    lses = torch.randn(n, b, h, generator=gen, dtype=torch.float64) * 3
    if n > 1:
        lses[1] = float("-inf")  # an empty shard ...
        outs[1] = float("nan")  # ... whose output is garbage
    lses[0, 0, 0] = float("nan")
    lses[:, 1, 1] = float("-inf")  # a (token, head) with no row on any shard
    return outs, lses


@pytest.mark.parametrize(("n", "b", "h", "d"), [(8, 3, 4, 40), (3, 2, 5, 512), (1, 2, 2, 16)], ids=str)
@pytest.mark.parametrize("base_e", [True, False])
def test_lse_merge_kernel_matches_reference(n: int, b: int, h: int, d: int, base_e: bool) -> None:
    outs, lses = _partials(n, b, h, d)
    truth, truth_lse = lse_merge_ref(outs, lses, base_e=base_e)
    ref, ref_lse = lse_merge_ref(outs.half(), lses.float(), base_e=base_e)
    out, lse = lse_merge(outs.float().to(DEVICE), lses.float().to(DEVICE), base_e=base_e)
    out, lse = out.cpu(), lse.cpu()
    assert not torch.isnan(out).any()
    if b > 1 and h > 1:
        assert (out[1, 1] == 0).all() and torch.isneginf(lse[1, 1])
    finite = torch.isfinite(truth_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert_within_ref_error(out, ref, truth, name="merged out (fp32 kernel vs fp16 reference)")
    assert_within_ref_error(lse[finite], ref_lse[finite], truth_lse[finite], name="merged lse")


def test_lse_merge_kernel_fp32_agrees_with_fp32_reference() -> None:
    outs, lses = _partials(8, 4, 8, 64, seed=1)
    truth, _ = lse_merge_ref(outs, lses)
    ref, _ = lse_merge_ref(outs.float(), lses.float())
    out, _ = lse_merge(outs.float(), lses.float())
    assert_within_ref_error(out, ref, truth, name="fp32 merge")


def test_lse_correct_kernel_matches_reference_in_place() -> None:
    outs, lses = _partials(8, 3, 4, 48, seed=2)
    for rank in (0, 1, 5):
        truth, truth_lse = lse_correct_ref(outs[rank], lses, rank)
        local = outs[rank].float().clone()
        out, lse = lse_correct(local, lses.float(), rank)
        assert out.data_ptr() == local.data_ptr()
        if rank == 1:  # the empty shard contributes exact zeros, not NaN
            assert torch.equal(out, torch.zeros_like(out))
        else:
            ref, _ = lse_correct_ref(outs[rank].half(), lses.float(), rank)
            assert_within_ref_error(out, ref, truth, name=f"corrected out, rank {rank}")
        finite = torch.isfinite(truth_lse)
        assert torch.allclose(lse[finite].double(), truth_lse[finite], atol=1e-5)


def test_hisparse_kernel_matches_reference_over_steps() -> None:
    gen = torch.Generator().manual_seed(0)
    r, t, k, slots = 3, 60, 8, 12
    host = torch.randint(0, 256, (r * t, 656), generator=gen, dtype=torch.uint8)
    device = torch.randint(0, 256, (10, 656), generator=gen, dtype=torch.uint8)
    residency = torch.full((r, t), -1, dtype=torch.int64)
    residency[0, :5] = torch.arange(5)
    residency[2, 50:55] = torch.arange(5, 10)
    host_index = torch.arange(r * t).reshape(r, t)
    ref_state = HiSparseState.create(r, slots)
    state = HiSparseState.create(r, slots, device=DEVICE)
    sources = set()
    for step in range(1, 6):
        topk = torch.stack([torch.randperm(t, generator=gen)[:k] for _ in range(r)])
        topk[1, 5:] = -1  # a short prompt
        want, want_src = hisparse_gather_ref(topk, residency, host_index, device, host, ref_state, step)
        got, got_src = hisparse_gather(
            topk.to(DEVICE), residency.to(DEVICE), host_index.to(DEVICE), device.to(DEVICE), host, state, step
        )
        assert torch.equal(got.cpu(), want) and torch.equal(got_src.cpu(), want_src)
        assert torch.equal(state.hot_token.cpu(), ref_state.hot_token)
        assert torch.equal(state.hot_last_used.cpu(), ref_state.hot_last_used)
        assert torch.equal(state.hot_rows.cpu(), ref_state.hot_rows)
        sources |= set(want_src.flatten().tolist())
    assert sources == {-1, 0, 1, 2}  # every path was exercised


@pytest.mark.parametrize("base_e", [True, False])
def test_plus_inf_lse_is_an_empty_shard_in_the_kernels(base_e: bool) -> None:
    # vLLM treats +inf (and NaN) LSEs as -inf; the merge must ignore such a shard, and the correction must zero it.
    outs, lses = _partials(4, 3, 4, 32, seed=3)
    clean = lses.clone()
    lses[2, 0, :] = float("inf")  # shard 2 is poisoned for token 0, every head
    lses[3, 2, 1] = float("inf")
    clean[2, 0, :] = float("-inf")
    clean[3, 2, 1] = float("-inf")
    truth, truth_lse = lse_merge_ref(outs, clean, base_e=base_e)
    out, lse = lse_merge(outs.float(), lses.float(), base_e=base_e)
    assert torch.isfinite(out).all()
    assert torch.allclose(out.double(), truth, atol=1e-5)
    finite = torch.isfinite(truth_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert torch.allclose(lse[finite].double(), truth_lse[finite], atol=1e-5)
    for rank in (2, 3, 0):
        want, want_lse = lse_correct_ref(outs[rank], clean, rank, base_e=base_e)
        got, got_lse = lse_correct(outs[rank].float().clone(), lses.float(), rank, base_e=base_e)
        assert torch.isfinite(got).all(), f"rank {rank}"
        assert torch.allclose(got.double(), want, atol=1e-5), f"rank {rank}"
        assert torch.allclose(got_lse[finite].double(), want_lse[finite], atol=1e-5)
    assert (lse_correct(outs[2].float().clone(), lses.float(), 2, base_e=base_e)[0][0] == 0).all()


def test_lse_correct_kernel_fp32_within_fp32_reference_error() -> None:
    # The plugin's one installed kernel, held to an fp32 reference (not fp16): rounding o through fp16 fails this.
    outs, lses = _partials(8, 4, 8, 64, seed=4)
    for rank in (0, 2, 7):
        truth, truth_lse = lse_correct_ref(outs[rank], lses, rank)  # float64 ground truth
        ref, ref_lse = lse_correct_ref(outs[rank].float(), lses.float(), rank)
        out, lse = lse_correct(outs[rank].float().clone(), lses.float(), rank)
        assert out.dtype == torch.float32
        assert_within_ref_error(out, ref, truth, name=f"fp32 corrected out, rank {rank}")
        assert float((out - ref).abs().max()) <= 1e-6 * float(ref.abs().max())
        finite = torch.isfinite(truth_lse)
        assert_within_ref_error(lse[finite], ref_lse[finite], truth_lse[finite], name="corrected lse")


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("mag", [1e4, -1e4, 1e30, -1e30, 3e38])
def test_large_magnitude_lses_give_normalised_weights(mag: float, backend: str) -> None:
    # Weights exp(L_r - max L) / sum: with |L| ~ 1e30, L_r - L rounds to 0 and exp(L_r - L) would sum to N, not 1.
    lses = torch.tensor([[[mag, mag], [mag, mag]], [[mag - 1, mag], [mag, float("-inf")]]], dtype=torch.float32)
    outs = torch.ones(2, 2, 2, 8)
    out, lse = lse_merge(outs, lses, backend=backend)
    assert torch.allclose(out, torch.ones(2, 2, 8), rtol=0, atol=1e-6), out[..., 0]
    assert torch.isfinite(lse).all()
    corrected = sum(lse_correct(outs[r].clone(), lses, r, backend=backend)[0] for r in range(2))
    assert torch.allclose(corrected, torch.ones(2, 2, 8), rtol=0, atol=1e-6), corrected[..., 0]
    # float64 references agree with the analytic weights for an unrepresentable gap of 1
    w = torch.tensor([1.0, float(torch.exp(torch.tensor(-1.0, dtype=torch.float64)))], dtype=torch.float64)
    outs64 = torch.stack([torch.zeros(1, 1, 1, dtype=torch.float64), torch.ones(1, 1, 1, dtype=torch.float64)])
    l64 = torch.tensor([[[1e4]], [[1e4 - 1]]], dtype=torch.float64)
    got, _ = lse_merge(outs64, l64, backend="torch")
    assert abs(float(got) - float(w[1] / w.sum())) < 1e-12
