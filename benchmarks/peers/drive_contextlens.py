"""A contextlens metric over the workload, through ``contextlens.evaluate``: contextual
relevancy (``ContextualRelevancyMetric``, the default), or by ``--metric`` context precision
(the metric behind Opik's ``ContextPrecision`` surface) or a RAG metric (faithfulness,
context-recall, context-precision-ranked).

Run by bench_peers.py with the project's venv. The judge is the spec string
``"{base_url}#MODEL"`` (contextlens' OpenAI-compatible backend), the cache is off, at most N
judge calls are in flight.
"""

from __future__ import annotations

from _common import load_cases, parse_args, timed, write_result

import contextlens
from contextlens import ContextualRelevancyMetric
from contextlens.runner import evaluate
from contextlens.schemas import ModelTestCase

#: The metrics of ``--metric``: contextual relevancy through its DeepEval-shaped class, the
#: others by name.
METRICS = [
    "contextual-relevancy",
    "context-precision",
    "faithfulness",
    "context-recall",
    "context-precision-ranked",
    "rag-diagnostics",
]


def main() -> None:
    args = parse_args(__doc__ or "", metrics=METRICS)
    raw = load_cases(args)
    cases = [
        ModelTestCase(
            input=c["input"],
            actual_output=c["actual_output"],
            expected_output=c["expected_output"],
            retrieval_context=c["retrieval_context"],
            name=f"case-{i:04d}",
        )
        for i, c in enumerate(raw)
    ]
    metric = (
        ContextualRelevancyMetric(threshold=0.5)
        if args.metric == "contextual-relevancy"
        else args.metric
    )
    with timed() as timer:
        run = evaluate(
            cases,
            [metric],
            judge=f"{args.base_url}#{args.model}",
            max_concurrency=args.concurrency,
            cache=False,
            progress=False,
        )
    by_case = {r.case_id: r for r in run.iter_results()}
    scores = [by_case[c.name].score if c.name in by_case else None for c in cases]
    errors = [r.error for r in by_case.values() if r.error][:3]
    write_result(
        args,
        library="contextlens",
        version=contextlens.__version__,
        method=f"{args.metric}, contextlens.evaluate(judge='URL#MODEL', "
        f"max_concurrency={args.concurrency}, cache=False)",
        timer=timer,
        scores=scores,
        errors=errors,
    )


if __name__ == "__main__":
    main()
