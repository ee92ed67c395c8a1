"""8 real processes (gloo, CPU) run the scaled-down GLM-like stack under PCP8 x DCP8 prefill (with and without the
overlapped all-gather) and DCP8 decode with the LSE merge; every result is compared with a single-process
reference by flash-attention's rule (error vs float64 ground truth <= 2 x the fp32 reference's own error)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from glm_kernels import stack
from glm_kernels.dcp import dcp_owner, dcp_shard_len
from glm_kernels.pcp import pcp_local_positions
from glm_kernels.sparse_mla import KV_LORA_RANK, indexer_topk, quantize_fp8_ds_mla, sparse_mla_attention_ref
from glm_kernels.testing import HAS_TRITON, assert_within_ref_error, run_ranks

pytestmark = pytest.mark.distributed

WORLD = 8
CFG = stack.StackConfig(num_layers=3, hidden=64, num_heads=64, topk=32, index_heads=4, index_dim=32)
PREFILL = [
    {"chunks": [37, 45], "interleave": 1, "seed": 3},  # odd lengths, not multiples of 16, a cached prefix
    {"chunks": [5], "interleave": 1, "seed": 4},  # shorter than top-k; PCP and DCP shards of ranks 5..7 empty
    {"chunks": [13, 3], "interleave": 4, "seed": 5},  # block interleave; a 3-token chunk on 8 ranks
    {"chunks": [32, 16], "interleave": 1, "seed": 6},  # multiples of 2N: no padding
]
DECODE_LENGTHS = [5, 37, 61]  # tokens before the decode token (5: shorter than top-k, DCP ranks 6, 7 empty)
DECODE = [
    {"interleave": 1, "comm": "merge", "backend": "torch"},
    {"interleave": 4, "comm": "correct_allreduce", "backend": "torch"},
]
if HAS_TRITON:
    DECODE += [
        {"interleave": 1, "comm": "correct_allreduce", "backend": "triton"},
        {"interleave": 4, "comm": "merge", "backend": "triton"},
    ]


def _requests(weights: stack.StackWeights) -> list[dict[str, Any]]:
    requests = []
    for i, length in enumerate(DECODE_LENGTHS):
        x0 = stack.make_inputs(CFG, length + 1, seed=10 + i)
        _, inputs, rows, _ = stack.reference_forward(weights, x0, torch.float32)
        requests.append({
            "rows": [quantize_fp8_ds_mla(r[:length, :KV_LORA_RANK], r[:length, KV_LORA_RANK:]) for r in rows],
            "index_k": stack.index_keys(weights, x0[:length]),
            "x0": x0[length],
            "inputs": [x[length] for x in inputs],
        })  # fmt: skip
    return requests


@pytest.fixture(scope="module")
def run() -> dict[str, Any]:
    weights = stack.make_weights(CFG)
    requests = _requests(weights)
    results = run_ranks({"config": CFG, "prefill": PREFILL, "requests": requests, "decode": DECODE}, WORLD)
    return {"weights": weights, "requests": requests, "ranks": results}


def test_the_cases_cover_empty_shards() -> None:
    assert [pcp_local_positions(5, WORLD, r).numel() for r in range(WORLD)][5:] == [0, 0, 0]
    assert sum(pcp_local_positions(3, WORLD, r).numel() == 0 for r in range(WORLD)) == 5
    assert dcp_shard_len(13, WORLD, 7, 4) == 0
    assert dcp_shard_len(5, WORLD, 6) == 0 and dcp_shard_len(5, WORLD, 7) == 0
    assert min(DECODE_LENGTHS) < CFG.topk and PREFILL[1]["chunks"][0] < CFG.topk


@pytest.mark.parametrize("case", range(len(PREFILL)), ids=[str(p["chunks"]) for p in PREFILL])
def test_pcp8_dcp8_prefill_matches_single_process_reference(run: dict[str, Any], case: int) -> None:
    spec = PREFILL[case]
    x0 = stack.make_inputs(CFG, sum(spec["chunks"]), spec["seed"])
    ref = stack.reference_forward(run["weights"], x0, torch.float32)[0]
    truth = stack.reference_forward(run["weights"], x0, torch.float64)[0]
    ranks = [r["prefill"][case] for r in run["ranks"]]
    for mode in ("sequential", "overlap"):
        out = ranks[0][mode]
        assert all(torch.equal(r[mode], out) for r in ranks), f"{mode}: ranks disagree"
        assert_within_ref_error(out, ref, truth, name=f"prefill {spec['chunks']} {mode}")
    assert torch.equal(ranks[0]["overlap"], ranks[0]["sequential"]), "overlap changed the result"


def test_overlap_starts_the_next_gather_before_computing_the_layer(run: dict[str, Any]) -> None:
    ranks = run["ranks"]
    seq = ranks[0]["prefill"][0]["trace sequential"]
    ovl = ranks[0]["prefill"][0]["trace overlap"]
    second_seq = seq[seq.index("end of chunk") + 1 :]
    second_ovl = ovl[ovl.index("end of chunk") + 1 :]
    for layer in range(CFG.num_layers - 1):
        assert second_ovl.index(f"start {layer + 1}") < second_ovl.index(f"compute {layer}")
        assert second_seq.index(f"start {layer + 1}") > second_seq.index(f"compute {layer}")


DECODE_IDS = [f"I{d['interleave']}-{d['comm']}-{d['backend']}" for d in DECODE]


@pytest.mark.parametrize("case", range(len(DECODE)), ids=DECODE_IDS)
def test_dcp8_decode_matches_single_process_reference(run: dict[str, Any], case: int) -> None:
    weights, requests = run["weights"], run["requests"]
    ranks = [r["decode"][case] for r in run["ranks"]]
    interleave = DECODE[case]["interleave"]
    first = ranks[0]
    for r in ranks[1:]:
        assert torch.equal(r["topk"], first["topk"])
        assert all(torch.equal(a, b) for a, b in zip(r["outputs"], first["outputs"], strict=True))
    positions = torch.tensor(DECODE_LENGTHS)
    owners = dcp_owner(positions, WORLD, interleave)
    w32, w64 = weights.to(torch.float32), weights.to(torch.float64)
    for b, (length, req) in enumerate(zip(DECODE_LENGTHS, requests, strict=True)):
        keys = torch.cat([req["index_k"], stack.index_keys(weights, req["x0"][None])])
        iq, iw = stack.index_queries(weights, req["x0"][None])
        want_topk, _ = indexer_topk(iq, iw, keys, torch.tensor([length]), CFG.topk)
        assert torch.equal(first["topk"][b], want_topk[0]), f"request {b}: exact DCP top-k differs"
        pos = torch.tensor([length])
        for li in range(CFG.num_layers):
            new_row = ranks[int(owners[b])]["written"][li][b : b + 1]
            x32 = req["inputs"][li][None].float()
            kv_new = stack.kv_rows(w32.layers[li], x32, pos)
            assert torch.equal(new_row, quantize_fp8_ds_mla(kv_new[:, :KV_LORA_RANK], kv_new[:, KV_LORA_RANK:]))
            rows = torch.cat([req["rows"][li], new_row])  # the cache is data: same bytes for all three
            outs = {}
            for name, w, dt in (("ref", w32, torch.float32), ("truth", w64, torch.float64)):
                x = req["inputs"][li][None].to(dt)
                q = stack.queries(w.layers[li], x, pos)
                attn, _ = sparse_mla_attention_ref(q, rows, want_topk)
                outs[name] = stack.project(w.layers[li], x, attn)
            assert_within_ref_error(
                first["outputs"][li][b : b + 1], outs["ref"], outs["truth"], name=f"decode request {b} layer {li}"
            )
