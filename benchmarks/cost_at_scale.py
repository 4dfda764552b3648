"""The cost and time of 10 million cases per judged metric, live and batched, from the dry
run's own pricing.

Run: .venv/bin/python benchmarks/cost_at_scale.py [--cases 200] [--scale 10000000]
     [--judge openai:gpt-4o-mini]

Each metric that calls a judge on a test case is dry-run (``evaluate(..., dry_run=True)``:
every case read and every prompt built, no call made, no key needed) on ``--cases`` of the
cases ``bench_peers.py`` uses (a question, an answer, an expected answer and five retrieved
chunks of about 60 words), once live and once with ``batch=True``. The dry run's calls,
prompt tokens, expected completion tokens and cost per case are scaled to ``--scale`` cases.

Time is bounded by the provider's limits, not by this library: live, by the requests and
tokens a minute the account may send (the larger of calls / RPM and tokens / TPM); batched,
by the prompt tokens the account may have waiting in batches (the batch queue limit): the
run takes that many fills of the queue, each done within the Batch API's 24-hour window
(often sooner: the window is a bound, not a measure). The limits used are gpt-4o-mini's for
OpenAI's usage tiers 1 and 5 as
published (tier 1: 500 RPM, 200,000 TPM, a queue of 2,000,000 tokens; tier 5: 30,000 RPM,
150,000,000 TPM, 15,000,000,000 tokens); pass your own with ``--limits RPM TPM QUEUE``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

os.environ["CONTEXTLENS_CACHE"] = "off"

from _workload import print_table
from bench_peers import make_cases

from contextlens import evaluate
from contextlens.errors import InputError
from contextlens.metrics.registry import registered
from contextlens.runner.dry_run import MetricEstimate
from contextlens.schemas import ModelTestCase

#: (name, requests a minute, tokens a minute, batch queue tokens) of gpt-4o-mini.
TIERS = [("tier 1", 500, 200_000, 2_000_000), ("tier 5", 30_000, 150_000_000, 15_000_000_000)]
WINDOW_HOURS = 24


def judged_metrics() -> list[str]:
    """The registered metrics of test cases, in name order (those with no judge call are
    left out by the dry run itself: it counts no call for them)."""
    return sorted(name for name, info in registered().items() if info.case_type is ModelTestCase)


def estimate(cases: list[dict[str, Any]], metric: str, judge: str, batch: bool) -> MetricEstimate:
    found = evaluate(cases, [metric], judge=judge, dry_run=True, batch=batch, cache=False)
    (one,) = found.metrics
    return one


def duration(hours: float) -> str:
    return f"{hours / 24:,.1f} days" if hours >= 48 else f"{hours:,.1f} h"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--scale", type=int, default=10_000_000)
    parser.add_argument("--judge", default="openai:gpt-4o-mini")
    parser.add_argument("--limits", type=int, nargs=3, metavar=("RPM", "TPM", "QUEUE"))
    args = parser.parse_args()
    tiers = [("yours", *args.limits)] if args.limits else TIERS
    cases = make_cases(args.cases)
    scale = args.scale / args.cases
    rows, times = [], []
    for metric in judged_metrics():
        try:
            live = estimate(cases, metric, args.judge, batch=False)
        except InputError:  # it reads fields these cases do not have (retrieval's ids)
            continue
        if not live.calls:
            continue
        batched = estimate(cases, metric, args.judge, batch=True)
        assert batched.calls == live.calls and batched.prompt_tokens == live.prompt_tokens
        tokens = (live.prompt_tokens + live.completion_tokens) * scale
        calls = live.calls * scale
        rows.append(
            [
                metric,
                f"{live.calls / args.cases:.2f}",
                f"{live.prompt_tokens / args.cases:,.0f}",
                f"{live.completion_tokens / args.cases:,.0f}",
                f"{tokens / 1e9:,.1f}",
                f"${(live.cost or 0) * scale:,.0f}",
                f"${(batched.cost or 0) * scale:,.0f}",
            ]
        )
        row = [metric]
        for _, rpm, tpm, queue in tiers:
            row.append(duration(max(calls / rpm, tokens / tpm) / 60))
            fills = math.ceil(live.prompt_tokens * scale / queue)
            row.append(f"{fills:,} x <= {WINDOW_HOURS} h")
        times.append(row)
    print(
        f"== cost_at_scale: {args.scale:,} cases per metric, judge {args.judge}, "
        f"from a dry run of {args.cases} cases"
    )
    print_table(
        [
            "metric",
            "calls/case",
            "prompt tok/case",
            "completion tok/case",
            "tokens (bn)",
            "live",
            "batched",
        ],
        rows,
    )
    headers = ["metric"]
    for tier in tiers:
        headers += [f"live, {tier[0]}", f"batched, {tier[0]}: queue fills"]
    print(
        "time: live = max(calls / RPM, tokens / TPM); batched = fills of the batch queue "
        "(prompt tokens / queue limit), each done within the Batch API's 24 h window, at "
        + "; ".join(f"{n}: {r:,} RPM, {t:,} TPM, {q:,} queued" for n, r, t, q in tiers)
    )
    print_table(headers, times)


if __name__ == "__main__":
    sys.exit(main())
