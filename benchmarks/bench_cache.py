"""Judge reply cache: the same evaluation cold, then warm, then with another model name.

Run: .venv/bin/python benchmarks/bench_cache.py [--sessions 80] [--per-session 5]
     [--latency 0.5] [--concurrency 16]

The defaults are a hosted judge's typical half a second per call and contextlens' default
concurrency; the speed-up shrinks with the latency (the warm run's cost is fixed).

Three runs of the ``Context`` metric against one FakeOpenAIServer (child process) and one
temporary SQLite cache file: (1) cold, (2) identical, so every reply must come from the
cache and the server sees no call, (3) the judge model renamed (``#bench-2``), so every
cache key changes and every call is made again.

Then the cost of a cached re-run per case: ``--cases`` cases (sessions of one interaction:
one case, one judge call) run cold, then again from the cache; the warm run's wall time per
case is the engine's own work on a case whose reply is cached (reading the case, the cache
lookup, parsing, scoring, the summary).

Targets: run 2 makes 0 calls and is >= 50x faster than run 1; run 3 makes all calls again;
a cached re-run takes <= 0.5 ms a case.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _workload import RemoteServer, header, load_average, make_sessions, print_table, timed_evaluate

TARGET_SPEEDUP = 50.0
TARGET_CACHED_MS = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=80)
    parser.add_argument("--per-session", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--cases", type=int, default=4000)
    args = parser.parse_args()
    total = args.sessions * args.per_session

    header(
        f"judge cache: {args.sessions} sessions x {args.per_session} interactions = {total} "
        f"judge calls, {args.latency * 1000:.0f} ms per call, concurrency {args.concurrency}"
    )
    sessions = make_sessions(args.sessions, args.per_session)
    rows, results = [], {}
    with tempfile.TemporaryDirectory() as tmp, RemoteServer(latency=args.latency) as server:
        cache = Path(tmp) / "cache.sqlite3"
        timed_evaluate(make_sessions(4, 2, tag="-warm"), f"{server.base_url}#warm", cache=False)
        for label, model in (("1 cold", "bench"), ("2 warm", "bench"), ("3 model", "bench-2")):
            server.reset()
            timed = timed_evaluate(
                sessions,
                f"{server.base_url}#{model}",
                cache=cache,
                max_concurrency=args.concurrency,
            )
            calls = server.stats()["calls"]
            acct = timed.run.accounting.total
            summary = timed.run.summaries["context"]
            assert summary.n == args.sessions and summary.n_failed == 0, summary
            results[label] = (timed.wall_s, calls)
            rows.append(
                [
                    label,
                    f"#{model}",
                    timed.wall_s,
                    calls,
                    acct.calls,
                    acct.cache_hits,
                    round(summary.mean, 4),
                ]
            )
        size_kib = cache.stat().st_size / 1024
        single = make_sessions(args.cases, 1, tag="-one")
        spec = f"{server.base_url}#bench"
        timed_evaluate(single, spec, cache=cache, max_concurrency=64)  # fills the cache
        server.reset()
        warm = timed_evaluate(single, spec, cache=cache, max_concurrency=64)
        single_calls = server.stats()["calls"]
        assert warm.run.summaries["context"].n_failed == 0

    print_table(
        [
            "run",
            "judge model",
            "wall s",
            "server calls",
            "acct calls",
            "acct cache hits",
            "mean score",
        ],
        rows,
    )
    cold_s, cold_calls = results["1 cold"]
    warm_s, warm_calls = results["2 warm"]
    _, model_calls = results["3 model"]
    speedup = cold_s / warm_s
    print(f"cache file: {size_kib:.0f} KiB (WAL not counted)")
    print(f"speed-up warm vs cold: {speedup:.1f}x")
    per_case = 1000 * warm.wall_s / args.cases
    print(
        f"cached re-run of {args.cases} one-call cases: {warm.wall_s:.2f} s wall, "
        f"{per_case:.3f} ms a case ({1000 * warm.cpu_s / args.cases:.3f} ms CPU), "
        f"{single_calls} server calls"
    )
    print("targets:")
    checks = [
        (
            per_case <= TARGET_CACHED_MS and single_calls == 0,
            f"cached re-run {per_case:.3f} ms a case (target <= {TARGET_CACHED_MS})",
        ),
        (warm_calls == 0, f"warm run server calls {warm_calls} (target 0)"),
        (speedup >= TARGET_SPEEDUP, f"speed-up {speedup:.1f}x (target >= {TARGET_SPEEDUP:.0f}x)"),
        (model_calls >= total, f"renamed model: {model_calls} calls (target {total}, all again)"),
        (cold_calls == total, f"cold run: {cold_calls} calls (expected {total})"),
    ]
    for ok, text in checks:
        print(f"  {'MET   ' if ok else 'MISSED'} {text}")


if __name__ == "__main__":
    main()
    print("at the end: " + load_average())
