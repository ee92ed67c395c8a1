"""Plan + validate + render benchmark of the seed CR, in-process (``make bench``).

One iteration = what ``glmctl validate``/``render`` and every operator reconcile do before talking to
the API server: parse the CR, plan its capacity, run every rule and render every child. The target is
a median under 50 ms; the benchmark prints the median and exits 1 when it is over.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import yaml

from glm_operator.api.load import parse
from glm_operator.plan import rules
from glm_operator.plan.capacity import plan_deployment
from glm_operator.render.manifests import render

SEED = Path(__file__).resolve().parent.parent / "examples" / "glm-5.3-pd.yaml"
RUNS = 200
TARGET_MS = 50.0


def one_iteration(doc: dict[str, object]) -> float:
    """Seconds for parse → plan → rules → render of ``doc``."""
    started = time.perf_counter()
    deployment = parse(doc)
    plan_deployment(deployment.spec)
    rules.check(deployment.spec)
    render(deployment)
    return time.perf_counter() - started


def main() -> int:
    """Print the median (and spread) over :data:`RUNS` iterations; 1 if over :data:`TARGET_MS`."""
    doc = yaml.safe_load(SEED.read_text())
    for _ in range(5):  # warm-up: imports, pydantic validators, regex caches
        one_iteration(doc)
    samples = sorted(one_iteration(doc) * 1000 for _ in range(RUNS))
    median = statistics.median(samples)
    p90 = samples[int(0.9 * len(samples))]
    print(f"plan + validate + render of {SEED.name}: median {median:.2f} ms, p90 {p90:.2f} ms, "
          f"min {samples[0]:.2f} ms (n={RUNS}, target < {TARGET_MS:.0f} ms)")
    return 0 if median < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
