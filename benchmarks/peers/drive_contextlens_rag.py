"""contextlens' faithfulness, context-recall or context-precision-ranked over the workload,
through ``contextlens.evaluate`` (the metric named by ``--metric``).

Run by bench_peers.py (``--rag``) with the project's venv; judge spec ``"{base_url}#MODEL"``,
cache off, at most N judge calls in flight.
"""

from __future__ import annotations

from _common import load_cases, parse_args, timed, write_result

import contextlens
from contextlens.runner import evaluate
from contextlens.schemas import ModelTestCase

METRICS = ["faithfulness", "context-recall", "context-precision-ranked"]


def main() -> None:
    args = parse_args(__doc__ or "", metrics=METRICS)
    name = args.metric
    cases = [
        ModelTestCase(
            input=c["input"],
            actual_output=c["actual_output"],
            expected_output=c["expected_output"],
            retrieval_context=c["retrieval_context"],
            name=f"case-{i:04d}",
        )
        for i, c in enumerate(load_cases(args))
    ]
    with timed() as timer:
        run = evaluate(
            cases,
            [name],
            judge=f"{args.base_url}#{args.model}",
            max_concurrency=args.concurrency,
            cache=False,
            progress=False,
        )
    by_case = {r.case_id: r for r in run.iter_results()}
    write_result(
        args,
        library="contextlens",
        version=contextlens.__version__,
        method=f"{name}, contextlens.evaluate(judge='URL#MODEL', "
        f"max_concurrency={args.concurrency}, cache=False)",
        timer=timer,
        scores=[by_case[c.name].score if c.name in by_case else None for c in cases],
        errors=[r.error for r in by_case.values() if r.error][:3],
    )


if __name__ == "__main__":
    main()
