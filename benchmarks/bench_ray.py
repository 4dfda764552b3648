"""Scale out on Ray: offline scoring on 1 worker vs 2, the judge path under one cluster-wide
limit, and an estimate of a 100-node run of 10 million items from the measured costs.

Run: .venv/bin/python benchmarks/bench_ray.py [--items 20000] [--judge-items 2000]
     [--cap 8] [--latency 0.05] [--batch 512]

* Offline: ``context-similarity`` with the bundled embedder (the CPU-bound path), ``--items``
  synthetic cases (a 6-10 word question, a 10-16 word answer, one 12-20 word context; every
  text distinct, so no memo helps), the cache off, on a local Ray cluster of this machine's
  CPUs: one worker (one CPU, one embedder thread), then two. The same items each time; the
  summaries of the two runs must be equal.
* Judge: ``context-precision`` against a FakeOpenAIServer in its own process that answers
  after ``--latency`` seconds and rejects with 429 any call beyond ``--cap`` in flight; two
  workers share one limit of ``--cap``. The server's peak in flight and its 429s show whether
  the cap held.
* Estimate: from the per-item costs measured here, what bounds 10 million items on 100 nodes
  like this one (the embedder, the judge's rate limit, the driver), and the driver's memory.

Ray's start is timed apart; each run's time includes starting its workers. Other work on the
machine skews every timing: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import tracemalloc
from typing import Any

os.environ["CONTEXTLENS_CACHE"] = "off"

import ray
from _workload import RemoteServer, load_average, print_table, ray_cpu

from contextlens import evaluate
from contextlens.runner import Tally
from contextlens.scale.ray import RayExecutor
from contextlens.scale.ray.driver import BATCHES_PER_WORKER

_WORDS = (
    "the a of to in on for with by from model context answer question retrieval document "
    "passage user customer order refund shipping delivery invoice account password reset "
    "error server request response latency cache database index vector search ranking "
    "summary report revenue growth market product feature release version update security "
    "network storage memory battery screen camera weather river city harbour school library "
    "museum history science energy forest ocean island travel train flight hotel recipe "
    "garden season policy warranty support hours weekend payment card bank transfer is was "
    "will can should must has does explains shows requires allows quickly often never always"
).split()


def make_items(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` test cases; no text repeats."""
    rng = random.Random(seed)
    seen: set[str] = set()

    def fresh(lo: int, hi: int, end: str) -> str:
        while True:
            body = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(lo, hi)))
            text = body[0].upper() + body[1:] + end
            if text not in seen:
                seen.add(text)
                return text

    return [
        {
            "name": f"item-{i:06d}",
            "input": fresh(6, 10, "?"),
            "actual_output": fresh(10, 16, "."),
            "expected_output": fresh(6, 12, "."),
            "retrieval_context": [fresh(12, 20, ".")],
        }
        for i in range(n)
    ]


def cpu_seconds() -> float:
    return time.process_time()


def offline(items: list[dict[str, Any]], workers: int, batch: int) -> dict[str, Any]:
    executor = RayExecutor(num_workers=workers, batch_size=batch)
    used: list[float] = []

    def last_cpu(done: int, total: int | None, seconds: float) -> None:
        if done == total:  # the workers are stopped when the run ends: read them before
            used.append(ray_cpu(b"ray::Worker"))

    t0, c0 = time.perf_counter(), cpu_seconds()
    run = evaluate(items, ["context-similarity"], cache=False, progress=last_cpu, executor=executor)
    wall = time.perf_counter() - t0
    summary = run.summaries["context-similarity"]
    assert summary.n == len(items) and summary.n_failed == 0, summary
    return {
        "workers": workers,
        "wall": wall,
        "driver_cpu": cpu_seconds() - c0,
        "workers_cpu": used[-1],
        "summary": (summary.mean, summary.ci_low, summary.ci_high),
    }


def judged(n: int, cap: int, latency: float) -> dict[str, Any]:
    items = make_items(n, seed=11)
    with RemoteServer(latency=latency, max_in_flight=cap) as server:
        executor = RayExecutor(num_workers=2, batch_size=4 * cap)
        marks: list[tuple[int, float]] = []
        t0 = time.perf_counter()
        run = evaluate(
            items,
            ["context-precision"],
            judge=f"{server.base_url}#judge",
            max_concurrency=cap,
            cache=False,
            progress=lambda done, total, seconds: marks.append((done, seconds)),
            executor=executor,
        )
        wall = time.perf_counter() - t0
        stats = server.stats()
    # the steady rate: from the first finished batch (the workers are up) to the last
    (first, t_first), (last, t_last) = marks[0], marks[-1]
    steady = (last - first) / (t_last - t_first) if t_last > t_first else float("nan")
    summary = run.summaries["context-precision"]
    (limits,) = executor.limits.values()
    return {
        "items": n,
        "wall": wall,
        "calls": stats["calls"],
        "peak": stats["peak_in_flight"],
        "rejected": stats["status_counts"].get(429, 0),
        "limiter_peak": limits["peak"],
        "failed": summary.n_failed,
        "steady": steady,
    }


def tally_bytes(n: int = 100_000) -> float:
    """Driver memory per item for the summaries: a tally row (case index and score)."""
    tracemalloc.start()
    tally = Tally()
    for i in range(n):
        tally.scores.append((i, [random.random()]))
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return size / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--judge-items", type=int, default=2_000)
    parser.add_argument("--cap", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=512)
    args = parser.parse_args()

    print("== bench_ray: scale out on Ray")
    print(f"   {os.cpu_count()} CPUs; {load_average()}")
    t0 = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    print(f"   Ray local cluster started in {time.perf_counter() - t0:.1f} s")

    items = make_items(args.items)
    one = offline(items, 1, args.batch)
    print(f"   after 1 worker: {load_average()}")
    two = offline(items, 2, args.batch)
    print(f"   after 2 workers: {load_average()}")
    assert one["summary"] == two["summary"], (one["summary"], two["summary"])
    ratio = one["wall"] / two["wall"]
    print(f"\n-- offline context-similarity, {args.items:,} items, batches of {args.batch}")
    print_table(
        ["workers", "wall s", "items/s", "workers' CPU s", "cores had", "driver CPU ms/item"],
        [
            [
                r["workers"],
                round(r["wall"], 1),
                round(args.items / r["wall"], 1),
                round(r["workers_cpu"], 1),
                round(r["workers_cpu"] / r["wall"], 2),
                round(1000 * r["driver_cpu"] / args.items, 3),
            ]
            for r in (one, two)
        ],
    )
    verdict = "meets" if ratio >= 1.6 else "misses"
    print(f"   2 workers vs 1: {ratio:.2f}x ({verdict} the 1.6x asked on 2 cores)")
    if ratio < 1.6:
        print(
            f"   the machine is shared ({load_average()}): the two workers had "
            f"{two['workers_cpu'] / two['wall']:.2f} cores on average, not 2"
        )
    per_item = [1000 * r["workers_cpu"] / args.items for r in (one, two)]
    print(
        f"   workers' CPU per item (their start included): {per_item[0]:.2f} ms on 1 worker, "
        f"{per_item[1]:.2f} ms on 2"
    )
    print("   the two runs' mean and interval are equal:", one["summary"] == two["summary"])

    judge = judged(args.judge_items, args.cap, args.latency)
    ideal = args.cap / args.latency
    print(
        f"\n-- judge path: context-precision, {args.judge_items:,} items, 2 workers, "
        f"server cap {args.cap} in flight, {1000 * args.latency:.0f} ms per call"
    )
    print_table(
        ["cap", "peak in flight", "429s", "calls", "failed", "items/s", "steady/s", "cap/latency"],
        [
            [
                args.cap,
                judge["peak"],
                judge["rejected"],
                judge["calls"],
                judge["failed"],
                round(judge["items"] / judge["wall"], 1),
                round(judge["steady"], 1),
                round(ideal, 1),
            ]
        ],
    )
    held = judge["peak"] <= args.cap and judge["rejected"] == 0
    print(f"   the cap {'held' if held else 'did NOT hold'}: peak {judge['peak']} <= {args.cap}")

    # -- the estimate ------------------------------------------------------------------
    n, nodes, cores = 10_000_000, 100, os.cpu_count() or 2
    embed_cpu = two["workers_cpu"] / args.items  # CPU-seconds per item, startup included
    driver_cpu = two["driver_cpu"] / args.items
    embed_s = n * embed_cpu / (nodes * cores)
    driver_s = n * driver_cpu
    per_item_bytes = tally_bytes()
    window = BATCHES_PER_WORKER * nodes * cores * args.batch
    print(f"\n-- estimate: {n:,} items on {nodes} nodes of {cores} CPUs like this one")
    print(
        f"   embedder: {1000 * embed_cpu:.2f} CPU-ms per item measured -> "
        f"{n:,} x {embed_cpu:.5f} s / {nodes * cores} CPUs = {embed_s / 60:.0f} min"
    )
    print(
        f"   judge: one call per item per judged metric; the provider's limit L calls in "
        f"flight at latency t bounds it at L/t calls/s: with L={args.cap}, t={args.latency}s "
        f"measured {judge['steady']:.0f}/s steady of {ideal:.0f}/s; at L=1000, "
        f"t=1 s, 10M calls take {n / 1000 / 3600:.1f} h whatever the number of nodes"
    )
    print(
        f"   driver: {1000 * driver_cpu:.3f} CPU-ms per item (feeding batches, tallying, "
        f"writing results.jsonl) -> {driver_s / 60:.0f} min of one core for {n:,} items"
    )
    bound = max(("the embedder", embed_s), ("the driver", driver_s), key=lambda p: p[1])
    print(
        f"   offline, the run is bounded by {bound[0]} (~{bound[1] / 60:.0f} min); with a "
        "judge, by the judge's rate limit"
    )
    print(
        f"   driver memory: {per_item_bytes:.0f} bytes per item for the summaries' tally "
        f"-> {n * per_item_bytes / 2**30:.1f} GiB for {n:,} items, plus the cases in flight: "
        f"{BATCHES_PER_WORKER} batches of {args.batch} per worker, {window:,} cases for "
        f"{nodes * cores} workers"
    )
    ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
