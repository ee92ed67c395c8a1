"""Test helpers: flash-attention's tolerance rule and an N-process gloo harness for the PCP/DCP programs.

The harness runs real processes (``torch.multiprocessing`` with ``spawn``), one per rank, with the gloo backend on
CPU; each rank writes its results to ``out_dir/rank{r}.pt`` for the test process to check.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from glm_kernels import stack
from glm_kernels.decode import decode_step, shard_request
from glm_kernels.overlap import PrefillCache, PrefillGroups, prefill_chunk

__all__ = ["DEVICE", "HAS_TRITON", "assert_within_ref_error", "max_error", "run_ranks"]

#: Whether triton is importable (the ``kernels`` extra installs it).
HAS_TRITON = importlib.util.find_spec("triton") is not None
#: Where kernel tests put device tensors: the GPU when there is one, else the CPU (Triton interpreter).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def max_error(out: torch.Tensor, truth: torch.Tensor) -> float:
    """``max |out - truth|`` computed in float64."""
    if out.shape != truth.shape:
        raise ValueError(f"out.shape={tuple(out.shape)} != truth.shape={tuple(truth.shape)}")
    return float((out.double() - truth.double()).abs().max()) if out.numel() else 0.0


def assert_within_ref_error(
    out: torch.Tensor, ref: torch.Tensor, truth: torch.Tensor, *, factor: float = 2.0, name: str = "out"
) -> tuple[float, float]:
    """Flash-attention's rule (Dao-AILab/flash-attention ``tests/test_flash_attn.py``): the implementation's error
    against a float64 ground truth is at most ``factor`` times the error of the reference computed in the same
    (test) dtype. Returns ``(error, reference error)``."""
    err, ref_err = max_error(out, truth), max_error(ref, truth)
    assert err <= factor * ref_err, f"{name}: max error {err:.3e} > {factor} x reference error {ref_err:.3e}"
    return err, ref_err


def _run_prefill(case: dict[str, Any], weights: stack.StackWeights, groups: PrefillGroups) -> dict[str, Any]:
    cfg = weights.config
    chunks: list[int] = case["chunks"]
    x0 = stack.make_inputs(cfg, sum(chunks), case["seed"])
    results: dict[str, Any] = {}
    for overlap in (False, True):
        cache = PrefillCache.empty(cfg, torch.float32)
        outs: list[torch.Tensor] = []
        trace: list[str] = []
        for chunk in chunks:
            x_out, cache = prefill_chunk(
                weights, x0, cache, chunk, groups, torch.float32, overlap=overlap, trace=trace
            )
            outs.append(x_out)
            trace.append("end of chunk")
        results["overlap" if overlap else "sequential"] = torch.cat(outs)
        results[f"trace {'overlap' if overlap else 'sequential'}"] = trace
    return results


def _run_decode(
    case: dict[str, Any], weights: stack.StackWeights, requests: list[dict[str, Any]], group: dist.ProcessGroup
) -> dict[str, Any]:
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    interleave = case["interleave"]
    shards = [shard_request(r["rows"], r["index_k"], world, rank, interleave) for r in requests]
    x0 = torch.stack([r["x0"] for r in requests])
    inputs = [torch.stack([r["inputs"][li] for r in requests]) for li in range(weights.config.num_layers)]
    outputs, topk, written = decode_step(
        weights, x0, inputs, shards, group, torch.float32,
        interleave=interleave, comm=case["comm"], backend=case["backend"],
    )  # fmt: skip
    return {"outputs": outputs, "topk": topk, "written": written}


def _rank_main(rank: int, world: int, init_file: str, case_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        case = torch.load(case_file, weights_only=False)
        weights = stack.make_weights(stack.StackConfig(**case["config"]))
        groups = PrefillGroups(pcp=dist.new_group(), dcp=dist.new_group())
        prefill = []
        for pc in case.get("prefill", []):
            groups.interleave = pc["interleave"]
            prefill.append(_run_prefill(pc, weights, groups))
        decode = [_run_decode(dc, weights, case["requests"], groups.dcp) for dc in case.get("decode", [])]
        torch.save({"prefill": prefill, "decode": decode}, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_ranks(case: dict[str, Any], world: int = 8) -> list[dict[str, Any]]:
    """Run ``case`` on ``world`` gloo ranks (real processes); returns each rank's results.

    ``case``: ``{"config": StackConfig as dict, "prefill": [{"chunks": [...], "interleave": I, "seed": s}],
    "requests": [{"rows": [L] of uint8 [T, 656], "index_k": [T, Di], "x0": [hidden], "inputs": [L] of [hidden]}],
    "decode": [{"interleave": I, "comm": ..., "backend": ...}]}``.
    """
    if sys.platform == "linux":
        # Bind gloo to loopback: the ranks are local, and a hostname that does not resolve would otherwise fail.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory(prefix="glm-kernels-ranks-") as tmp:
        case = dict(case)
        if dataclasses.is_dataclass(case.get("config")):
            case["config"] = dataclasses.asdict(case["config"])
        case_file = os.path.join(tmp, "case.pt")
        torch.save(case, case_file)
        mp.start_processes(
            _rank_main, args=(world, os.path.join(tmp, "init"), case_file, tmp), nprocs=world, start_method="spawn"
        )
        return [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(world)]
