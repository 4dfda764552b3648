"""What every peer driver shares: arguments, the workload file, timing, the result file.

Standard library only: each driver runs in its own interpreter (the peers' venv for
DeepEval, Ragas and Opik; the project's venv for contextlens).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def parse_args(description: str, metrics: list[str] | None = None) -> argparse.Namespace:
    """The driver's arguments; ``metrics``: the metrics it can run (``--metric``, the first
    by default)."""
    parser = argparse.ArgumentParser(description=description)
    if metrics:
        parser.add_argument("--metric", choices=metrics, default=metrics[0])
    parser.add_argument("--base-url", required=True, help="the fake server, http://HOST:PORT/v1")
    parser.add_argument("--cases", required=True, help="the workload JSON written by bench_peers")
    parser.add_argument("--n", type=int, default=0, help="use the first N cases (0: all)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    return parser.parse_args()


def load_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Dicts with input, actual_output, expected_output, retrieval_context (5 chunks)."""
    with open(args.cases, encoding="utf-8") as handle:
        cases: list[dict[str, Any]] = json.load(handle)
    return cases[: args.n] if args.n else cases


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Timer:
    """Wall and CPU (user+sys, all threads of this process) of the timed block."""

    wall_s: float = math.nan
    cpu_s: float = math.nan


@contextmanager
def timed() -> Iterator[Timer]:
    timer = Timer()
    w0, c0 = time.perf_counter(), _cpu_seconds()
    try:
        yield timer
    finally:
        timer.wall_s = time.perf_counter() - w0
        timer.cpu_s = _cpu_seconds() - c0


def write_result(
    args: argparse.Namespace,
    *,
    library: str,
    version: str,
    method: str,
    timer: Timer,
    scores: list[float | None],
    **extra: Any,
) -> None:
    """The driver's measurements; ``scores`` has None (or NaN) for every failed case."""
    clean = [
        None if s is None or (isinstance(s, float) and math.isnan(s)) else float(s) for s in scores
    ]
    ok = [s for s in clean if s is not None]
    result = {
        "library": library,
        "version": version,
        "method": method,
        "n": len(clean),
        "n_failed": len(clean) - len(ok),
        "mean_score": sum(ok) / len(ok) if ok else None,
        "wall_s": timer.wall_s,
        "cpu_s": timer.cpu_s,
        **extra,
    }
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
