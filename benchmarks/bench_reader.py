"""Throughput of the shipped claim reader: pairs a second on real pairs.

Run: CONTEXTLENS_CACHE_DIR=DIR .venv/bin/python benchmarks/bench_reader.py
     [--pairs 600] [--repeats 3] [--threads 2]

Pairs: the (claim, evidence window) pairs that :func:`contextlens.offline.reader.claim_pairs`
builds for the natural-error sources of ``_support_sources.py``, an equal seeded share of
each, tokenised and run by :class:`contextlens.offline.reader.ClaimReader` as the
library runs them (int8 ONNX, onnxruntime CPU). Printed: the model file, its size and layers,
pairs/s (median and range of the runs; each run from a fresh session, so the first is a
cold start), and the budget it is held to: at least 50 pairs a second on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np
from _support_sources import DATA, SPECS, item, read_rows
from _workload import header, print_table

from contextlens.embeddings.cached import CachedEmbedder
from contextlens.embeddings.minilm import default_embedder
from contextlens.engine.cache import open_cache
from contextlens.offline.reader import ClaimReader, claim_pairs

BUDGET = 50.0


def sample_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    embedder = CachedEmbedder(default_embedder(), open_cache(True))
    natural = [s for s in SPECS if s.natural]
    out: list[tuple[str, str]] = []
    for spec in natural:
        rows = read_rows(DATA, spec)
        pick = rng.choice(len(rows), size=min(len(rows), n // len(natural)), replace=False)
        found = asyncio.run(claim_pairs([item(rows[i]) for i in sorted(pick)], embedder))
        out += [p.pairs[0] for p in found if p.pairs]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    header("claim reader throughput")
    pairs = sample_pairs(args.pairs)
    rates = []
    for _ in range(args.repeats):
        reader = ClaimReader(threads=args.threads)
        t0 = time.perf_counter()
        reader.predict(pairs)
        rates.append(len(pairs) / (time.perf_counter() - t0))
    card = ClaimReader().card
    size = ClaimReader().model_path.stat().st_size / 1e6
    median = statistics.median(rates)
    print_table(
        ["model", "size MB", "pairs", "threads", "pairs/s median", "range", "budget", "within"],
        [
            [
                card.get("name", "?"),
                f"{size:.1f}",
                len(pairs),
                args.threads,
                f"{median:.0f}",
                f"{min(rates):.0f}-{max(rates):.0f}",
                f">= {BUDGET:.0f}",
                "yes" if median >= BUDGET else "no",
            ]
        ],
    )


if __name__ == "__main__":
    main()
