"""Cost of BayesianMode.estimate: wall time and peak memory for n interactions x 5,000 draws.

Run: .venv/bin/python benchmarks/bench_stats.py [--draws 5000] [--repeats 3] [--single-thread]
     [--sizes 100 10000 100000]

Each size runs in a fresh subprocess, so the ru_maxrss delta (peak resident set size of the
process during the estimate, minus the RSS high-water mark before it) is not hidden by an
earlier, larger run. tracemalloc peak counts Python and numpy allocations only (numpy reports
its buffers to tracemalloc); it is measured in a separate run because tracing slows allocations.
Time is the best of ``--repeats`` wall-clock runs; CPU is the process CPU time of that run (both
threads), so CPU / wall shows how much the second core helped.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from contextlens.stats import BayesianMode
from contextlens.stats import bootstrap as stats

TARGET_S = 1.0
TARGET_BYTES = 1 << 30


#: The data kinds: judge scores on the anchored 0.0/0.2/.../1.0 scale with equal weights;
#: continuous scores (offline estimates) with equal weights; continuous scores with distinct
#: weights (the worst case: nothing can share a draw).
KINDS = ("judge", "continuous", "weighted")


def _data(n: int, kind: str = "weighted") -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if kind == "judge":
        return rng.choice(np.linspace(0.0, 1.0, 6), size=n), np.full(n, 1.0 / n)
    values = rng.beta(2.0, 5.0, size=n)  # continuous scores in [0, 1]: no duplicates
    if kind == "continuous":
        return values, np.full(n, 1.0 / n)
    weights = rng.random(n) + 0.5
    return values, weights / weights.sum()


def measure_one(
    n: int, draws: int, repeats: int, threads: int | None, kind: str
) -> dict[str, float]:
    """Measurements for one size, in this process (called in a subprocess by ``main``)."""
    if threads is not None:
        stats._workers = lambda: threads  # benchmark-only override of the thread count
    values, weights = _data(n, kind)
    mode = BayesianMode(mc_samples=draws)
    mode.estimate(values[:1000], weights[:1000], key="warm-up")

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    best_wall, best_cpu = float("inf"), float("inf")
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        est = mode.estimate(values, weights, key="bench")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall < best_wall:
            best_wall, best_cpu = wall, cpu
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    tracemalloc.start()
    mode.estimate(values, weights, key="bench")
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows = max(1, min(draws, stats._CHUNK_ELEMENTS // n))
    chunks = -(-draws // rows)
    d = values - np.dot(weights, values)
    step = float(np.abs(d).max()) / stats._SNAP_LEVELS
    grouped = stats._groups(d, weights, snap=n * draws >= stats._SNAP_MIN_ELEMENTS, step=step)
    exact = grouped is None and n < stats.NORMAL_LIMIT_MIN
    parallel = exact and chunks > 1 and n * draws >= stats._PARALLEL_MIN_ELEMENTS
    return {
        "n": n,
        "threads": stats._workers() if parallel else 1,
        "wall_s": best_wall,
        "cpu_s": best_cpu,
        "traced_peak_bytes": traced_peak,
        "maxrss_delta_bytes": (rss_after - rss_before) * 1024,
        "maxrss_bytes": rss_after * 1024,
        "ci_width": est.ci_high - est.ci_low,
    }


def _run_child(
    n: int, draws: int, repeats: int, threads: int | None, kind: str
) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", str(n), "--draws", str(draws)]
    cmd += ["--repeats", str(repeats), "--data", kind]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _mib(b: float) -> str:
    return f"{b / 2**20:.1f}"


def _row(kind: str, n: int, draws: int, r: dict[str, float]) -> None:
    ok = r["wall_s"] < TARGET_S and r["maxrss_delta_bytes"] < TARGET_BYTES
    ns = r["wall_s"] / (n * draws) * 1e9
    print(
        f"{kind:>10} {n:>8} {r['threads']:>3} {r['wall_s']:>7.3f} {r['cpu_s']:>6.2f} {ns:>7.2f} "
        f"{_mib(r['traced_peak_bytes']):>15} {_mib(r['maxrss_delta_bytes']):>16} "
        f"{_mib(r['maxrss_bytes']):>10} {'ok' if ok else 'MISSED':>7}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--single-thread", action="store_true", help="also time 1 thread")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--data", choices=KINDS, nargs="+", default=list(KINDS))
    args = parser.parse_args()

    if args.child is not None:
        kind = args.data[0]
        print(json.dumps(measure_one(args.child, args.draws, args.repeats, args.threads, kind)))
        return

    print(
        f"BayesianMode.estimate, {args.draws} draws, best of {args.repeats}; "
        f"{os.cpu_count()} CPUs, numpy {np.__version__}, "
        f"load average before: {os.getloadavg()[0]:.2f}"
    )
    header = (
        f"{'data':>10} {'n':>8} {'thr':>3} {'wall s':>7} {'cpu s':>6} {'ns/elt':>7} "
        f"{'tracemalloc MiB':>15} {'maxrss delta MiB':>16} {'maxrss MiB':>10} {'target':>7}"
    )
    print(header)
    thread_counts: list[int | None] = [None, 1] if args.single_thread else [None]
    for kind in args.data:
        for n in args.sizes:
            for threads in thread_counts:
                r = _run_child(n, args.draws, args.repeats, threads, kind)
                _row(kind, n, args.draws, r)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(
        f"target: < {TARGET_S:.0f} s and < {TARGET_BYTES / 2**30:.0f} GiB "
        "(thr 1 rows, if any, are for comparison)"
    )


if __name__ == "__main__":
    main()
