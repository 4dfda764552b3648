"""Faults: 1,000 judge calls with and without 20% 429 replies and 5% garbage replies.

Run: .venv/bin/python benchmarks/bench_faults.py [--sessions 1000] [--latency 0.1]
     [--concurrency 32] [--seed 7]

One-interaction sessions (so a failed judge call is a failed item) of the ``Context``
metric, each against its own FakeOpenAIServer (child process) and a fresh temporary cache.
Faulty server: 20% of calls answer 429 with ``Retry-After: 0.2``, 5% answer text that is
not JSON; the draw depends only on the seed and the call index. The engine retries 429s
(honouring Retry-After, halving its concurrency on them) and re-asks a garbage reply once;
a second garbage reply fails the item, with its reason. No item may be lost:
scored + failed == sessions (asserted).

Target: faulty wall time <= 2x the fault-free one.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from _workload import RemoteServer, header, load_average, make_sessions, print_table, timed_evaluate

TARGET_RATIO = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    header(
        f"faults: {args.sessions} one-interaction sessions, {args.latency * 1000:.0f} ms per "
        f"call, concurrency {args.concurrency}, seed {args.seed}"
    )
    scenarios = {
        "fault-free": {},
        "429 20% + garbage 5%": {"fail_429_rate": 0.2, "garbage_rate": 0.05},
    }
    rows, walls, reasons = [], [], Counter()
    for i, (label, faults) in enumerate(scenarios.items()):
        options = {"latency": args.latency, "retry_after": "0.2", "seed": args.seed, **faults}
        with tempfile.TemporaryDirectory() as tmp, RemoteServer(**options) as server:
            if i == 0:  # one-time imports out of the timings
                timed_evaluate(make_sessions(4, 1, tag="-w"), f"{server.base_url}#w", cache=False)
                server.reset()
            timed = timed_evaluate(
                make_sessions(args.sessions, 1, tag=f"-{i}"),
                f"{server.base_url}#bench",
                cache=Path(tmp) / "cache.sqlite3",
                max_concurrency=args.concurrency,
            )
            stats = server.stats()
        summary = timed.run.summaries["context"]
        results = list(timed.run.iter_results())
        assert len(results) == args.sessions, (len(results), args.sessions)
        assert summary.n_scored + summary.n_failed == args.sessions, summary
        for item in timed.run.failures():
            detail = (
                next((i.error for i in getattr(item.details, "interactions", [])), None)
                or item.error
            )
            reasons[(label, _short(detail))] += 1
        acct = timed.run.accounting.total
        walls.append(timed.wall_s)
        rows.append(
            [
                label,
                timed.wall_s,
                timed.wall_s / walls[0],
                summary.n_scored,
                summary.n_failed,
                stats["calls"],
                stats["status_counts"].get(429, 0),
                stats["reasks"],
                acct.retries,
                acct.cache_hits,
                acct.failures,
            ]
        )

    print_table(
        [
            "run",
            "wall s",
            "x fault-free",
            "scored",
            "failed",
            "server calls",
            "429s",
            "re-asks",
            "acct retries",
            "acct cache hits",
            "acct failures",
        ],
        rows,
    )
    print("failed items by reason:" if reasons else "failed items: none")
    for (label, reason), count in reasons.items():
        print(f"  {label}: {count} x {reason}")
    ratio = walls[-1] / walls[0]
    ideal = args.sessions * args.latency / args.concurrency
    print(f"ideal fault-free wall: calls x latency / concurrency = {ideal:.2f} s")
    print("\nevery item accounted for: scored + failed == sessions in both runs (asserted)")
    print(f"target: {'MET   ' if ratio <= TARGET_RATIO else 'MISSED'} faulty / fault-free ", end="")
    print(f"{ratio:.2f}x (target <= {TARGET_RATIO:.0f}x)")


def _short(text: str, limit: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    main()
    print("at the end: " + load_average())
