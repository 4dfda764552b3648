"""Ragas' context precision (LLMContextPrecisionWithReference) through ``ragas.evaluate``;
with ``--metric noise-sensitivity``, its ``NoiseSensitivity`` in both modes (relevant and
irrelevant: two metrics, as Ragas computes one share per metric).

Run by bench_peers.py with benchmarks/.peers-venv/bin/python. The judge is LangChain's
``ChatOpenAI`` with ``base_url`` set to the fake server, wrapped in Ragas'
``LangchainLLMWrapper``; ``RunConfig(max_workers=N)`` gives Ragas the same concurrency
budget as the other libraries. Ragas judges a case's chunks one after the other (one call
per chunk), so its calls in flight are bounded by the number of cases in flight.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
import warnings

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
warnings.filterwarnings("ignore", category=DeprecationWarning)


def _vertexai_shim() -> None:
    """Ragas 0.4.3 imports ``langchain_community.chat_models.vertexai.ChatVertexAI`` at
    import time, a module no current langchain-community ships (ragas issues #2745, #2753):
    ``import ragas`` fails. The class only fills an ``isinstance`` list of models that take
    ``n``; a stand-in class that nothing is an instance of restores the import."""
    try:
        found = importlib.util.find_spec("langchain_community.chat_models.vertexai")
    except ModuleNotFoundError:
        found = None
    if found is None:
        shim = types.ModuleType("langchain_community.chat_models.vertexai")
        shim.ChatVertexAI = type("ChatVertexAI", (), {})  # type: ignore[attr-defined]
        sys.modules[shim.__name__] = shim


_vertexai_shim()

import ragas  # noqa: E402
from _common import load_cases, parse_args, timed, write_result  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from ragas import EvaluationDataset, RunConfig, evaluate  # noqa: E402
from ragas.llms import LangchainLLMWrapper  # noqa: E402
from ragas.metrics import LLMContextPrecisionWithReference, NoiseSensitivity  # noqa: E402


def main() -> None:
    args = parse_args(__doc__ or "", metrics=["context-precision", "noise-sensitivity"])
    raw = load_cases(args)
    dataset = EvaluationDataset.from_list(
        [
            {
                "user_input": c["input"],
                "response": c["actual_output"],
                "reference": c["expected_output"],
                "retrieved_contexts": c["retrieval_context"],
            }
            for c in raw
        ]
    )
    chat = ChatOpenAI(model=args.model, base_url=args.base_url, api_key="sk-fake", temperature=0)
    llm = LangchainLLMWrapper(chat)
    metrics = (
        [
            NoiseSensitivity(name="noise_sensitivity_relevant", mode="relevant"),
            NoiseSensitivity(name="noise_sensitivity_irrelevant", mode="irrelevant"),
        ]
        if args.metric == "noise-sensitivity"
        else [LLMContextPrecisionWithReference()]
    )
    metric = metrics[0]
    with timed() as timer:
        result = evaluate(
            dataset,
            metrics=metrics,
            llm=llm,
            run_config=RunConfig(max_workers=args.concurrency),
            show_progress=False,
            raise_exceptions=False,
        )
    # Ragas names a score column after the metric, with its mode for NoiseSensitivity
    column = next((k for k in result.scores[0] if k.startswith(metric.name)), metric.name)
    scores = list(result[column])
    write_result(
        args,
        library="ragas",
        version=ragas.__version__,
        method=f"{', '.join(type(m).__name__ for m in metrics)}, evaluate(RunConfig("
        f"max_workers={args.concurrency})), LangchainLLMWrapper(ChatOpenAI(base_url=...))",
        timer=timer,
        scores=scores,
    )


if __name__ == "__main__":
    main()
