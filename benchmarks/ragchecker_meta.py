"""Claim correctness and completeness against RAGChecker's human preferences.

Run: .venv/bin/python benchmarks/ragchecker_meta.py [--judge SPEC] [--limit N]

RAGChecker's meta-evaluation set (``benchmarks/ragchecker``, Apache-2.0; 280 questions of ten
public RAG benchmarks, each with a reference answer and the responses of two RAG systems,
each pair rated by two annotators from -2, the first response is much better, to 2, the
second is) scores a response on three human labels: correctness (are its claims right?),
completeness (does it hold the reference's claims?) and overall. None of the offline models
was fitted or chosen on it.

The reference answer is read as the evidence, so the claim metrics measure what the labels
ask: correctness is ``faithfulness`` of the response against the reference (the share of the
response's claims the reference supports; RAGChecker's precision), completeness is
``context-recall`` of the reference against the response (the share of the reference's
claims the response holds; its recall), overall is their F1. A pair's score is the second
response's minus the first's, correlated, as RAGChecker's ``meta_eval.py`` does, with each of
the 560 human labels (Pearson and Spearman, x100); a response the metric could not score (not
applicable, failed, empty) takes the median difference, as there, and is counted. Reference
rows: RAGChecker's own published scores (its LLM extractor and checker), the agreement of the
two annotators, and the length difference of the responses (a response that says more is
often rated more complete).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _workload import header

from contextlens import evaluate
from contextlens.calibration.statistics import spearman
from contextlens.metrics.context_recall import ContextRecallMetric
from contextlens.metrics.faithfulness import FaithfulnessMetric

DATA = Path(__file__).with_name("ragchecker") / "meta_eval.jsonl.gz"
LABELS = ("correctness", "completeness", "overall")


@dataclass(frozen=True)
class Instance:
    """One rated pair: the question, the reference answer, two responses and the labels."""

    instance_id: int
    query: str
    reference: str
    responses: tuple[str, str]
    human: tuple[dict[str, int], ...]
    ragchecker: tuple[dict[str, float], dict[str, float]]


@dataclass(frozen=True)
class Scores:
    """A metric's scores of each response, ``None`` where it could not score one."""

    correctness: list[float | None]
    completeness: list[float | None]

    def overall(self) -> list[float | None]:
        out: list[float | None] = []
        for p, r in zip(self.correctness, self.completeness, strict=True):
            out.append(None if p is None or r is None else (2 * p * r / (p + r) if p + r else 0.0))
        return out


def load(limit: int | None) -> list[Instance]:
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    out = [
        Instance(
            instance_id=r["instance_id"],
            query=r["query"],
            reference=r["gt_answer"],
            responses=(r["responses"][0], r["responses"][1]),
            human=tuple(r["human"]),
            ragchecker=(r["ragchecker"][0], r["ragchecker"][1]),
        )
        for r in rows
    ]
    return out[:limit] if limit else out


def paragraphs(text: str) -> list[str]:
    """A text's paragraphs (blank-line separated), the chunks the other side is read against."""
    parts = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return parts or [text]


def scored(
    instances: list[Instance], judge: str | None, support_model: str
) -> tuple[Scores, dict[str, int]]:
    """Correctness and completeness of every response (two per instance, in order), read
    offline by ``support_model`` when there is no judge."""
    precision_cases, recall_cases = [], []
    for inst in instances:
        for k, response in enumerate(inst.responses):
            case_id = f"{inst.instance_id}-{k}"
            if not response.strip():
                continue  # an empty response: no case, so no score
            precision_cases.append(
                {
                    "name": case_id,
                    "input": inst.query,
                    "actual_output": response,
                    "retrieval_context": paragraphs(inst.reference),
                }
            )
            recall_cases.append(
                {
                    "name": case_id,
                    "input": inst.query,
                    "expected_output": inst.reference,
                    "retrieval_context": paragraphs(response),
                }
            )
    unscored: dict[str, int] = {}

    def run(cases: list[dict[str, object]], metric: Any) -> list[float | None]:
        result = evaluate(cases, [metric], judge=judge, cache=False, progress=False)
        by_id = {item.case_id: item for item in result.results}
        scores = [
            by_id[f"{inst.instance_id}-{k}"].score if f"{inst.instance_id}-{k}" in by_id else None
            for inst in instances
            for k in range(2)
        ]
        unscored[metric.name] = sum(s is None for s in scores)
        return scores

    return (
        Scores(
            run(precision_cases, FaithfulnessMetric(support_model=support_model)),
            run(recall_cases, ContextRecallMetric(support_model=support_model)),
        ),
        unscored,
    )


def deltas(values: list[float | None]) -> tuple[np.ndarray, int]:
    """Second response minus first, per instance; a missing one takes the median."""
    d = np.array(
        [
            np.nan if a is None or b is None else b - a
            for a, b in zip(values[0::2], values[1::2], strict=True)
        ],
        dtype=float,
    )
    missing = int(np.isnan(d).sum())
    if missing:
        d[np.isnan(d)] = np.nanmedian(d)
    return d, missing


def correlation(pred: np.ndarray, instances: list[Instance], label: str) -> str:
    """Pearson and Spearman (x100) of one score per instance with both annotators' labels."""
    x = np.repeat(pred, 2)
    y = np.array([h[label] for inst in instances for h in inst.human], dtype=float)
    return pair(x, y)


def pair(x: np.ndarray, y: np.ndarray) -> str:
    """Pearson / Spearman, x100; ``-`` when a side is constant."""
    if np.std(x) == 0 or np.std(y) == 0:
        return "- / -"
    return f"{np.corrcoef(x, y)[0, 1] * 100:.1f} / {spearman(x, y) * 100:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judge", default=None, help="a judge spec; default: offline")
    parser.add_argument("--limit", type=int, default=None, help="first N instances")
    args = parser.parse_args()
    header("RAGChecker meta-evaluation: correlation with human preferences (Pearson / Spearman)")
    instances = load(args.limit)
    print(f"{len(instances)} pairs, {2 * len(instances)} human labels")
    rows: list[str] = []
    notes: list[str] = []
    for support_model in ("features", "reader") if args.judge is None else ("features",):
        t0 = time.perf_counter()
        scores, unscored = scored(instances, args.judge, support_model)
        seconds = time.perf_counter() - t0
        who = args.judge or f"offline, support_model={support_model}"
        ours = {
            "correctness": scores.correctness,
            "completeness": scores.completeness,
            "overall": scores.overall(),
        }
        cells = [correlation(deltas(ours[label])[0], instances, label) for label in LABELS]
        rows.append(f"| contextlens ({who}) | " + " | ".join(cells) + " |")
        notes.append(
            f"{who}: {seconds:.0f} s; responses not scored (median difference used): "
            + ", ".join(f"{m} {n}" for m, n in unscored.items())
        )
    print("\n".join(notes))
    print()
    print("| scorer | " + " | ".join(LABELS) + " |")
    print("|---|" + "---|" * len(LABELS))
    print("\n".join(rows))
    cells = []
    for label in LABELS:
        d = np.array([i.ragchecker[1][label] - i.ragchecker[0][label] for i in instances])
        cells.append(correlation(d, instances, label))
    print("| RAGChecker, its published scores (an LLM checker) | " + " | ".join(cells) + " |")
    length = np.array([len(i.responses[1]) - len(i.responses[0]) for i in instances], float)
    cells = [correlation(length, instances, label) for label in LABELS]
    print("| response length difference | " + " | ".join(cells) + " |")
    cells = []
    for label in LABELS:
        a = np.array([i.human[0][label] for i in instances], dtype=float)
        b = np.array([i.human[1][label] for i in instances], dtype=float)
        cells.append(pair(a, b))
    print("| one annotator against the other | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
