"""The retrieval metric on TREC Deep Learning 2019 and 2020, beside trec_eval (pytrec_eval).

Run: .venv/bin/python benchmarks/retrieval_trec.py [--k 10] [--level 2]

The rankings are our own, the ones tests/metrics/test_retrieval.py checks
(tests/support/trec.py): BM25 (k1 0.9, b 0.4) over every judged passage of a year, the top
100 per query, and the 210 ranked lists of trec_dl19_passage_ranked.jsonl. Only judged
passages are in the pool, so the figures are not those of a full-collection run. The binary
measures count grade ``--level`` and above as relevant (2, "answers the query", is TREC DL's
cut-off; queries with no such passage are left out, as trec_eval leaves them out). Each ranking goes
through ``contextlens.evaluate`` with one labelled ``RetrievalMetric`` per measure, so every
mean comes with its credible interval; beside it, the largest difference from trec_eval's
value for the same query over the cut-offs 1, 3, 5, 10, 20 and 100 and relevance levels 1
and 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _workload import header

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pytrec_eval

from contextlens import ModelTestCase, evaluate
from contextlens.metrics.retrieval import MEASURES, RetrievalMetric, retrieval_measures
from support import trec

CUTS = (1, 3, 5, 10, 20, 100)


def rankings() -> list[tuple[str, dict[str, dict[str, int]], dict[str, list[str]]]]:
    dl19, dl20 = trec.year("dl19"), trec.year("dl20")
    lists = {f"{q}/{i}": docs for i, (q, docs) in enumerate(trec.ranked_lists())}
    return [
        ("TREC DL 2019, BM25 top 100", dl19.qrels, trec.bm25("dl19")),
        ("TREC DL 2020, BM25 top 100", dl20.qrels, trec.bm25("dl20")),
        (
            "TREC DL 2019 ranked lists (10 each)",
            {key: dl19.qrels[key.split("/")[0]] for key in lists},
            lists,
        ),
    ]


def largest_difference(qrels: dict[str, dict[str, int]], runs: dict[str, list[str]]) -> float:
    """max |ours - trec_eval| over queries, cut-offs, levels 1 and 2 and the six measures."""
    worst = 0.0
    cuts = ",".join(map(str, CUTS))
    names = {f"{m}.{cuts}" for m in ("P", "recall", "success", "ndcg_cut", "map_cut")}
    for level in (1, 2):
        judged = {q: r for q, r in runs.items() if any(g >= level for g in qrels[q].values())}
        wanted = {q: qrels[q] for q in judged}
        scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in judged.items()}
        full = pytrec_eval.RelevanceEvaluator(wanted, names, relevance_level=level).evaluate(scored)
        for k in CUTS:
            cut = {
                q: {d: s for d, s in r.items() if s > len(judged[q]) - k} for q, r in scored.items()
            }
            rr = pytrec_eval.RelevanceEvaluator(wanted, {"recip_rank"}, relevance_level=level)
            reciprocal = rr.evaluate({q: r for q, r in cut.items() if r})
            for q, ranked in judged.items():
                ours = retrieval_measures(ranked, wanted[q], k, level)
                theirs = full[q]
                pairs = {
                    "hit_rate": theirs[f"success_{k}"],
                    "recall": theirs[f"recall_{k}"],
                    "precision": theirs[f"P_{k}"],
                    "ndcg": theirs[f"ndcg_cut_{k}"],
                    "map": theirs[f"map_cut_{k}"],
                    "mrr": reciprocal.get(q, {}).get("recip_rank", 0.0),
                }
                for measure, value in pairs.items():
                    worst = max(worst, abs(getattr(ours, measure) - value))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--level", type=int, default=2, help="relevance level of the binary measures (TREC DL: 2)"
    )
    args = parser.parse_args()
    header(
        f"The retrieval metric at k={args.k}, relevance level {args.level}, on TREC DL, and its "
        "largest gap to trec_eval"
    )
    k = args.k
    shown = {"hit_rate": "hit", "recall": "recall", "precision": "P", "mrr": "MRR"}
    shown |= {"ndcg": "nDCG", "map": "MAP"}
    heads = " | ".join(f"{shown[m]}@{k}" for m in MEASURES)
    print(f"| ranking | queries | {heads} | largest difference from trec_eval |")
    print("|---|---|" + "---|" * len(MEASURES) + "---|")
    for name, qrels, runs in rankings():
        cases = [
            ModelTestCase(input=q, retrieved_ids=r, relevant_ids=qrels[q], name=q)
            for q, r in runs.items()
            if any(g >= args.level for g in qrels[q].values())
        ]
        metrics = [
            RetrievalMetric(k=k, measure=m, relevance_level=args.level, label=m) for m in MEASURES
        ]
        run = evaluate(cases, metrics, progress=False, cache=False, store=False)
        cells = []
        for m in MEASURES:
            s = run.summaries[f"retrieval:{m}"]
            cells.append(f"{s.mean:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]")
        gap = largest_difference(qrels, runs)
        print(f"| {name} | {len(cases)} | {' | '.join(cells)} | {gap:.1e} |", flush=True)


if __name__ == "__main__":
    main()
