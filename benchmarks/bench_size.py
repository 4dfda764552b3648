"""Oversized items: time and peak memory per case, each case in its own process.

Run: .venv/bin/python benchmarks/bench_size.py [--cases NAME ...] [--timeout 300]

Cases (offline: the bundled MiniLM, no cache):

* ``5mb-<metric>``: one item with a 5 MB answer (for contextual relevancy, which does not
  read the answer, a 5 MB retrieved chunk); for ``context``, a session of that interaction
  and a short one.
* ``200kb-<metric>``: the same with a text just under the default ``max_embed_tokens``
  (50,000 tokens, 200,000 characters): the most one text makes the offline path do.
* ``10k-chunks-<metric>``: one case of 10,000 retrieved chunks of ~300 characters.
* ``5mb-judged-<metric>``: the 5 MB item with an LLM judge (a fake OpenAI-compatible server
  in this process): the prompt is over ``max_prompt_tokens`` and never sent.
* ``baseline``: the bundled model loaded and one sentence embedded; every other case's
  memory includes this.

Each case runs in a fresh subprocess, so its peak resident set size (``ru_maxrss``) is its
own. Time is the wall time of ``evaluate`` in that process (the text is made before). A case
that does not finish within ``--timeout`` seconds is killed and reported as such.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from functools import cache
from importlib import resources
from typing import Any

from _workload import header

MB = 1_000_000
METRICS = ("context", "context-precision", "contextual-relevancy", "context-similarity")
JUDGED = ("context", "context-precision", "contextual-relevancy")
CASES = (
    "baseline",
    *(f"5mb-{m}" for m in METRICS),
    *(f"200kb-{m}" for m in METRICS),
    "10k-chunks-context-similarity",
    "10k-chunks-contextual-relevancy",
    *(f"5mb-judged-{m}" for m in JUDGED),
)
QUESTION = "When did the parcel reach the customer?"


@cache
def _words() -> list[str]:
    vocab = resources.files("contextlens.embeddings") / "assets/all-MiniLM-L6-v2/vocab.txt"
    words = [w for w in vocab.read_text("utf-8").splitlines() if w.isascii() and w.isalpha()]
    return [w for w in words if len(w) > 1][:20_000]


def prose(n_chars: int, seed: int = 0) -> str:
    """``n_chars`` of distinct sentences of 8 to 30 common words (some with a number)."""
    rng = random.Random(seed)
    words = _words()
    out: list[str] = []
    size = 0
    while size < n_chars:
        sentence = " ".join(rng.choices(words, k=rng.randint(8, 30)))
        if rng.random() < 0.2:
            sentence += f" {rng.randint(1, 5000)}"
        sentence = sentence[0].upper() + sentence[1:] + "."
        out.append(sentence)
        size += len(sentence) + 1
    return " ".join(out)[:n_chars]


def _case(metric: str, big: str, chunks: list[str] | None = None) -> Any:
    from contextlens.schemas import Batch, Dataset, ModelTestCase

    short = "The parcel reached the customer two days after it left the depot."
    if metric == "context":
        return Dataset(
            session_id="s",
            assistant_id="bench",
            context=short,
            conversation=[
                Batch(qa_id="big", query=QUESTION, assistant=big),
                Batch(qa_id="short", query=QUESTION, assistant=short),
            ],
        )
    if metric == "contextual-relevancy":
        return ModelTestCase(input=QUESTION, retrieval_context=chunks or [short, big])
    return ModelTestCase(
        input=QUESTION,
        actual_output=big,
        expected_output=short,
        retrieval_context=chunks or [short],
    )


def _outcome(item: Any) -> str:
    if item.error:
        return "failed: " + item.error
    failed = getattr(item.details, "n_failed", None)
    return f"score {item.score:.3f}" + (f" ({failed} interaction failed)" if failed else "")


def run_case(name: str) -> dict[str, Any]:
    """One case, in this process."""
    from contextlens import evaluate
    from contextlens.embeddings.minilm import default_embedder

    if name == "baseline":
        default_embedder().embed_sync(["The parcel reached the customer."])
        return {"seconds": 0.0, "outcome": "-", "calls": None}
    judged = name.startswith("5mb-judged-")
    if name.startswith("10k-chunks-"):
        metric = name.removeprefix("10k-chunks-")
        chunks = [prose(300, seed=i) for i in range(10_000)]
        case = _case(metric, prose(400, seed=-1), chunks)
    else:
        size = 5 * MB if name.startswith("5mb") else 199_000
        metric = name.split("-", 2 if judged else 1)[-1]
        case = _case(metric, prose(size))
    kwargs: dict[str, Any] = {"cache": False, "progress": False, "keep_results": True}
    calls = None
    started = time.perf_counter()
    if judged:
        from contextlens.testing import FakeOpenAIServer

        with FakeOpenAIServer() as server:
            run = evaluate([case], [metric], judge=f"{server.base_url}#judge", **kwargs)
            calls = server.calls
    else:
        run = evaluate([case], [metric], **kwargs)
    seconds = time.perf_counter() - started
    [item] = run.results
    return {"seconds": seconds, "outcome": _outcome(item), "calls": calls}


def measure(name: str, timeout: float) -> dict[str, Any]:
    """Run ``name`` in a subprocess; its result with the peak RSS of that process."""
    command = [sys.executable, __file__, "--one", name]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "peak_mib": None, "outcome": f"did not finish in {timeout:.0f} s"}
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"seconds": None, "peak_mib": None, "outcome": f"error: {tail}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", choices=CASES, default=list(CASES))
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        result = run_case(args.one)
        result["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return
    header("oversized items: wall time and peak RSS per case (each case in its own process)")
    rows = []
    for name in args.cases:
        r = measure(name, args.timeout)
        seconds = "-" if r["seconds"] is None else f"{r['seconds']:.1f} s"
        peak = "-" if r["peak_mib"] is None else f"{r['peak_mib']:.0f} MiB"
        calls = "" if r.get("calls") is None else f"{r['calls']}"
        rows.append([name, seconds, peak, calls, r["outcome"]])
        print(f"done {name}: {seconds}, {peak}", file=sys.stderr, flush=True)
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    titles = ["case", "time", "peak RSS", "judge calls"]
    widths = [max(w, len(t)) for w, t in zip(widths, titles, strict=True)]
    print("  ".join(t.ljust(w) for t, w in zip(titles, widths, strict=True)) + "  outcome")
    print("  ".join("-" * w for w in widths) + "  -------")
    for row in rows:
        numbers = (v.rjust(w) for v, w in zip(row[1:4], widths[1:], strict=True))
        cells = [row[0].ljust(widths[0]), *numbers]
        print("  ".join(cells) + "  " + row[4])


if __name__ == "__main__":
    main()
