"""Soak: 10,000 items against a judge that rate-limits, rambles, hangs and restarts twice.
Nothing may be lost or duplicated, and every call the server received is counted.

Run: .venv/bin/python benchmarks/bench_soak.py [--sessions 10000] [--latency 0.05]
     [--concurrency 64] [--timeout 1.0] [--down 2.0] [--seed 11]

One-interaction sessions of the ``context`` metric (so an item is one judge exchange) go to a
FakeOpenAIServer in its own process. Of its chat calls 20% answer 429 (``Retry-After: 0.2``),
5% answer text that is not JSON and 1% hang past the client's timeout; when it has received
30% and again 60% of ``sessions`` calls it restarts as after a crash: the calls in flight are
dropped, new connections refused for ``--down`` seconds. Results stream to ``results.jsonl``.

The table: items scored and failed; lost (no line in results.jsonl) and duplicated (more than
one); the calls the accounting counted (answered, or timed out waiting), the calls whose
connection dropped after it was made (they may or may not have reached the server) and the calls
the server received, which must lie between the first and the sum of the two; the server's
429s, hung calls and restarts. The only acceptable failures are items whose every reply was
invalid (the judge never answered validly); any other reason is listed as unexpected.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _workload import RemoteServer, header, load_average, make_sessions, print_table

from contextlens import Context, evaluate
from contextlens.engine.retry import RetryPolicy
from contextlens.judges import LLMJudge, OpenAICompatBackend

EXPECTED_FAILURE = "invalid reply after one re-ask"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--down", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    header(
        f"soak: {args.sessions} items, {args.latency * 1000:.0f} ms per call, concurrency "
        f"{args.concurrency}, 20% 429 / 5% invalid / 1% hung (client timeout {args.timeout:g}s)"
        f", two restarts of {args.down:g} s"
    )
    faults = {"fail_429_rate": 0.2, "garbage_rate": 0.05, "timeout_rate": 0.01}
    options = {
        "latency": args.latency,
        "retry_after": "0.2",
        "seed": args.seed,
        "hang_time": 3 * args.timeout,
        **faults,
    }
    sessions = make_sessions(args.sessions, 1, tag="-soak")
    with tempfile.TemporaryDirectory() as tmp, RemoteServer(**options) as server:
        judge = LLMJudge(
            OpenAICompatBackend("soak", base_url=server.base_url),
            retry=RetryPolicy(timeout=args.timeout),
        )
        done: dict[str, Any] = {}

        def work() -> None:
            done["run"] = evaluate(
                sessions,
                [Context()],
                judge=judge,
                max_concurrency=args.concurrency,
                cache=Path(tmp) / "cache.sqlite3",
                out=Path(tmp) / "out",
                progress=False,
            )

        worker = threading.Thread(target=work)
        t0 = time.perf_counter()
        worker.start()
        restarts = []
        for share in (0.3, 0.6):
            while worker.is_alive() and server.stats()["calls"] < share * args.sessions:
                worker.join(0.05)
            if worker.is_alive():
                server.restart(args.down)
                restarts.append(f"{time.perf_counter() - t0:.1f}s")
        worker.join()
        wall = time.perf_counter() - t0
        time.sleep(3 * args.timeout)  # hung calls end on the server's side before counting
        stats = server.stats()
        run = done["run"]
        lines = Counter(
            json.loads(line)["case_id"]
            for line in (Path(run.out_dir) / "results.jsonl").read_text().splitlines()
        )
        reasons = Counter(
            next((i.error for i in getattr(item.details, "interactions", [])), None)
            or item.error
            or ""
            for item in run.failures()
        )
    summary = run.summaries["context"]
    acct = run.accounting.total
    lost = args.sessions - len(lines)
    duplicated = sum(n - 1 for n in lines.values() if n > 1)
    unexpected = {r: n for r, n in reasons.items() if not r.startswith(EXPECTED_FAILURE)}
    print_table(
        [
            "items",
            "scored",
            "failed",
            "lost",
            "duplicated",
            "calls counted",
            "dropped",
            "calls received",
            "retries",
            "429s",
            "hung",
            "restarts",
            "wall s",
        ],
        [
            [
                args.sessions,
                summary.n_scored,
                summary.n_failed,
                lost,
                duplicated,
                acct.calls,
                acct.dropped,
                stats["calls"],
                acct.retries,
                stats["status_counts"].get(429, 0),
                round(args.sessions * faults["timeout_rate"]),
                ", ".join(restarts),
                wall,
            ]
        ],
    )
    print("failed items by reason:" if reasons else "failed items: none")
    for reason, count in reasons.most_common():
        print(f"  {count} x {reason[:110]}")
    print(f"unexpected failures: {sum(unexpected.values())}")
    counted = acct.calls <= stats["calls"] <= acct.calls + acct.dropped
    ok = lost == 0 and duplicated == 0 and counted and not unexpected
    print(
        f"target: {'MET   ' if ok else 'MISSED'} 0 lost, 0 duplicated, counted <= received <= "
        "counted + dropped, failures only where every reply was invalid"
    )


if __name__ == "__main__":
    main()
    print("at the end: " + load_average())
