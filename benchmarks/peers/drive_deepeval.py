"""A DeepEval metric over the workload, through ``deepeval.evaluate``: ContextualRelevancyMetric
(the default) or, by ``--metric``, the nearest peer of a contextlens RAG metric
(FaithfulnessMetric, ContextualRecallMetric, ContextualPrecisionMetric).

Run by bench_peers.py with benchmarks/.peers-venv/bin/python. The judge is DeepEval's own
``GPTModel`` with ``base_url`` set to the fake server; evaluation goes through DeepEval's
recommended concurrent path, ``evaluate(..., async_config=AsyncConfig(max_concurrent=N))``,
with the cache, the progress indicator and the printed report turned off.
"""

from __future__ import annotations

import os

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")

import deepeval
from _common import load_cases, parse_args, timed, write_result
from deepeval import evaluate
from deepeval.evaluate import AsyncConfig, CacheConfig, DisplayConfig, ErrorConfig
from deepeval.metrics import (
    ContextualPrecisionMetric,
    ContextualRecallMetric,
    ContextualRelevancyMetric,
    FaithfulnessMetric,
)
from deepeval.models import GPTModel
from deepeval.test_case import LLMTestCase

#: Each contextlens metric (``--metric``) and its DeepEval peer.
PEER = {
    "contextual-relevancy": ContextualRelevancyMetric,
    "faithfulness": FaithfulnessMetric,
    "context-recall": ContextualRecallMetric,
    "context-precision-ranked": ContextualPrecisionMetric,
}


def main() -> None:
    args = parse_args(__doc__ or "", metrics=list(PEER))
    kind = PEER[args.metric]
    raw = load_cases(args)
    cases = [
        LLMTestCase(
            input=c["input"],
            actual_output=c["actual_output"],
            expected_output=c["expected_output"],
            retrieval_context=c["retrieval_context"],
        )
        for c in raw
    ]
    model = GPTModel(model=args.model, base_url=args.base_url, api_key="sk-fake")
    metric = kind(threshold=0.5, model=model)
    with timed() as timer:
        result = evaluate(
            cases,
            [metric],
            async_config=AsyncConfig(run_async=True, max_concurrent=args.concurrency),
            display_config=DisplayConfig(
                show_indicator=False, print_results=False, inspect_after_run=False
            ),
            cache_config=CacheConfig(write_cache=False, use_cache=False),
            error_config=ErrorConfig(ignore_errors=True),
        )
    scores: list[float | None] = []
    errors: list[str] = []
    for test in sorted(result.test_results, key=lambda t: t.index or 0):
        data = (test.metrics_data or [None])[0]
        if data is None or data.error or data.score is None:
            scores.append(None)
            errors.append(str(data.error if data else "no metric data"))
        else:
            scores.append(data.score)
    write_result(
        args,
        library="deepeval",
        version=deepeval.__version__,
        method=f"{kind.__name__}, evaluate(AsyncConfig(max_concurrent={args.concurrency})), "
        "GPTModel(base_url=...)",
        timer=timer,
        scores=scores,
        errors=errors[:3],
    )


if __name__ == "__main__":
    main()
