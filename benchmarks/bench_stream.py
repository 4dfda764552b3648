"""Offline items streamed: peak memory and time of a run of 10,000 to 1,000,000 cases.

Run: .venv/bin/python benchmarks/bench_stream.py [--sizes 10000 100000 1000000]

Each size runs in a fresh process: ``evaluate`` over a generator of cases (never a list)
with the ``retrieval`` metric (computed from ids: offline, no model), writing the run's
``results.jsonl`` and ``summary.json`` into a temporary ``out`` as items finish (so nothing
is kept in memory but the summary's running figures). Printed per size: wall time, items a
second, the process's peak RSS and the size of ``results.jsonl``.

Target: the peak RSS of the largest run within 1.25 x that of the smallest (bounded: it does
not grow with the run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _workload import header, print_table

TARGET_GROWTH = 1.25

CHILD = r"""
import json, resource, sys, tempfile, time
from pathlib import Path
from contextlens import evaluate
from contextlens.schemas import ModelTestCase

n = int(sys.argv[1])

def cases():
    for i in range(n):
        yield ModelTestCase(
            name=f"c{i:07d}",
            input="q",
            retrieved_ids=[f"d{(i + k) % 97}" for k in range(10)],
            relevant_ids=[f"d{i % 97}", f"d{(i % 97 + 1 + i % 50) % 97}"],
        )

with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    run = evaluate(cases(), ["retrieval"], out=tmp, progress=False, cache=False)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size = sum(p.stat().st_size for p in Path(tmp).rglob("results.jsonl"))
    summary = run.summaries["retrieval"]
    print(json.dumps({
        "wall_s": wall,
        "rss_mib": rss,
        "results_mib": size / 2**20,
        "n": summary.n,
        "n_scored": summary.n_scored,
    }))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    header("offline items streamed through evaluate(out=...), retrieval metric, one process each")
    rows, peaks = [], []
    for n in args.sizes:
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(n)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"{n} cases: the run failed:\n{done.stderr[-3000:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        assert found["n"] == n and found["n_scored"] == n, found
        peaks.append(found["rss_mib"])
        rows.append(
            [
                f"{n:,}",
                round(found["wall_s"], 1),
                f"{n / found['wall_s']:,.0f}",
                f"{found['rss_mib']:.0f}",
                f"{found['results_mib']:.0f}",
                round(time.perf_counter() - t0, 1),
            ]
        )
    print_table(
        [
            "cases",
            "run s",
            "items/s",
            "peak RSS MiB",
            "results.jsonl MiB",
            "process s",
        ],
        rows,
    )
    growth = peaks[-1] / peaks[0]
    ok = growth <= TARGET_GROWTH
    print(
        f"{'MET   ' if ok else 'MISSED'} peak RSS {peaks[-1]:.0f} MiB at {args.sizes[-1]:,} "
        f"cases, {growth:.2f}x that at {args.sizes[0]:,} (target <= {TARGET_GROWTH}x)"
    )


if __name__ == "__main__":
    main()
