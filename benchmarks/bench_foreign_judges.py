"""LangChain and LiteLLM judges under a rate-limit storm: every item finishes, and the shared
limiter's concurrency drops during the storm and recovers after it.

Run: .venv/bin/python benchmarks/bench_foreign_judges.py [--sessions 1500] [--latency 0.1]
     [--concurrency 32] [--rate 0.2] [--retry-after 0.2] [--storm 2 6]

For each backend (a langchain-openai ``ChatOpenAI`` with ``max_retries=0``, so that the engine
sees the rate limits, and LiteLLM's ``openai/`` provider), one ``evaluate`` of the ``context``
metric over one-interaction sessions runs against a FakeOpenAIServer in its own process that
answers in ``latency`` seconds. From ``storm[0]`` to ``storm[1]`` seconds into the run, ``rate``
of the calls get 429 with ``Retry-After``; before and after, none do. The table samples the
backend's limiter: the limit (calls allowed in flight), the calls in flight, the calls and 429s
the server has seen. Every item must be scored (asserted).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network on import

from _workload import RemoteServer, header, load_average, make_sessions, print_table

from contextlens import Context, evaluate
from contextlens.engine.limiter import limiter_for
from contextlens.judges import LangChainBackend, LiteLLMBackend

SAMPLE_S = 0.5


def backend(kind: str, base_url: str) -> Any:
    if kind == "langchain":
        from langchain_openai import ChatOpenAI

        chat = ChatOpenAI(model="bench", base_url=base_url, api_key="sk-bench", max_retries=0)
        return LangChainBackend(chat)
    return LiteLLMBackend("openai/bench", api_base=base_url, api_key="sk-bench")


def storm_run(kind: str, args: argparse.Namespace) -> None:
    start, end = args.storm
    with RemoteServer(latency=args.latency, retry_after=str(args.retry_after), seed=7) as server:
        judge = backend(kind, server.base_url)
        limiter = limiter_for(judge.key, args.concurrency)
        sessions = make_sessions(args.sessions, 1, tag=f"-{kind}")
        done: dict[str, Any] = {}

        def work() -> None:
            done["run"] = evaluate(
                sessions,
                [Context()],
                judge=judge,
                max_concurrency=args.concurrency,
                cache=False,
                progress=False,
            )

        worker = threading.Thread(target=work)
        t0 = time.perf_counter()
        worker.start()
        rows, phase = [], "calm"
        while worker.is_alive():
            worker.join(SAMPLE_S)
            t = time.perf_counter() - t0
            if phase == "calm" and start <= t < end:
                server.set(fail_429_rate=args.rate)
                phase = "storm"
            elif phase == "storm" and t >= end:
                server.set(fail_429_rate=0.0)
                phase = "after"
            stats = server.stats()
            rows.append(
                [
                    f"{t:5.1f}",
                    phase,
                    limiter.limit,
                    limiter.in_flight,
                    stats["calls"],
                    stats["status_counts"].get(429, 0),
                ]
            )
        wall = time.perf_counter() - t0
    run = done["run"]
    summary = run.summaries["context"]
    acct = summary.accounting
    print(f"== {kind}: {judge!r}")
    print_table(["t s", "phase", "limit", "in flight", "server calls", "429s"], rows)
    assert summary.n_scored == args.sessions, summary
    print(
        f"{kind}: {args.sessions} items in {wall:.1f} s; scored {summary.n_scored}, failed "
        f"{summary.n_failed}; {acct.calls} calls, {acct.retries} retries, "
        f"{limiter.rate_limited} rate-limited; limit {args.concurrency} -> lowest {limiter.lowest} "
        f"-> {limiter.limit} at the end\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1500)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rate", type=float, default=0.2)
    parser.add_argument("--retry-after", type=float, default=0.2)
    parser.add_argument("--storm", type=float, nargs=2, default=(2.0, 6.0))
    args = parser.parse_args()
    header(
        f"foreign judges: {args.sessions} items, {args.latency * 1000:.0f} ms per call, "
        f"concurrency {args.concurrency}, {args.rate:.0%} 429 (Retry-After "
        f"{args.retry_after:g} s) from {args.storm[0]:g} s to {args.storm[1]:g} s"
    )
    for kind in ("langchain", "litellm"):
        storm_run(kind, args)


if __name__ == "__main__":
    main()
    print("at the end: " + load_average())
