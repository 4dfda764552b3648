"""The offline faithfulness scorer on the planted-truth set: are hallucinations caught, do
correct answers pass?

Run: .venv/bin/python benchmarks/planted.py [--metric faithfulness|context] [--data PATH]
     [--judge SPEC] [--json PATH]

``benchmarks/planted/planted.jsonl`` holds hand-written assistants' answers over retrieved
chunks of company documents, product manuals, HR and IT policies, clinic leaflets, travel and
insurance terms and API documentation (``benchmarks/planted/README.md``): correct answers
(label 1: in the assistant's own words, fusing chunks, answering part, stating a negative fact
as its complement, with a polite closing) and hallucinated ones (label 0: a fact added, a
number, date, name or condition changed, a confident answer the chunks do not give, a
contradiction of a chunk). Every row is scored through ``contextlens.evaluate`` as a user
would score it:

* ``faithfulness`` (the default): one test case a row, its chunks as the retrieved chunks
  (each its own chunk, as a retriever returns them) and the answer as its output;
* ``context``: one session a row, built as ``benchmarks/contrast.py`` builds it: the chunks,
  one a line, as its system context and one interaction whose assistant reply is the answer.

Printed: n; correct answers passing (score >= the metric's pass mark) as a share of all
correct answers and of the decided ones; hallucinations caught (score < pass mark) as a share
of all hallucinated answers and of the decided ones; the items not decided (not applicable,
e.g. "needs a judge" or "the answer abstains", and failed), counted apart with their reasons:
they are neither passed nor caught, never a 0; the AUROC of the decided items; the targets of
issue 30 (hallucinations caught >= 85%, correct answers passing >= 90%) with met / not met;
the same per ``meta.kind`` and ``meta.domain``; the ten worst misses. Offline by default
(``--judge`` takes any judge spec); no cache and no run store are used.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _workload import header, print_table
from contrast import (
    Figures,
    Row,
    Scored,
    _excerpt,
    cases_of,
    figures,
    num,
    options,
    pct,
    score_cases,
)

from contextlens import Dataset, ModelTestCase

DATA = Path(__file__).resolve().parent / "planted" / "planted.jsonl"

#: Issue 30's bars for a planted-truth set, as shares of all hallucinated / all correct
#: answers (an undecided item is neither caught nor passed).
MIN_CAUGHT = 0.85
MIN_PASSING = 0.90


@dataclass(frozen=True)
class Planted:
    """One row: ``row`` as ``contrast.py`` reads it (``source`` holds ``meta.domain``) and the
    retrieved chunks one by one."""

    row: Row
    chunks: tuple[str, ...]


@dataclass
class Outcome:
    """What the pass mark makes of one group of items of one label."""

    n: int
    decided: int
    undecided: int
    hits: int  # label 1: passed; label 0: caught
    share_of_all: float | None
    share_of_decided: float | None


def read_rows(path: Path) -> list[Planted]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        meta = raw.get("meta") or {}
        chunks = tuple(str(c) for c in raw.get("contexts") or [])
        rows.append(
            Planted(
                Row(
                    id=str(raw["id"]),
                    question=raw.get("question") or "",
                    passage="\n".join(chunks),
                    answer=raw["answer"],
                    label=int(raw["label"]),
                    kind=str(meta.get("kind", "-")),
                    source=str(meta.get("domain", "-")),
                ),
                chunks,
            )
        )
    return rows


def planted_cases(rows: list[Planted], metric: str) -> list[ModelTestCase] | list[Dataset]:
    """Test cases with the chunks kept apart, or contrast.py's sessions for ``context``."""
    if metric == "context":
        return cases_of([p.row for p in rows], metric)
    return [
        ModelTestCase(
            name=p.row.id,
            input=p.row.question,
            actual_output=p.row.answer,
            retrieval_context=list(p.chunks),
        )
        for p in rows
    ]


def outcome(items: list[Scored], threshold: float, label: int) -> Outcome:
    """Label 1: the items passing the pass mark; label 0: the items caught below it."""
    group = [s for s in items if s.row.label == label]
    decided = [s for s in group if s.decided]
    hits = sum((s.value >= threshold) == (label == 1) for s in decided)
    return Outcome(
        n=len(group),
        decided=len(decided),
        undecided=len(group) - len(decided),
        hits=hits,
        share_of_all=hits / len(group) if group else None,
        share_of_decided=hits / len(decided) if decided else None,
    )


def breakdown(items: list[Scored], threshold: float, key: str) -> list[list[Any]]:
    """One line a kind (correct kinds first) or a domain."""

    def of(s: Scored) -> str:
        return s.row.kind if key == "kind" else s.row.source

    names = sorted({of(s) for s in items})
    if key == "kind":
        names.sort(key=lambda k: -max(s.row.label for s in items if of(s) == k))
    lines = []
    for name in names:
        group = [s for s in items if of(s) == name]
        f = figures(group, threshold)
        passing = outcome(group, threshold, 1)
        caught = outcome(group, threshold, 0)
        lines.append(
            [
                name,
                f.n,
                f.decided,
                f.not_applicable + f.failed,
                num(f.mean_score),
                _share(passing),
                _share(caught),
                num(f.auroc),
            ]
        )
    return lines


def _share(o: Outcome) -> str:
    return "-" if not o.n else f"{o.hits}/{o.n} {pct(o.share_of_all)}"


def main(argv: list[str] | None = None) -> int:
    args = options(__doc__.split("\n")[0], DATA, "planted-truth set").parse_args(argv)

    rows = read_rows(args.data)
    header(f"Planted-truth set: {args.metric} on {args.data.name} ({len(rows)} items)")
    scoring = score_cases(
        [p.row for p in rows], planted_cases(rows, args.metric), args.metric, args.judge
    )
    items, threshold, judge, models = (
        scoring.items,
        scoring.threshold,
        scoring.judge,
        scoring.models,
    )
    overall: Figures = figures(items, threshold, interval=True)
    passing = outcome(items, threshold, 1)
    caught = outcome(items, threshold, 0)

    read_by = ", ".join(f"{k} ({v} items)" for k, v in models.items()) or "-"
    print(f"metric {args.metric}, judge {judge}, pass mark {threshold:g}, offline model {read_by}")
    print_table(
        [
            "n",
            "correct",
            "hallucinated",
            "decided",
            "not applicable",
            "failed",
            "undecided",
            "AUROC (decided) [95%]",
            "mean 1",
            "mean 0",
        ],
        [
            [
                overall.n,
                passing.n,
                caught.n,
                overall.decided,
                overall.not_applicable,
                overall.failed,
                pct(overall.undecided_share),
                f"{num(overall.auroc)} [{num(overall.auroc_low)}, {num(overall.auroc_high)}]",
                num(overall.mean_score_faithful),
                num(overall.mean_score_contradicted),
            ]
        ],
    )
    print(f"At the pass mark (score >= {threshold:g} passes; undecided: neither):")
    print_table(
        ["", "n", "decided", "undecided", "hits", "share of all", "share of decided"],
        [
            [
                f"correct answers passing (label 1, score >= {threshold:g})",
                passing.n,
                passing.decided,
                passing.undecided,
                passing.hits,
                pct(passing.share_of_all),
                pct(passing.share_of_decided),
            ],
            [
                f"hallucinations caught (label 0, score < {threshold:g})",
                caught.n,
                caught.decided,
                caught.undecided,
                caught.hits,
                pct(caught.share_of_all),
                pct(caught.share_of_decided),
            ],
        ],
    )
    if overall.reasons:
        print("Undecided items, by reason (counted apart, never as a score):")
        print_table(["reason", "items"], [[k, v] for k, v in overall.reasons.items()])

    targets = [
        ("hallucinations caught (of all hallucinated)", caught.share_of_all, MIN_CAUGHT),
        ("correct answers passing (of all correct)", passing.share_of_all, MIN_PASSING),
    ]
    met = {name: value is not None and value >= bar for name, value, bar in targets}
    print("Targets (issue 30):")
    print_table(
        ["target", "measured", "bar", "met"],
        [
            [name, pct(value), f">= {pct(bar)}", "met" if met[name] else "not met"]
            for name, value, bar in targets
        ],
    )

    headers = ["n", "decided", "undecided", "mean score", "passing", "caught", "AUROC"]
    print("By kind (correct kinds first, then hallucinated ones):")
    print_table(["kind", *headers], breakdown(items, threshold, "kind"))
    print("By domain:")
    print_table(["domain", *headers], breakdown(items, threshold, "domain"))

    misses = sorted(
        (s for s in items if s.decided and (s.value >= threshold) != (s.row.label == 1)),
        key=lambda s: -abs(s.value - s.row.label),
    )
    print(
        f"The 10 worst misses of {len(misses)} (correct answers failing, hallucinations "
        "passing; farthest from their label first):"
    )
    print_table(
        ["id", "kind", "label", "score", "answer"],
        [
            [s.row.id, s.row.kind, s.row.label, num(s.score), _excerpt(s.row.answer)]
            for s in misses[:10]
        ],
    )

    if args.json is not None:
        payload = {
            "metric": args.metric,
            "judge": judge,
            "offline_models": models,
            "data": str(args.data),
            "pass_mark": threshold,
            "overall": asdict(overall),
            "correct_passing": asdict(passing),
            "hallucinations_caught": asdict(caught),
            "targets": {
                name: {"measured": value, "bar": f">= {bar}", "met": met[name]}
                for name, value, bar in targets
            },
            "by_kind": {
                k: asdict(figures([s for s in items if s.row.kind == k], threshold))
                for k in sorted({s.row.kind for s in items})
            },
            "by_domain": {
                d: asdict(figures([s for s in items if s.row.source == d], threshold))
                for d in sorted({s.row.source for s in items})
            },
            "misses": [s.row.id for s in misses],
            "items": [
                {
                    "id": s.row.id,
                    "kind": s.row.kind,
                    "domain": s.row.source,
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


if __name__ == "__main__":
    sys.exit(main())
