"""``make bench-kernels``: time the kernels on a GPU, print a table, write JSON. Without a GPU: say so, exit 0.

Measurements (CUDA events, median of ``--iters`` after ``--warmup``):

* ``lse_merge`` (Triton): DCP8 decode shapes, 64 heads x 512 latent dims (GLM-5.x); bytes = read N partial outputs
  + N LSEs + write the merged output and LSE; GB/s against the H200's 4.8 TB/s HBM (SEED-FACTS).
* ``hisparse_gather`` (Triton): every top-k row a miss, read from the pinned host pool (656-byte rows,
  ``index_topk`` = 2,048); GB/s of host reads (the hot-buffer and staging writes are not counted).
* ``prefill step``: one GPU's share of a PCP8 x DCP8 prefill chunk (2,048 new tokens / 8 ranks = 256 local queries,
  64 heads, top-2,048 sparse MLA) at 64K and 248K cached tokens. The DCP all-gather of each layer's cached KV
  (7/8 of ``cached x 656 B`` arrives from peers) is modelled on one GPU as a device-to-device copy of that size;
  "sequential" issues it before the layer's compute, "overlap" issues layer l+1's copy on a side stream while
  layer l computes. Attention runs through the torch reference on bf16 rows; absolute times are therefore not
  FlashMLA's, the difference between the two schedules is the point.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

#: H200 SXM HBM3e bandwidth, bytes/s (SEED-FACTS "Hardware facts used": 4.8 TB/s).
H200_HBM_BYTES_PER_S = 4.8e12


def _time(fn: Callable[[], object], warmup: int, iters: int) -> float:
    """Median seconds per call (CUDA events)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def bench_lse_merge(warmup: int, iters: int) -> list[dict[str, Any]]:
    """LSE merge at DCP8, 64 heads x 512 dims, bf16 outputs, fp32 LSEs."""
    from glm_kernels.dcp import lse_merge  # noqa: PLC0415

    rows = []
    for tokens in (64, 1024, 8192):
        n, h, d = 8, 64, 512
        outs = torch.randn(n, tokens, h, d, device="cuda", dtype=torch.bfloat16)
        lses = torch.randn(n, tokens, h, device="cuda", dtype=torch.float32)
        sec = _time(lambda: lse_merge(outs, lses), warmup, iters)
        moved = outs.numel() * 2 + lses.numel() * 4 + tokens * h * (d * 2 + 4)
        rows.append({
            "kernel": "lse_merge", "shape": f"N={n} B={tokens} H={h} D={d}", "seconds": sec,
            "gb_per_s": moved / sec / 1e9, "fraction_of_hbm": moved / sec / H200_HBM_BYTES_PER_S,
        })  # fmt: skip
    return rows


def bench_hisparse(warmup: int, iters: int) -> list[dict[str, Any]]:
    """All-miss HiSparse gather from pinned host memory."""
    from glm_kernels.hisparse import HiSparseState, hisparse_gather  # noqa: PLC0415
    from glm_kernels.sparse_mla import ROW_BYTES  # noqa: PLC0415
    from glm_kernels.triton_kernels import launch_hisparse_gather  # noqa: PLC0415

    rows = []
    for requests in (1, 8, 32):
        k, tokens = 2048, 65536
        host = torch.randint(0, 256, (requests * tokens, ROW_BYTES), dtype=torch.uint8).pin_memory()
        device_cache = torch.zeros((1, ROW_BYTES), dtype=torch.uint8, device="cuda")
        residency = torch.full((requests, tokens), -1, dtype=torch.int64, device="cuda")
        host_index = torch.arange(requests * tokens, device="cuda").reshape(requests, tokens)
        # Each call asks for k positions never seen in the last 32 calls, while the hot buffer (2k rows, vLLM's
        # default device_buffer_size) holds only the last two calls' rows: every row is a host miss.
        state = HiSparseState.create(requests, 2 * k, device="cuda")
        base = torch.arange(k, device="cuda")[None, :].expand(requests, k)
        step = [1]
        hisparse_gather(base.contiguous(), residency, host_index, device_cache, host, state, 1)  # validated once

        def run() -> None:
            step[0] += 1
            topk = ((base + step[0] * k) % tokens).contiguous()
            launch_hisparse_gather(topk, residency, host_index, device_cache, host, state, step[0])

        sec = _time(run, warmup, iters)
        moved = requests * k * ROW_BYTES
        rows.append({
            "kernel": "hisparse_gather (all misses)", "shape": f"R={requests} K={k} row={ROW_BYTES}B",
            "seconds": sec, "gb_per_s": moved / sec / 1e9, "fraction_of_hbm": None,
        })  # fmt: skip
    return rows


def bench_overlap(warmup: int, iters: int, layers: int = 4) -> list[dict[str, Any]]:
    """Prefill step per GPU with and without the overlapped DCP all-gather (modelled as a D2D copy)."""
    from glm_kernels.sparse_mla import QK_DIM, ROW_BYTES, sparse_mla_attention_ref  # noqa: PLC0415

    rows = []
    local_q, heads, k = 256, 64, 2048
    for cached in (65536, 253952):
        gathered_bytes = cached * ROW_BYTES * 7 // 8
        src = torch.empty(gathered_bytes, dtype=torch.uint8, device="cuda")
        dst = [torch.empty_like(src) for _ in range(2)]
        q = torch.randn(local_q, heads, QK_DIM, device="cuda", dtype=torch.bfloat16)
        kv = torch.randn(cached, QK_DIM, device="cuda", dtype=torch.bfloat16)
        idx = torch.randint(0, cached, (local_q, k), device="cuda")
        side = torch.cuda.Stream()

        def compute() -> None:
            sparse_mla_attention_ref(q, kv, idx)

        def sequential() -> None:
            for layer in range(layers):
                dst[layer % 2].copy_(src)
                compute()

        def overlapped() -> None:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                dst[0].copy_(src)
            for layer in range(layers):
                torch.cuda.current_stream().wait_stream(side)
                if layer + 1 < layers:
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        dst[(layer + 1) % 2].copy_(src)
                compute()

        t_seq = _time(sequential, warmup, iters) / layers
        t_ovl = _time(overlapped, warmup, iters) / layers
        t_cmp = _time(compute, warmup, iters)
        rows.append({
            "kernel": "prefill layer step", "shape": f"cached={cached} local_q={local_q} H={heads} topk={k}",
            "seconds": t_seq, "overlap_seconds": t_ovl, "compute_only_seconds": t_cmp,
            "gather_overhead_sequential": t_seq / t_cmp - 1, "gather_overhead_overlap": t_ovl / t_cmp - 1,
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m glm_kernels.bench``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=Path("kernels/bench-results.json"), help="where to write JSON")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench-kernels: no CUDA GPU on this machine; nothing timed (correctness is in make test-kernels)")
        return 0
    rows = bench_lse_merge(args.warmup, args.iters) + bench_hisparse(args.warmup, args.iters)
    rows += bench_overlap(args.warmup, args.iters)
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__, "host": platform.node(),
    }  # fmt: skip
    print(f"{'kernel':32} {'shape':44} {'time':>10} {'GB/s':>8} {'extra'}")
    for row in rows:
        gbs = f"{row['gb_per_s']:.0f}" if row.get("gb_per_s") is not None else "-"
        if "overlap_seconds" in row:
            extra = (f"overlap {row['overlap_seconds'] * 1e3:.3f} ms; gather overhead "
                     f"{row['gather_overhead_sequential']:+.1%} -> {row['gather_overhead_overlap']:+.1%}")  # fmt: skip
        elif row.get("fraction_of_hbm") is not None:
            extra = f"{row['fraction_of_hbm']:.0%} of H200 HBM"
        else:
            extra = ""
        print(f"{row['kernel']:32} {row['shape']:44} {row['seconds'] * 1e3:8.3f}ms {gbs:>8} {extra}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
