"""Triage bands for the claim metrics, chosen and measured leave one source out.

    benchmarks/triage.py [--data DIR] [--per-source 400] [--judge-agreement 0.9] [--write]

With ``--triage`` the calibrated offline scorer decides an item whose score is outside its
metric's band (below ``lower``: fails, above ``upper``: passes, at the pass mark 0.5) and
the judge the rest. Here the human labels stand in for the judge: a judged item is taken
to agree with the label, so the agreement of a triage run with a judge-only run is the
share of items the judge decides plus the offline-decided items that agree with their
label, and the "agreement lost" is what the offline decisions miss.

The scores are the faithfulness metric's own offline scores (``evaluate`` with
``FaithfulnessMetric()``, the bundled support model, no judge) of a seeded sample of each
answer-adherence source of ``_support_sources.py`` (up to ``--per-source`` items each;
context recall runs the same scorer on the reference answer). An item the offline scorer
does not score (an answer that abstains, "needs a judge") always goes to the judge. The
bundled support model was fitted on these sources (three coefficients): the bands are held
out, the scorer is not.

A band is chosen on the natural fitting sources only (each weighing the same): ``lower``
the largest cut (0 to 0.5, step 0.01) below which the offline "fails" agree with the
labels at least ``--judge-agreement`` of the time, ``upper`` the smallest (0.5 to 1) above
which the offline "passes" do (none: nothing is decided on that side). ``--judge-agreement``
is the agreement with people expected of the judge; it is a setting of this script, not a
figure measured here (no judge runs offline). Printed: per held-out source, the band chosen
without it, the share decided offline (judge calls saved), the agreement of the
offline-decided items with the labels, and the overall agreement of triage with judge-only
(and the agreement lost). ``--write`` stores the band chosen on every natural source in
``src/contextlens/offline/weights/triage.json`` (the default of ``--triage``), with the
table in its ``meta``.

Scores are kept in ``benchmarks/.triage/`` (a rerun only re-reads them); embeddings go
through the engine cache there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _support_sources import DATA, SPECS, SourceSpec, read_rows

from contextlens import evaluate
from contextlens.metrics.faithfulness import FaithfulnessMetric
from contextlens.offline.routes import DEFAULT_SUPPORT_MODEL

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks/.triage"
WEIGHTS = ROOT / "src/contextlens/offline/weights/triage.json"
PASS = 0.5
SEED = 0
GRID_LOW = np.round(np.arange(0.0, PASS + 1e-9, 0.01), 2)
GRID_HIGH = np.round(np.arange(PASS, 1.0 + 1e-9, 0.01), 2)


@dataclass
class Source:
    """One source's sampled items: offline scores (NaN: not scored offline) and labels."""

    name: str
    natural: bool
    scores: np.ndarray
    labels: np.ndarray


def _cases(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": str(r.get("id", i)),
            "input": r.get("question") or "",
            "actual_output": r["answer"],
            "retrieval_context": r.get("contexts") or [],
        }
        for i, r in enumerate(rows)
    ]


def offline_scores(spec: SourceSpec, data: Path, per_source: int) -> Source:
    """The faithfulness metric's offline scores of a seeded sample of ``spec``'s rows
    (kept in :data:`WORK` and read back on a rerun)."""
    kept = WORK / f"{spec.name.replace(':', '_')}-{per_source}.json"
    if kept.exists():
        saved = json.loads(kept.read_text())
        scores = np.array([np.nan if s is None else s for s in saved["scores"]], dtype=float)
        return Source(spec.name, spec.natural, scores, np.array(saved["labels"], dtype=float))
    rows = read_rows(data, spec)
    if len(rows) > per_source:
        rows = random.Random(f"{SEED}:{spec.name}").sample(rows, per_source)
    rows = [{**r, "id": f"{k}"} for k, r in enumerate(rows)]
    t0 = time.perf_counter()
    run = evaluate(_cases(rows), [FaithfulnessMetric()], cache=WORK / "cache", progress=False)
    by_id = {item.case_id: item.score for item in run.results}
    scores = [by_id.get(str(k)) for k in range(len(rows))]
    labels = [int(r["label"]) for r in rows]
    WORK.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps({"scores": scores, "labels": labels}))
    print(f"{spec.name}: {len(rows)} items scored in {time.perf_counter() - t0:.0f} s", flush=True)
    arr = np.array([np.nan if s is None else s for s in scores], dtype=float)
    return Source(spec.name, spec.natural, arr, np.array(labels, dtype=float))


def _side_agreement(sources: list[Source], cut: float, low: bool) -> tuple[float, float]:
    """Over ``sources`` (each weighing the same): the agreement with the labels of the
    items the offline scorer decides on one side of ``cut``, and the share decided."""
    agree, share, weight = 0.0, 0.0, 0.0
    for s in sources:
        ok = ~np.isnan(s.scores)
        decided = ok & ((s.scores < cut) if low else (s.scores > cut))
        if not len(s.scores):
            continue
        weight += 1.0
        share += decided.sum() / len(s.scores)
        if decided.any():
            right = s.labels[decided] == (0.0 if low else 1.0)
            agree += right.mean() * decided.sum() / len(s.scores)
    return (agree / share if share else float("nan")), share / weight if weight else 0.0


def choose_band(sources: list[Source], target: float) -> tuple[float, float]:
    """The widest offline decisions on ``sources`` that agree with the labels at least
    ``target`` of the time on each side: (lower, upper)."""
    lower = 0.0
    for cut in GRID_LOW:
        agreement, share = _side_agreement(sources, float(cut), low=True)
        if share and agreement >= target:
            lower = float(cut)
    upper = 1.0
    for cut in GRID_HIGH[::-1]:
        agreement, share = _side_agreement(sources, float(cut), low=False)
        if share and agreement >= target:
            upper = float(cut)
    return lower, upper


def measured(s: Source, lower: float, upper: float) -> dict[str, Any]:
    """A band's figures on one source: share decided offline, their agreement with the
    labels, triage's agreement with judge-only (labels as the judge) and what is lost."""
    ok = ~np.isnan(s.scores)
    low = ok & (s.scores < lower)
    high = ok & (s.scores > upper)
    decided = low | high
    n = len(s.scores)
    right = (low & (s.labels == 0)) | (high & (s.labels == 1))
    offline_agree = float(right.sum() / decided.sum()) if decided.any() else None
    lost = float((decided & ~right).sum() / n)
    return {
        "n": n,
        "not_scored_offline": int((~ok).sum()),
        "decided_offline": int(decided.sum()),
        "share_offline": round(float(decided.sum() / n), 4),
        "offline_agreement": None if offline_agree is None else round(offline_agree, 4),
        "triage_agreement": round(1.0 - lost, 4),
        "agreement_lost": round(lost, 4),
    }


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--per-source", type=int, default=400)
    parser.add_argument("--judge-agreement", type=float, default=0.9)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    sources = [offline_scores(spec, args.data, args.per_source) for spec in SPECS]
    natural = [s for s in sources if s.natural]
    header = (
        "held-out source",
        "items",
        "band (fit without it)",
        "decided offline (calls saved)",
        "offline-decided agreement",
        "triage vs judge-only",
        "agreement lost",
    )
    lines = []
    table: dict[str, Any] = {}
    for s in sources:
        fitting = [o for o in natural if o is not s]
        lower, upper = choose_band(fitting, args.judge_agreement)
        m = measured(s, lower, upper)
        table[s.name] = {"band": [lower, upper], "natural": s.natural, **m}
        lines.append(
            (
                s.name + ("" if s.natural else " (made errors)"),
                f"{m['n']}",
                f"[{lower:.2f}, {upper:.2f}]",
                f"{m['decided_offline']} ({_pct(m['share_offline'])})",
                _pct(m["offline_agreement"]),
                _pct(m["triage_agreement"]),
                _pct(m["agreement_lost"]),
            )
        )
    lower, upper = choose_band(natural, args.judge_agreement)
    pooled = [measured(s, lower, upper) for s in natural]
    widths = [max(len(h), *(len(r[k]) for r in lines)) for k, h in enumerate(header)]
    print(
        f"faithfulness triage, support model {DEFAULT_SUPPORT_MODEL!r}, judge agreement "
        f"target {args.judge_agreement:.2f}, up to {args.per_source} items per source"
    )
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for row in lines:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    share = float(np.mean([p["share_offline"] for p in pooled]))
    lost = float(np.mean([p["agreement_lost"] for p in pooled]))
    print(
        f"\ndefault band (chosen on every natural source): [{lower:.2f}, {upper:.2f}]; on "
        f"them (in-sample, each weighing the same) it decides {_pct(share)} offline and "
        f"loses {_pct(lost)} agreement"
    )
    if args.write:
        WEIGHTS.write_text(
            json.dumps(
                {
                    "bands": {DEFAULT_SUPPORT_MODEL: {"lower": lower, "upper": upper}},
                    "meta": {
                        "what": "offline scores a triage run sends to the judge, per support "
                        "model (claim metrics: faithfulness, context recall)",
                        "command": "benchmarks/triage.py --write",
                        "fitted": dt.date.today().isoformat(),
                        "judge_agreement_target": args.judge_agreement,
                        "per_source": args.per_source,
                        "chosen_on": [s.name for s in natural],
                        "held_out": table,
                    },
                },
                indent=1,
            )
            + "\n"
        )
        print(f"written: {WEIGHTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
