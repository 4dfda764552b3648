"""Engine overhead: 2,000 judge calls at 200 ms latency through ``contextlens.evaluate``.

Run: .venv/bin/python benchmarks/bench_engine_overhead.py [--sessions 400] [--per-session 5]
     [--latency 0.2] [--concurrency 64 16] [--repeats 3]

The ``Context`` metric judges every interaction (one call each, distinct prompts, no cache)
against a FakeOpenAIServer in a child process. The ideal wall time is
calls x latency / concurrency; the engine's overhead is the ratio to it. CPU is this
process's (the client's) user + system time during the run; peak RSS is the process's
high-water mark so far, so rows after the first can only show the same or more.
A warm-up run of a few sessions first keeps one-time imports out of the numbers.

The first concurrency is run ``--repeats`` times (fresh prompts each time) and judged on the
median run: on a shared two-core machine the CPU time of one run moves by a fifth either way
with the neighbours' load (the server's own CPU moves with it), and the median of three is
what a quiet machine gives.

The floor is the wall time the judge's latency and the concurrency allow: the calls go in
rounds of ``concurrency``, so ceil(calls / concurrency) x latency.

Targets (at concurrency 64): wall <= 1.10 x the floor, peak in flight == concurrency (never
above), peak RSS < 300 MiB, client CPU <= 1 ms per judge call.
"""

from __future__ import annotations

import argparse
import statistics
from typing import NamedTuple

from _workload import (
    RemoteServer,
    header,
    load_average,
    make_sessions,
    peak_rss_mib,
    print_table,
    timed_evaluate,
)

TARGET_RATIO = 1.10
TARGET_RSS_MIB = 300.0
TARGET_CPU_MS = 1.0


class Judged(NamedTuple):
    """What one run at the first concurrency is judged on."""

    ratio: float  # wall time / floor
    peak: int  # calls in flight at the peak
    rss: float  # peak RSS, MiB
    cpu_ms: float  # client CPU per judge call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--per-session", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 16])
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs at the first concurrency, judged on their median",
    )
    args = parser.parse_args()

    header(
        f"engine overhead: {args.sessions} sessions x {args.per_session} interactions, "
        f"{args.latency * 1000:.0f} ms per judge call, Context metric, cache off"
    )
    rows: list[list[object]] = []
    firsts: list[Judged] = []  # the runs at the first concurrency
    runs = [args.concurrency[0]] * args.repeats + list(args.concurrency[1:])
    for i, concurrency in enumerate(runs):
        with RemoteServer(latency=args.latency) as server:
            spec = f"{server.base_url}#bench"
            if i == 0:
                timed_evaluate(make_sessions(8, 2, tag="-warm"), spec, cache=False)
                print(f"peak RSS after imports and warm-up: {peak_rss_mib():.0f} MiB\n")
            server_cpu0 = server.reset()["cpu_s"]
            sessions = make_sessions(args.sessions, args.per_session, tag=f"-c{concurrency}-{i}")
            timed = timed_evaluate(sessions, spec, cache=False, max_concurrency=concurrency)
            stats = server.stats()
        calls = stats["calls"]
        ideal = calls * args.latency / concurrency
        floor = -(-calls // concurrency) * args.latency
        ratio = timed.wall_s / floor
        cpu_ms = 1000 * timed.cpu_s / calls
        rss = peak_rss_mib()
        summary = timed.run.summaries["context"]
        assert summary.n == args.sessions and summary.n_failed == 0, summary
        rows.append(
            [
                concurrency,
                calls,
                timed.wall_s,
                ideal,
                floor,
                ratio,
                stats["peak_in_flight"],
                round(rss),
                timed.cpu_s,
                cpu_ms,
                stats["cpu_s"] - server_cpu0,
            ]
        )
        if i < args.repeats:
            firsts.append(Judged(ratio, stats["peak_in_flight"], rss, cpu_ms))

    concurrency = args.concurrency[0]
    ratio = statistics.median(r.ratio for r in firsts)
    peak = max(r.peak for r in firsts)
    rss = max(r.rss for r in firsts)
    cpu_ms = statistics.median(r.cpu_ms for r in firsts)
    verdicts = [
        (f"wall / floor {ratio:.3f}, median (target <= {TARGET_RATIO})", ratio <= TARGET_RATIO),
        (f"peak in flight {peak} (target == {concurrency})", peak == concurrency),
        (f"peak RSS {rss:.0f} MiB (target < {TARGET_RSS_MIB:.0f})", rss < TARGET_RSS_MIB),
        (
            f"client CPU {cpu_ms:.2f} ms per call, median (target <= {TARGET_CPU_MS})",
            cpu_ms <= TARGET_CPU_MS,
        ),
    ]

    print_table(
        [
            "concurrency",
            "calls",
            "wall s",
            "ideal s",
            "floor s",
            "wall / floor",
            "peak in flight",
            "peak RSS MiB",
            "client CPU s",
            "CPU ms/call",
            "server CPU s",
        ],
        rows,
    )
    print(f"targets at concurrency {concurrency} ({args.repeats} runs):")
    for text, ok in verdicts:
        print(f"  {'MET   ' if ok else 'MISSED'} {text}")


if __name__ == "__main__":
    main()
    print("at the end: " + load_average())
