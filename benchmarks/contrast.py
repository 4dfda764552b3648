"""The offline faithfulness scorer on the contrast set: does it read, or match words?

Run: .venv/bin/python benchmarks/contrast.py [--metric faithfulness|context] [--data PATH]
     [--judge SPEC] [--json PATH]

``benchmarks/contrast/contrast.jsonl`` pairs each passage with faithful answers in other words
(label 1: paraphrases, complements, fusions, partial answers) and with one-edit contradictions
of it (label 0: a negation, antonym, number, unit, date, name, quantifier, role or condition
changed); ``benchmarks/contrast/README.md`` says where each passage comes from. Every row is
scored through ``contextlens.evaluate`` as a user would score it:

* ``faithfulness`` (the default): one test case a row, the passage as its retrieved chunk and
  the answer as its output;
* ``context``: one session a row, the passage as its system context and one interaction whose
  assistant reply is the answer.

Printed: n; the items decided (a score) and those not (not applicable, e.g. "needs a judge",
and failed, each counted apart with its reasons, never as a 0); wrong verdicts at the metric's
default pass mark (verdict = score >= pass mark, against the label) as a share of all items
and of the decided ones; the AUROC of the decided items with its bootstrap interval; the same
per ``meta.kind`` and per source; the targets of the contrast set; the ten worst items.
Offline by default (``--judge`` takes any judge spec); no cache and no run store are used.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _workload import header, print_table

import contextlens
from contextlens import Batch, Dataset, ItemResult, ModelTestCase
from contextlens.calibration import auroc, auroc_interval

DATA = Path(__file__).resolve().parent / "contrast" / "contrast.jsonl"

#: The contrast set's targets: wrong verdicts among the decided items, items left undecided
#: (not applicable or failed) among all, and the AUROC of the decided items.
MAX_WRONG = 0.20
MAX_UNDECIDED = 0.30
MIN_AUROC = 0.80


@dataclass(frozen=True)
class Row:
    id: str
    question: str
    passage: str
    answer: str
    label: int
    kind: str
    source: str


@dataclass
class Scored:
    row: Row
    score: float | None
    not_applicable: str | None
    error: str | None

    @property
    def decided(self) -> bool:
        return self.score is not None and self.not_applicable is None and self.error is None

    @property
    def value(self) -> float:
        """The score of a decided item."""
        if self.score is None:
            raise ValueError(f"{self.row.id}: not decided")
        return float(self.score)


@dataclass
class Figures:
    """The figures of one group of items."""

    n: int
    decided: int
    not_applicable: int
    failed: int
    wrong: int
    wrong_of_all: float | None
    wrong_of_decided: float | None
    undecided_share: float | None
    auroc: float | None
    auroc_low: float | None = None
    auroc_high: float | None = None
    mean_score: float | None = None
    mean_score_faithful: float | None = None
    mean_score_contradicted: float | None = None
    reasons: dict[str, int] = field(default_factory=dict)


def read_rows(path: Path) -> list[Row]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        meta = raw.get("meta") or {}
        rows.append(
            Row(
                id=str(raw["id"]),
                question=raw.get("question") or "",
                passage="\n".join(raw["contexts"]),
                answer=raw["answer"],
                label=int(raw["label"]),
                kind=str(meta.get("kind", "-")),
                source=str(meta.get("source", "-")),
            )
        )
    return rows


def cases_of(rows: list[Row], metric: str) -> list[ModelTestCase] | list[Dataset]:
    """The rows as the metric takes them: test cases, or sessions of one interaction."""
    if metric == "context":
        return [
            Dataset(
                session_id=r.id,
                assistant_id="contrast",
                context=r.passage,
                conversation=[Batch(qa_id="1", query=r.question, assistant=r.answer)],
            )
            for r in rows
        ]
    return [
        ModelTestCase(
            name=r.id, input=r.question, actual_output=r.answer, retrieval_context=[r.passage]
        )
        for r in rows
    ]


@dataclass
class Scoring:
    """What a run gave the rows: each row's result, the metric's pass mark, the judge it
    used and the offline models that read the items (``details.offline_model``, counted)."""

    items: list[Scored]
    threshold: float
    judge: str
    models: dict[str, int]


def score_cases(
    rows: list[Row], cases: list[ModelTestCase] | list[Dataset], metric: str, judge: str
) -> Scoring:
    """Score ``cases`` (one a row, named by its id) through ``contextlens.evaluate``."""
    run = contextlens.evaluate(
        cases, [metric], judge=judge, cache=False, store=False, progress=False
    )
    summary = run.summary(metric)
    found: dict[str, ItemResult] = {item.case_id: item for item in run.iter_results()}
    scored = []
    models: Counter[str] = Counter()
    for r in rows:
        item = found.get(r.id)
        if item is None:
            scored.append(Scored(r, None, None, "no result"))
            continue
        model = getattr(item.details, "offline_model", None)
        if model:
            models[str(model)] += 1
        scored.append(Scored(r, item.score, item.not_applicable, item.error or item.not_run))
    threshold = summary.threshold if summary.threshold is not None else 0.5
    return Scoring(scored, threshold, summary.judge or judge, dict(models))


def options(description: str, data: Path, what: str) -> argparse.ArgumentParser:
    """The command line of a labelled-set script: ``--data``, ``--metric``, ``--judge``,
    ``--json``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=data, help=f"a {what} (JSONL)")
    parser.add_argument(
        "--metric",
        default="faithfulness",
        choices=("faithfulness", "context"),
        help="the metric scored (default: faithfulness)",
    )
    parser.add_argument("--judge", default="offline", help="a judge spec (default: offline)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    return parser


def _reason(text: str, not_applicable: bool) -> str:
    """A reason as a group key: a not-applicable reason's heading ("needs a judge"), without
    the case's own words; an error's first words."""
    text = " ".join(text.split())
    if not_applicable and ":" in text[:40]:
        return text.split(":")[0]
    return text if len(text) <= 90 else text[:87] + "..."


def figures(items: list[Scored], threshold: float, interval: bool = False) -> Figures:
    decided = [s for s in items if s.decided]
    na = [s for s in items if s.not_applicable is not None]
    failed = [s for s in items if s.not_applicable is None and s.error is not None]
    wrong = sum((s.value >= threshold) != (s.row.label == 1) for s in decided)
    scores = [s.value for s in decided]
    labels = [s.row.label for s in decided]
    n = len(items)
    area = low = high = None
    if len(set(labels)) == 2:
        area = auroc(scores, labels)
        if interval:
            low, high = auroc_interval(scores, labels)
    reasons = Counter(
        ("not applicable: " if s.not_applicable is not None else "failed: ")
        + _reason(s.not_applicable or s.error or "", s.not_applicable is not None)
        for s in na + failed
    )

    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    return Figures(
        n=n,
        decided=len(decided),
        not_applicable=len(na),
        failed=len(failed),
        wrong=wrong,
        wrong_of_all=wrong / n if n else None,
        wrong_of_decided=wrong / len(decided) if decided else None,
        undecided_share=(len(na) + len(failed)) / n if n else None,
        auroc=area,
        auroc_low=low,
        auroc_high=high,
        mean_score=mean(scores),
        mean_score_faithful=mean([x for x, y in zip(scores, labels, strict=True) if y == 1]),
        mean_score_contradicted=mean([x for x, y in zip(scores, labels, strict=True) if y == 0]),
        reasons=dict(reasons.most_common()),
    )


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def group_rows(groups: dict[str, Figures]) -> list[list[Any]]:
    return [
        [
            name,
            f.n,
            f.decided,
            f.not_applicable + f.failed,
            num(f.mean_score),
            f.wrong,
            pct(f.wrong_of_decided),
            num(f.auroc),
        ]
        for name, f in groups.items()
    ]


def family(source: str) -> str:
    return source.split(":")[0]


def main(argv: list[str] | None = None) -> int:
    args = options(__doc__.split("\n")[0], DATA, "contrast set").parse_args(argv)

    rows = read_rows(args.data)
    header(f"Contrast set: {args.metric} on {args.data.name} ({len(rows)} items)")
    scoring = score_cases(rows, cases_of(rows, args.metric), args.metric, args.judge)
    items, threshold, judge = scoring.items, scoring.threshold, scoring.judge
    overall = figures(items, threshold, interval=True)

    print(f"metric {args.metric}, judge {judge}, default pass mark {threshold:g}")
    print_table(
        [
            "n",
            "decided",
            "not applicable",
            "failed",
            "undecided",
            "wrong",
            "wrong / all",
            "wrong / decided",
            "AUROC (decided) [95%]",
            "mean 1",
            "mean 0",
        ],
        [
            [
                overall.n,
                overall.decided,
                overall.not_applicable,
                overall.failed,
                pct(overall.undecided_share),
                overall.wrong,
                pct(overall.wrong_of_all),
                pct(overall.wrong_of_decided),
                f"{num(overall.auroc)} [{num(overall.auroc_low)}, {num(overall.auroc_high)}]",
                num(overall.mean_score_faithful),
                num(overall.mean_score_contradicted),
            ]
        ],
    )
    if overall.reasons:
        print("Undecided items, by reason:")
        print_table(["reason", "items"], [[k, v] for k, v in overall.reasons.items()])

    targets = [
        ("wrong verdicts among decided items", overall.wrong_of_decided, MAX_WRONG, "<="),
        ("not applicable or failed", overall.undecided_share, MAX_UNDECIDED, "<="),
        ("AUROC of decided items", overall.auroc, MIN_AUROC, ">="),
    ]
    met = {
        name: value is not None and (value <= bar if op == "<=" else value >= bar)
        for name, value, bar, op in targets
    }
    print("Targets:")
    print_table(
        ["target", "measured", "bar", "met"],
        [
            [
                name,
                pct(value) if op == "<=" else num(value),
                f"{op} {pct(bar) if op == '<=' else f'{bar:.2f}'}",
                "yes" if met[name] else "no",
            ]
            for name, value, bar, op in targets
        ],
    )

    headers = ["", "n", "decided", "undecided", "mean score", "wrong", "wrong / decided", "AUROC"]
    by_label = {
        f"label {y}": figures([s for s in items if s.row.label == y], threshold) for y in (1, 0)
    }
    kinds = sorted(
        {s.row.kind for s in items},
        key=lambda k: (-max(s.row.label for s in items if s.row.kind == k), k),
    )
    by_kind = {k: figures([s for s in items if s.row.kind == k], threshold) for k in kinds}
    families = sorted({family(s.row.source) for s in items})
    by_source = {
        f: figures([s for s in items if family(s.row.source) == f], threshold) for f in families
    }
    print("By label:")
    print_table(["label", *headers[1:]], group_rows(by_label))
    print("By kind (faithful kinds first, then one-edit contradictions):")
    print_table(["kind", *headers[1:]], group_rows(by_kind))
    print("By source:")
    print_table(["source", *headers[1:]], group_rows(by_source))

    worst = sorted(
        (s for s in items if s.decided),
        key=lambda s: -abs(s.value - s.row.label),
    )[:10]
    print("The 10 worst decided items (farthest from their label):")
    print_table(
        ["id", "kind", "label", "score", "answer"],
        [[s.row.id, s.row.kind, s.row.label, num(s.score), _excerpt(s.row.answer)] for s in worst],
    )

    if args.json is not None:
        payload = {
            "metric": args.metric,
            "judge": judge,
            "data": str(args.data),
            "pass_mark": threshold,
            "overall": asdict(overall),
            "targets": {
                name: {"measured": value, "bar": f"{op} {bar}", "met": met[name]}
                for name, value, bar, op in targets
            },
            "by_label": {k: asdict(v) for k, v in by_label.items()},
            "by_kind": {k: asdict(v) for k, v in by_kind.items()},
            "by_source": {k: asdict(v) for k, v in by_source.items()},
            "items": [
                {
                    "id": s.row.id,
                    "kind": s.row.kind,
                    "label": s.row.label,
                    "score": s.score,
                    "not_applicable": s.not_applicable,
                    "error": s.error,
                }
                for s in items
            ],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"figures written to {args.json}")
    return 0


def _excerpt(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


if __name__ == "__main__":
    sys.exit(main())
