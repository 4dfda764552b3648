"""Opik's ContextPrecision over the workload: ``ascore`` under ``asyncio.gather``.

Run by bench_peers.py with benchmarks/.peers-venv/bin/python. The judge is Opik's own
``LiteLLMChatModel("openai/MODEL", api_base=<fake server>)``; tracking is off
(``track=False`` on the model and the metric, ``OPIK_TRACK_DISABLE=true``), so no Opik
server is configured or contacted. At most N scores are in flight (a semaphore), the same
budget as the other libraries.
"""

from __future__ import annotations

import asyncio
import os

os.environ.setdefault("OPIK_TRACK_DISABLE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import

import opik
from _common import load_cases, parse_args, timed, write_result
from opik.evaluation.metrics import ContextPrecision
from opik.evaluation.models import LiteLLMChatModel


async def run(metric: ContextPrecision, cases: list[dict], limit: int) -> list[float | None]:
    gate = asyncio.Semaphore(limit)

    async def one(case: dict) -> float | None:
        async with gate:
            try:
                result = await metric.ascore(
                    input=case["input"],
                    output=case["actual_output"],
                    expected_output=case["expected_output"],
                    context=case["retrieval_context"],
                )
            except Exception:  # a failed case is counted, not fatal
                return None
            return None if result.scoring_failed else result.value

    return await asyncio.gather(*(one(c) for c in cases))


def main() -> None:
    args = parse_args(__doc__ or "")
    cases = load_cases(args)
    model = LiteLLMChatModel(
        model_name=f"openai/{args.model}",
        track=False,
        api_base=args.base_url,
        api_key="sk-fake",
    )
    metric = ContextPrecision(model=model, track=False)
    with timed() as timer:
        scores = asyncio.run(run(metric, cases, args.concurrency))
    write_result(
        args,
        library="opik",
        version=opik.__version__,
        method="ContextPrecision(track=False).ascore under asyncio.gather (semaphore "
        f"{args.concurrency}), LiteLLMChatModel('openai/{args.model}', api_base=...)",
        timer=timer,
        scores=scores,
    )


if __name__ == "__main__":
    main()
