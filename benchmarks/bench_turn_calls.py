"""Judge calls per conversation: contextlens' turn metrics, counted, against DeepEval's turn
metrics, computed from their documented algorithm.

contextlens (COUNTED): ``turn-faithfulness`` and ``turn-contextual-relevancy`` run through
``contextlens.evaluate`` against :class:`contextlens.testing.FakeOpenAIServer` on 127.0.0.1,
which answers each reply schema with its smallest valid instance; the figure is the server's
count of chat requests (``server.calls``), cache off.

DeepEval (COMPUTED, not run): ``TurnFaithfulnessMetric`` and ``TurnContextualRelevancyMetric``
judge the conversation in sliding windows of up to ``window_size`` (default 10) turns, one
window ending at each assistant turn, and judge every chunk of every turn in a window again
in each window it falls in. The figures below follow that description: relevancy, one call
per chunk in the window plus one reason call per window; faithfulness, four calls per window
(truths, claims, verdicts, reason). They are a model of the documented algorithm, not a
measurement of DeepEval, which is not installed here.

Conversations: ``T`` assistant turns, each after one user turn, each with ``K`` retrieved
chunks of one sentence.

    .venv/bin/python benchmarks/bench_turn_calls.py            # a few seconds
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from _workload import header, print_table

from contextlens import Batch, Dataset, evaluate
from contextlens.testing import FakeOpenAIServer
from contextlens.testing.schemas import smallest

METRICS = ("turn-faithfulness", "turn-contextual-relevancy")


def smallest_reply(request: dict[str, Any]) -> str:
    schema = (request.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    return json.dumps(smallest(schema, schema.get("$defs", {})))


def conversation(turns: int, chunks: int) -> Dataset:
    return Dataset(
        session_id=f"s{turns}",
        assistant_id="bot",
        context="You answer questions about the town museum.",
        conversation=[
            Batch(
                qa_id=f"t{t}",
                query=f"Question {t} about the museum?",
                assistant=f"Answer {t}: the museum opens at 9am.",
                retrieval_context=[
                    f"Fact {t}.{k}: the museum opens at 9am." for k in range(chunks)
                ],
            )
            for t in range(turns)
        ],
    )


def counted(metric: str, session: Dataset) -> int:
    with FakeOpenAIServer(reply=smallest_reply) as server:
        evaluate(
            [session],
            [metric],
            judge=f"{server.base_url}#judge",
            cache=False,
            max_concurrency=8,
            progress=False,
        )
        return server.calls


def deepeval_calls(metric: str, turns: int, chunks: int, window: int) -> int:
    """DeepEval's calls from its documented sliding-window algorithm (see the docstring)."""
    total = 0
    for end in range(1, turns + 1):
        in_window = min(end, window)
        total += in_window * chunks + 1 if metric == "turn-contextual-relevancy" else 4
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 3, 5, 10, 20])
    args = parser.parse_args()
    header(f"Judge calls per conversation ({args.chunks} chunks a turn)")
    rows = []
    for turns in args.turns:
        session = conversation(turns, args.chunks)
        for metric in METRICS:
            ours = counted(metric, session)
            theirs = deepeval_calls(metric, turns, args.chunks, args.window)
            rows.append([metric, turns, ours, ours / turns, theirs, theirs / turns])
    print_table(
        [
            "metric",
            "turns",
            "contextlens calls (counted)",
            "per turn",
            "DeepEval calls (computed)",
            "per turn",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
