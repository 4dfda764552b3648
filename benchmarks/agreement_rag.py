"""Agreement of faithfulness, context-recall and context-precision-ranked with people's labels.

Run: .venv/bin/python benchmarks/agreement_rag.py [--limit N] [--data DIR] [--judge SPEC]

Each row is ``contextlens.calibrate`` on one public set of ``/work/shared/data`` that fits
the metric, offline by default (``--judge`` takes any judge spec); each set is a seeded
sample of ``--limit`` rows stratified by label (all rows when the set is smaller):

* faithfulness (the answer's claims against the retrieved chunks): AttributionBench (a
  search-augmented answer and the passages it cites), BEGIN (dialogue replies and their
  knowledge snippet), Factcheck-GPT (a claim and one evidence passage), HaluEval QA and WiCE
  (a Wikipedia claim and the articles it cites). The label: the text is supported.
* context-recall (the reference answer's claims against the retrieved chunks): the same kind
  of pairs read the other way, the claim as the reference answer and the passages as what was
  retrieved: Factcheck-GPT, WiCE and AttributionBench. The label: the passages hold the claim.
* context-precision-ranked: TREC DL 2019's ranked lists (10 judged passages of one query in
  random order); the label is the human average precision of the list (passages that answer
  the query), compared by Spearman and, split at its median, by AUROC. The lists have no
  reference answer, so usefulness is judged for the input.

The offline faithfulness and recall scores use the same support model as the ``context``
metric, which was fitted on all 9 sources of ``_support_sources.py`` (these sets among
them): those rows are in-sample (``benchmarks/select_support.py`` prints the held-out
figures). A row with no question is given ``-`` as its input.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _workload import header

from contextlens.calibration import calibrate, read_labelled


@dataclass(frozen=True)
class Row:
    metric: str
    data: str
    reference: bool = False  # the set's text is the reference answer, not the answer


ROWS = (
    Row("faithfulness", "attribution_bench"),
    Row("faithfulness", "begin_dev"),
    Row("faithfulness", "factcheck_gpt"),
    Row("faithfulness", "halueval_qa"),
    Row("faithfulness", "wice"),
    Row("context-recall", "factcheck_gpt", reference=True),
    Row("context-recall", "wice", reference=True),
    Row("context-recall", "attribution_bench", reference=True),
    Row("context-precision-ranked", "trec_dl19_passage_ranked"),
)


def sample(rows: list[dict[str, Any]], limit: int, seed: int = 0) -> list[dict[str, Any]]:
    """A seeded sample of ``limit`` rows stratified by label (graded: by the median)."""
    if limit >= len(rows):
        return rows
    labels = np.array([r["label"] for r in rows], dtype=float)
    cut = float(np.median(labels)) if not np.all((labels == 0) | (labels == 1)) else 1.0
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for positive in (True, False):
        members = [i for i, y in enumerate(labels) if (y >= cut) == positive]
        k = max(1, round(limit * len(members) / len(rows)))
        chosen += rng.choice(members, size=min(k, len(members)), replace=False).tolist()
    return [rows[i] for i in sorted(chosen)]


def with_input(row: dict[str, Any]) -> dict[str, Any]:
    """A row with no question gets ``-`` as its input (a case needs one; it has no words,
    so it changes no score)."""
    return row if str(row.get("question") or "").strip() else {**row, "question": "-"}


def as_reference(row: dict[str, Any]) -> dict[str, Any]:
    """A labelled pair read for context recall: its text is the reference answer."""
    out = {k: v for k, v in row.items() if k != "answer"}
    out["expected_output"] = row["answer"]
    return out


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=400, help="rows per set (seeded sample)")
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--judge", default=None, help="a judge spec; default: offline")
    parser.add_argument("--only", default="", help="comma-separated metrics to run")
    args = parser.parse_args()
    header("Agreement with human labels: faithfulness, context-recall, context-precision-ranked")
    only = {m.strip() for m in args.only.split(",") if m.strip()}
    print(
        "| set | metric | items | AUROC [95% interval] | balanced accuracy at 0.5 "
        "| Spearman | ECE | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for spec in ROWS:
        if only and spec.metric not in only:
            continue
        every = [r.fields for r in read_labelled(args.data / f"{spec.data}.jsonl")]
        used = [with_input(r) for r in sample(every, args.limit)]
        rows = [as_reference(r) for r in used] if spec.reference else used
        t0 = time.perf_counter()
        report = calibrate(
            rows,
            spec.metric,
            judge=args.judge,
            cache=False,
            progress=False,
            note=f"{spec.data}: {len(used)} of {len(every)} rows",
        )
        seconds = time.perf_counter() - t0
        interval = f"{_f(report.auroc)} [{_f(report.auroc_low)}, {_f(report.auroc_high)}]"
        items = f"{report.n:,}" + (f" of {len(every):,}" if len(used) < len(every) else "")
        failed = f" ({report.n_failed} failed)" if report.n_failed else ""
        print(
            f"| {spec.data} | {spec.metric} | {items}{failed} | {interval} "
            f"| {_f(report.balanced_accuracy)} | {_f(report.spearman)} | {_f(report.ece)} "
            f"| {seconds:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
