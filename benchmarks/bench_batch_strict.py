"""Batch judging against a batch server written without sight of the client.

Run: .venv/bin/python benchmarks/bench_batch_strict.py

``strict_batch_server.py`` implements the OpenAI Batch API and Anthropic's Message Batches
from their documentation, strictly (multipart upload, every JSONL line's keys, custom id
patterns, roles, windows). Twenty cases of context precision are judged with ``batch=True``
three times: OpenAI's shape, Anthropic's, and OpenAI's with every fourth request failing and
every second batch expiring. Each row gives what was scored and what the server accepted.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from strict_batch_server import StrictBatchServer

from contextlens import evaluate

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from support.rag import CASES

CASES_20 = [
    {**c, "id": f"{c['id']}-{i}", "input": f"{c['input']} ({i})"} for i in range(10) for c in CASES
]


def _row(label: str, judge: str, server: StrictBatchServer) -> list[Any]:
    run = evaluate(CASES_20, ["context-precision"], judge=judge, batch=True, cache=False)
    summary = run.summaries["context-precision"]
    stats = server.stats()
    return [
        label,
        summary.n,
        summary.n_scored,
        summary.n_failed,
        stats["batches"],
        stats["requests"],
    ]


def main() -> None:
    os.environ["CONTEXTLENS_CACHE_DIR"] = tempfile.mkdtemp()
    rows = []
    with StrictBatchServer(key="sk-test", process_seconds=0.5) as server:
        os.environ["OPENAI_API_KEY"] = "sk-test"
        rows.append(_row("openai", f"{server.base_url}#gpt-4o-mini", server))
    with StrictBatchServer(key="sk-ant", process_seconds=0.5) as server:
        os.environ["ANTHROPIC_BASE_URL"] = server.base_url
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant"
        rows.append(_row("anthropic", "anthropic:claude-test", server))
    with StrictBatchServer(key="sk-test", process_seconds=0.5, fail_every=4, expire_every=2) as s:
        rows.append(_row("openai, failures + expiry", f"{s.base_url}#gpt-4o-mini", s))
    header = ["shape", "cases", "scored", "failed", "batches", "requests accepted"]
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(v) for v in row))


if __name__ == "__main__":
    main()
