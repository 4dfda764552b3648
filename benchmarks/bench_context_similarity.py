"""ContextSimilarityEvaluator throughput: cases/s, batch method vs novastack's per-text loop.

Run: .venv/bin/python benchmarks/bench_context_similarity.py [--cases 1000] [--contexts 5]
     [--subset 100]

Synthetic cases (deterministic, every text distinct): a 8-14 word query, a 15-30 word
answer, ``--contexts`` contexts of 20-40 words. Every method gets a fresh
``MiniLMEmbedder(memo_size=0)``, so no memo flatters anyone. Three methods:

* ``evaluate_batch``: ours, the cases scored concurrently, their texts gathered into a few
  runs of the model, each distinct text embedded once;
* ``evaluate`` loop: ours, one case at a time (query, answer and contexts in one run);
* novastack-style loop: per case and side, embed the reference text, then each context,
  one text per call (2 * (1 + k) calls per case; contexts embedded twice).

The two loops are timed on the first ``--subset`` cases and extrapolated to ``--cases``
(rate per case is flat: each case costs the same calls). The script also checks that the
batch and naive scores agree. cases/cpu-s (CPU time of this process, all threads) is less
sensitive than wall-clock rates to other work on the machine. "embed calls" are runs of the
model; the persistent cache is off.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from typing import Any

os.environ["CONTEXTLENS_CACHE"] = "off"  # every method embeds afresh

import numpy as np
from _workload import load_average
from numpy.typing import NDArray

from contextlens import ContextSimilarityEvaluator
from contextlens.embeddings import MiniLMEmbedder

_WORDS = (
    "the a an of to in on for with by from about model context answer question retrieval "
    "document passage user assistant customer order refund shipping delivery invoice account "
    "password reset error server request response latency cache database index vector search "
    "ranking result summary report quarter revenue growth market product feature release "
    "version update security patch network storage memory battery screen camera weather river "
    "mountain city village harbour school teacher student library museum history science "
    "energy climate forest ocean island travel train flight hotel dinner recipe garden season "
    "morning evening policy warranty support hours weekend holiday payment card bank transfer "
    "is was will can should must might has had does explains describes shows requires allows "
    "quickly carefully often never always because although while after before during within"
).split()


def _text(rng: random.Random, lo: int, hi: int, end: str = ".") -> str:
    body = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(lo, hi)))
    return body[0].upper() + body[1:] + end


def make_cases(n: int, k: int, seed: int = 11) -> list[dict[str, Any]]:
    """``n`` deterministic cases of ``k`` contexts; no text repeats anywhere."""
    rng = random.Random(seed)
    seen: set[str] = set()

    def fresh(lo: int, hi: int, end: str = ".") -> str:
        while True:
            t = _text(rng, lo, hi, end)
            if t not in seen:
                seen.add(t)
                return t

    return [
        {
            "query": fresh(8, 14, "?"),
            "generated_text": fresh(15, 30),
            "contexts": [fresh(20, 40) for _ in range(k)],
        }
        for _ in range(n)
    ]


class Counting(MiniLMEmbedder):
    """A MiniLMEmbedder without memo that counts the runs of its model and their texts."""

    def __init__(self) -> None:
        super().__init__(memo_size=0)
        self.calls = 0
        self.texts = 0

    def _embed_uncached(self, texts: list[str]) -> NDArray[np.float32]:
        self.calls += 1
        self.texts += len(texts)
        return super()._embed_uncached(texts)


def naive_scores(emb: MiniLMEmbedder, cases: list[dict[str, Any]]) -> tuple[list[float], int]:
    """novastack's loop (one text per embed call, contexts embedded per side), scored with
    our [0, 1] cosine mapping so that the scores can be compared. Returns (scores, calls)."""
    out: list[float] = []
    calls = 0
    for case in cases:
        means = []
        for reference in (case["query"], case["generated_text"]):
            ref = emb.embed_sync([reference])[0]
            calls += 1
            sims = []
            for ctx in case["contexts"]:
                vec = emb.embed_sync([ctx])[0]
                calls += 1
                sims.append((float(ref @ vec) + 1.0) / 2.0)
            means.append(sum(sims) / len(sims))
        q, a = means
        out.append(0.0 if q + a == 0 else 2 * q * a / (q + a))
    return out, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--contexts", type=int, default=5)
    parser.add_argument("--subset", type=int, default=100, help="cases timed for the loops")
    args = parser.parse_args()
    subset = min(args.subset, args.cases)

    cases = make_cases(args.cases, args.contexts)
    ctx_words = [len(c.split()) for case in cases for c in case["contexts"]]
    warm = MiniLMEmbedder(memo_size=0)
    warm.embed_sync(["warm up the model", "and the tokenizer"])  # load + verify once
    print(
        f"{args.cases} cases x {args.contexts} contexts ({min(ctx_words)}-{max(ctx_words)} "
        f"words, mean {np.mean(ctx_words):.0f}); {warm.threads} threads; "
        f"before: {load_average()}"
    )

    # ours, batch: all cases
    batch_emb = Counting()
    ev = ContextSimilarityEvaluator(batch_emb)
    t0, c0 = time.perf_counter(), time.process_time()
    batch_results = asyncio.run(ev.aevaluate_batch(cases))
    t_batch, c_batch = time.perf_counter() - t0, time.process_time() - c0

    # ours, one evaluate() per case: subset
    loop_emb = Counting()
    ev_loop = ContextSimilarityEvaluator(loop_emb)
    t0, c0 = time.perf_counter(), time.process_time()
    loop_results = [ev_loop.evaluate(**c) for c in cases[:subset]]
    t_loop, c_loop = time.perf_counter() - t0, time.process_time() - c0

    # novastack-style: subset
    t0, c0 = time.perf_counter(), time.process_time()
    naive, naive_calls = naive_scores(MiniLMEmbedder(memo_size=0), cases[:subset])
    t_naive, c_naive = time.perf_counter() - t0, time.process_time() - c0

    diff_naive = max(abs(a - r["score"]) for a, r in zip(naive, batch_results, strict=False))
    diff_loop = max(
        abs(a["score"] - b["score"]) for a, b in zip(loop_results, batch_results, strict=False)
    )
    naive_rate, naive_cpu_rate = subset / t_naive, subset / c_naive
    rows = [
        ("evaluate_batch (ours)", args.cases, batch_emb.calls, batch_emb.texts, t_batch, c_batch),
        ("evaluate() per case (ours)", subset, loop_emb.calls, loop_emb.texts, t_loop, c_loop),
        ("novastack-style loop", subset, naive_calls, naive_calls, t_naive, c_naive),
    ]
    print()
    print(
        f"{'method':<27} {'timed':>5} {'embed calls':>11} {'texts':>5} {'wall s':>7} "
        f"{'cases/s':>7} {f'est. s/{args.cases}':>11} {'vs naive':>8} "
        f"{'cases/cpu-s':>11} {'vs naive':>8}"
    )
    for name, n, calls, texts, secs, cpu in rows:
        rate, cpu_rate = n / secs, n / cpu
        mark = "*" if n < args.cases else " "
        print(
            f"{name:<27} {n:>5} {calls:>11} {texts:>5} {secs:>7.2f} {rate:>7.1f} "
            f"{args.cases / rate:>10.1f}{mark} {rate / naive_rate:>7.2f}x "
            f"{cpu_rate:>11.1f} {cpu_rate / naive_cpu_rate:>7.2f}x"
        )
    print(
        f"\n* timed on the first {subset} cases, extrapolated to {args.cases} "
        "(each case costs the same embed calls)."
    )
    print(
        f"score agreement on those cases: batch vs novastack-style max |diff| {diff_naive:.1e}, "
        f"batch vs evaluate() {diff_loop:.1e}; after: {load_average()}"
    )


if __name__ == "__main__":
    main()
