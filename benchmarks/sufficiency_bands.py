"""The offline sufficient-context calls, measured on TREC Deep Learning, and bands chosen
leave one source out.

    benchmarks/sufficiency_bands.py [--data DIR] [--lists 12] [--k 5] [--precision 0.8]

Offline, ``sufficient-context`` calls the context insufficient below ``INSUFFICIENT`` (0.4)
and says "needs a judge" from there: this measures why it makes no "sufficient" call. Whether
retrieved passages let a reader answer a question is what TREC DL's assessors graded: grade
>= 2 ("highly" or "perfectly relevant") answers the query, grade 1 is related but does not
answer it, grade 0 (DL 2020 only) has nothing to do with it. No set of questions labelled
for sufficiency by people is at hand; these grades are the nearest.

Lists. For each query of a source, ``--lists`` lists of ``--k`` passages that hold an
answer (one or two passages of grade >= 2, the rest related, irrelevant or another query's)
and as many that hold none (at least two related passages, so they are on the question's
topic, the rest irrelevant or another query's), shuffled, seeded. Label: 1 when a passage
of the list answers the query.

Printed per source: the AUROC of the offline score; the share of lists called insufficient
and the precision of that call (lists that hold no answer); the best precision a
"sufficient" call would have at any cut from 0.5 to 0.95 (lists that hold an answer: half of
them); then bands chosen on one source (the lowest
``upper`` and the highest ``lower`` whose calls reach ``--precision`` there) and measured on
the other. A list the offline scorer does not score (a passage it takes for another
language) is counted and left out. Scores are kept in ``benchmarks/.sufficiency/``. The
relevance model that is one of the two signals was fitted on these two
sources for another target (does a passage bear on the query, grade >= 1): the lists and
the target are new, the model is not held out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from _workload import header, print_table

from contextlens.calibration.statistics import auroc
from contextlens.embeddings import default_embedder
from contextlens.metrics.base import Services
from contextlens.metrics.sufficient_context import INSUFFICIENT, SufficientContextMetric
from contextlens.schemas import ModelTestCase

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
CACHE = HERE / ".sufficiency"
SOURCES = {
    "TREC DL 2019": "trec_dl19_passage.jsonl",
    "TREC DL 2020": "trec_dl20_passage_graded.jsonl",
}


def load(path: Path) -> dict[str, dict[str, Any]]:
    """Each query's text and its passages by grade."""
    queries: dict[str, dict[str, Any]] = {}
    for line in path.open(encoding="utf-8"):
        row = json.loads(line)
        meta = row["meta"]
        q = queries.setdefault(
            meta["query_id"], {"question": row["question"], "by": defaultdict(list)}
        )
        q["by"][int(meta["grade"])].append(row["contexts"][0])
    return queries


def make_lists(
    queries: dict[str, dict[str, Any]], lists: int, k: int, seed: int
) -> list[tuple[str, list[str], int]]:
    """``(question, passages, holds an answer)`` lists, balanced per query."""
    rng = random.Random(seed)
    ids = sorted(queries)
    out = []
    for qid in ids:
        by = queries[qid]["by"]
        answers, related, none = by[2] + by[3], by[1], by[0]
        if not answers or len(related) < 2:
            continue
        others = [p for o in ids if o != qid for g in (1, 2, 3) for p in queries[o]["by"][g]]
        for _ in range(lists):
            n_answer = rng.choice((1, 2))
            for holds in (1, 0):
                chosen = rng.sample(answers, min(n_answer, len(answers))) if holds else []
                chosen += rng.sample(related, min(len(related), rng.choice((2, 3))))
                while len(chosen) < k:
                    pool = none if none and rng.random() < 0.5 else others
                    chosen.append(rng.choice(pool))
                chosen = chosen[:k]
                rng.shuffle(chosen)
                out.append((queries[qid]["question"], chosen, holds))
    return out


async def scores(items: list[tuple[str, list[str], int]]) -> list[float]:
    metric = SufficientContextMetric()
    services = Services(judge=None, embedder=default_embedder())
    out = []
    for question, chunks, _ in items:
        result = await metric.score(
            ModelTestCase(input=question, retrieval_context=chunks), services
        )
        value = getattr(result.details, "probability", None)
        out.append(float("nan") if value is None else float(value))
    return out


def measured(values: list[float], labels: list[int], lower: float, upper: float) -> list[str]:
    """Share decided, precision of the sufficient and insufficient calls."""
    said_yes = [y for v, y in zip(values, labels, strict=True) if v >= upper]
    said_no = [y for v, y in zip(values, labels, strict=True) if v < lower]
    decided = (len(said_yes) + len(said_no)) / len(values)
    yes = f"{sum(said_yes) / len(said_yes):.3f} (n {len(said_yes)})" if said_yes else "-"
    no = f"{1 - sum(said_no) / len(said_no):.3f} (n {len(said_no)})" if said_no else "-"
    return [f"[{lower:.2f}, {upper:.2f}]", f"{decided:.1%}", yes, no]


def chosen(values: list[float], labels: list[int], target: float) -> tuple[float, float]:
    """The widest decisions reaching ``target`` precision: the lowest ``upper``, the
    highest ``lower`` (0.01 steps; ``upper`` at least ``lower``)."""
    pairs = list(zip(values, labels, strict=True))
    upper = 1.01
    for cut in [c / 100 for c in range(100, 0, -1)]:
        yes = [y for v, y in pairs if v >= cut]
        if yes and sum(yes) / len(yes) >= target:
            upper = cut
        elif yes:
            break
    lower = 0.0
    for cut in [c / 100 for c in range(1, 101)]:
        no = [y for v, y in pairs if v < cut]
        if no and 1 - sum(no) / len(no) >= target and cut <= upper:
            lower = cut
        elif no:
            break
    return lower, upper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--lists", type=int, default=12)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--precision", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    found: dict[str, tuple[list[float], list[int]]] = {}
    unscored: dict[str, int] = {}
    for name, file in SOURCES.items():
        items = make_lists(load(args.data / file), args.lists, args.k, args.seed)
        key = f"{file}-{args.lists}-{args.k}-{args.seed}"
        kept = CACHE / f"{key}.json"
        if kept.exists():
            values = json.loads(kept.read_text())
        else:
            values = asyncio.run(scores(items))
            CACHE.mkdir(exist_ok=True)
            kept.write_text(json.dumps(values))
        pairs = [(v, y) for v, (_, _, y) in zip(values, items, strict=True) if v == v]
        unscored[name] = len(values) - len(pairs)
        found[name] = ([v for v, _ in pairs], [y for _, y in pairs])
    header(f"Offline sufficient context on TREC DL lists of {args.k} passages")
    rows = []
    for name, (values, labels) in found.items():
        _, decided, _, no = measured(values, labels, INSUFFICIENT, 2.0)
        best = max(
            (
                (sum(ys) / len(ys), cut)
                for cut in [c / 100 for c in range(50, 96, 5)]
                if (ys := [y for v, y in zip(values, labels, strict=True) if v >= cut])
            ),
            default=None,
        )
        rows.append(
            [
                name,
                f"{len(values)} ({unscored[name]} not scored)",
                f"{auroc(values, labels):.3f}",
                decided,
                no,
                "-" if best is None else f"{best[0]:.3f} (from {best[1]:.2f})",
            ]
        )
    columns = [
        "source",
        "lists",
        "AUROC",
        f"called insufficient (< {INSUFFICIENT})",
        "its precision",
        "best precision of a sufficient call",
    ]
    print_table(columns, rows)
    header(f"Bands chosen on one source at {args.precision:.0%} precision, measured on the other")
    rows = []
    for name, (values, labels) in found.items():
        other = next(n for n in found if n != name)
        lower, upper = chosen(*found[other], args.precision)
        rows.append([name, other, *measured(values, labels, lower, upper)])
    print_table(
        [
            "held out",
            "chosen on",
            "bands",
            "decided",
            "precision sufficient",
            "precision insufficient",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
