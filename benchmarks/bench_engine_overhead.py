"""Engine overhead: 2,000 judge calls at 200 ms latency through ``contextlens.evaluate``.

Run: .venv/bin/python benchmarks/bench_engine_overhead.py [--sessions 400] [--per-session 5]
     [--latency 0.2] [--concurrency 64 16]

The ``Context`` metric judges every interaction (one call each, distinct prompts, no cache)
against a FakeOpenAIServer in a child process. The ideal wall time is
calls x latency / concurrency; the engine's overhead is the ratio to it. CPU is this
process's (the client's) user + system time during the run; peak RSS is the process's
high-water mark so far, so rows after the first can only show the same or more.
A warm-up run of a few sessions first keeps one-time imports out of the numbers.

The floor is the wall time the judge's latency and the concurrency allow: the calls go in
rounds of ``concurrency``, so ceil(calls / concurrency) x latency.

Targets (at concurrency 64): wall <= 1.10 x the floor, peak in flight == concurrency (never
above), peak RSS < 300 MiB, client CPU <= 1 ms per judge call.
"""

from __future__ import annotations

import argparse

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--per-session", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 16])
    args = parser.parse_args()

    header(
        f"engine overhead: {args.sessions} sessions x {args.per_session} interactions, "
        f"{args.latency * 1000:.0f} ms per judge call, Context metric, cache off"
    )
    rows, verdicts = [], []
    for i, concurrency in enumerate(args.concurrency):
        with RemoteServer(latency=args.latency) as server:
            spec = f"{server.base_url}#bench"
            if i == 0:
                timed_evaluate(make_sessions(8, 2, tag="-warm"), spec, cache=False)
                print(f"peak RSS after imports and warm-up: {peak_rss_mib():.0f} MiB\n")
            server_cpu0 = server.reset()["cpu_s"]
            sessions = make_sessions(args.sessions, args.per_session, tag=f"-c{concurrency}")
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
        if i == 0:
            verdicts = [
                f"wall / floor {ratio:.3f} (target <= {TARGET_RATIO})",
                f"peak in flight {stats['peak_in_flight']} (target == {concurrency})",
                f"peak RSS {rss:.0f} MiB (target < {TARGET_RSS_MIB:.0f})",
                f"client CPU {cpu_ms:.2f} ms per call (target <= {TARGET_CPU_MS})",
            ]
            met = [
                ratio <= TARGET_RATIO,
                stats["peak_in_flight"] == concurrency,
                rss < TARGET_RSS_MIB,
                cpu_ms <= TARGET_CPU_MS,
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
    print(f"targets at concurrency {args.concurrency[0]}:")
    for text, ok in zip(verdicts, met, strict=True):
        print(f"  {'MET   ' if ok else 'MISSED'} {text}")


if __name__ == "__main__":
    main()
    print("at the end: " + load_average())
