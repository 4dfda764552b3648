"""Agreement of the offline scorer with human labels on every set in /work/shared/data/.

Run: .venv/bin/python benchmarks/agreement.py [--limit N] [--sets begin_dev,summedits]
     [--full] [--cache] [--data DIR] [--json FILE]

One row per set: set, metric, n (scored / rows used; "sub" when subsampled), AUROC with its
95 % stratified-bootstrap interval, balanced accuracy at 0.5, the best-threshold balanced
accuracy (optimistic: the threshold is chosen on the same items), ECE, Spearman where labels
are graded, and the wall time.

* begin_dev, halueval_qa: ``context`` (one-interaction session per item).
* summedits: ``context`` by ``meta.domain``; the AUROC cell is the *balanced* AUROC (mean of
  the per-domain AUROCs), the pooled AUROC is printed under the table with the per-domain ones.
* trec_dl19_passage: ``contextual-relevancy``, each passage one retrieval chunk.
* trec_dl19_passage_ranked: ``contextual-relevancy`` over the 10 passages of a list, scored
  against the human average precision by Spearman (AUROC: AP >= the median AP). Offline
  ``context-precision`` compares an answer with a reference, and this set has neither
  (both are empty), so it does not apply here.

The embedder does ~100-280 sentences/s on 2 cores and long documents are many sentences,
so by default each set is subsampled to keep it under ~2 minutes: a seeded (seed 0) sample
stratified by label (and by domain for summedits), kept in file order. ``--full`` uses every
item; ``--limit N`` sets one cap for every set. The cache is off unless ``--cache``, so the
times are honest.

Under the table, for the offline faithfulness scorer (``context`` sets):

* the held-out figures of the shipped support model, as recorded in its weights file by
  ``benchmarks/select_support.py`` (each source scored by a model fitted on the others,
  beside the three-feature baseline). The table above scores the shipped model, which *was*
  fitted on every set, so its rows are in-sample; use the held-out lines for claims.
* a throughput line (``--throughput N`` items of the first context set, 0 to skip): seconds
  of the embedder alone for the distinct sentences of those items (memo cleared), seconds of
  the whole scorer from a cold memo, and items/s with every embedding already in memory
  (text features computed afresh, and with the texts seen before; median and range of 7
  runs, as one run takes well under a second).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _workload import header

from contextlens.calibration import CalibrationReport, calibrate, read_labelled


@dataclass(frozen=True)
class SetSpec:
    name: str
    metric: str
    default_limit: int
    by: str | None = None


SETS: dict[str, SetSpec] = {
    s.name: s
    for s in (
        SetSpec("begin_dev", "context", 500),
        SetSpec("summedits", "context", 160, by="meta.domain"),
        SetSpec("halueval_qa", "context", 1200),
        SetSpec("trec_dl19_passage", "contextual-relevancy", 1000),
        SetSpec("trec_dl19_passage_ranked", "contextual-relevancy", 80),
    )
}


def _stratum(row: dict[str, Any], by: str | None, cut: float | None) -> tuple[Any, ...]:
    label = row["label"] >= cut if cut is not None else row["label"]
    domain = (row.get("meta") or {}).get(by.split(".", 1)[1]) if by else None
    return (label, domain)


def subsample(
    rows: list[dict[str, Any]], limit: int, by: str | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    """A seeded sample of ``limit`` rows, stratified by label (and ``by``), in file order."""
    if limit >= len(rows):
        return rows
    labels = np.array([r["label"] for r in rows], dtype=float)
    graded = not np.all((labels == 0) | (labels == 1))
    cut = float(np.median(labels)) if graded else None
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(_stratum(row, by, cut), []).append(i)
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for key in sorted(groups, key=repr):
        members = groups[key]
        k = max(1, round(limit * len(members) / len(rows)))
        chosen.extend(rng.choice(members, size=min(k, len(members)), replace=False).tolist())
    return [rows[i] for i in sorted(chosen)]


def load_set(spec: SetSpec, data_dir: Path) -> list[dict[str, Any]]:
    """Every row of a set, read and validated as ``contextlens calibrate`` reads it."""
    return [row.fields for row in read_labelled(data_dir / f"{spec.name}.jsonl")]


def run_set(
    spec: SetSpec, data_dir: Path, limit: int | None, cache: bool
) -> tuple[CalibrationReport, int, int, float]:
    """Calibrate one set; (report, rows in the file, rows used, seconds)."""
    rows = load_set(spec, data_dir)
    used = subsample(rows, limit, spec.by) if limit is not None else rows
    t0 = time.perf_counter()
    report = calibrate(
        used,
        spec.metric,
        by=spec.by,
        cache=cache,
        progress=False,
        note=f"{spec.name}: {len(used)} of {len(rows)} items",
    )
    return report, len(rows), len(used), time.perf_counter() - t0


def held_out_lines() -> list[str]:
    """The shipped support model's held-out figures, from its weights file."""
    from contextlens.offline.model import load_model

    meta = load_model("support").meta
    out = [
        f"offline support model ({meta.get('fitted', '?')}, {meta.get('command', '?')}); "
        "held-out figures, each source scored by a model fitted on the others:"
    ]
    for name, r in meta.get("held_out", {}).items():
        out.append(
            f"  {name}: AUROC {_f(r.get('auroc'))} (baseline {_f(r.get('baseline_auroc'))}), "
            f"ECE {_f(r.get('ece'))} (baseline {_f(r.get('baseline_ece'))})"
        )
    return out


def throughput(rows: list[dict[str, Any]], repeats: int = 7) -> str:
    """Embedder-only vs end-to-end seconds (cold memo), and items/s with a warm memo."""
    from select_support import item  # the item the Context metric builds for a labelled row

    from contextlens.embeddings.minilm import MiniLMEmbedder
    from contextlens.offline.support import clear_caches, score_support, support_texts

    items = [item(r) for r in rows]
    distinct = support_texts(items)
    embedder = MiniLMEmbedder()
    embedder.embed_sync(["warm-up: load the model and the tokenizer"])
    embedder.clear_memo()
    t0 = time.perf_counter()
    embedder.embed_sync(distinct)
    embed_s = time.perf_counter() - t0
    embedder.clear_memo()
    clear_caches()
    t0 = time.perf_counter()
    asyncio.run(score_support(items, embedder))
    total_s = time.perf_counter() - t0
    fresh, seen = [], []
    for _ in range(repeats):
        clear_caches()
        t0 = time.perf_counter()
        asyncio.run(score_support(items, embedder))
        fresh.append(len(items) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        asyncio.run(score_support(items, embedder))
        seen.append(len(items) / (time.perf_counter() - t0))
    return (
        f"throughput ({len(items)} items, {len(distinct)} distinct sentences): embedder "
        f"alone {embed_s:.1f} s, scorer end to end {total_s:.1f} s "
        f"({total_s / embed_s:.2f}x); embeddings in memory, median [range] of {repeats} runs: "
        f"{_rate(fresh)} items/s (text features computed afresh), {_rate(seen)} items/s "
        "(texts seen before)"
    )


def _rate(rates: list[float]) -> str:
    return f"{np.median(rates):,.0f} [{min(rates):,.0f}-{max(rates):,.0f}]"


def pooled_ece(reports: list[CalibrationReport]) -> float:
    """The expected calibration error of several reports' items together (same bins)."""
    bins: dict[float, list[float]] = {}
    for report in reports:
        for b in report.reliability:
            count, predicted, observed = bins.setdefault(b.low, [0.0, 0.0, 0.0])
            bins[b.low] = [
                count + b.count,
                predicted + b.count * b.mean_predicted,
                observed + b.count * b.observed_rate,
            ]
    total = sum(count for count, _, _ in bins.values())
    return sum(abs(p - o) for _, p, o in bins.values()) / total if total else float("nan")


def relevance_held_out_line() -> str:
    """The shipped relevance model's cross-validated figures, from its weights file."""
    from contextlens.offline.model import load_model

    meta = load_model("relevance").meta
    cv = meta.get("grouped_cv", {})
    return (
        f"offline relevance model ({meta.get('fitted', '?')}), fitted on {meta.get('data', '?')}"
        f"; {cv.get('folds', '?')}-fold cross-validation on TREC DL 2020 grouped by query "
        f"(each query scored by a model fitted without it): pooled AUROC "
        f"{_f(cv.get('auroc_pooled'))} (within a query {_f(cv.get('within_query_auroc'))})"
    )


def _f(value: float | None) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated set names")
    parser.add_argument("--limit", type=int, default=None, help="items per set (all sets)")
    parser.add_argument("--full", action="store_true", help="every item of every set")
    parser.add_argument("--cache", action="store_true", help="use the embedding cache")
    parser.add_argument("--json", type=Path, default=None, help="also write the reports here")
    parser.add_argument(
        "--throughput", type=int, default=300, help="items for the throughput line (0: skip)"
    )
    args = parser.parse_args()
    header("agreement of the offline scorers with the labels in " + str(args.data))
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [n for n in names if n not in SETS]
    if unknown:
        parser.error(f"unknown set(s) {unknown}; choose from {', '.join(SETS)}")

    columns = (
        "set",
        "metric",
        "n",
        "AUROC [95% interval]",
        "bal.acc@0.5",
        "best bal.acc (optimistic)",
        "ECE",
        "Spearman",
        "time",
    )
    lines: list[tuple[str, ...]] = []
    notes: list[str] = []
    dump: dict[str, Any] = {}
    reports: dict[str, CalibrationReport] = {}
    for name in names:
        spec = SETS[name]
        limit = None if args.full else (args.limit or spec.default_limit)
        report, total, used, seconds = run_set(spec, args.data, limit, args.cache)
        dump[name] = report.model_dump()
        reports[name] = report
        n = f"{report.n}/{total}" + (" sub" if used < total else "")
        if report.n_failed:
            n += f" ({report.n_failed} failed)"
        if spec.by:
            auc = f"{_f(report.slice_mean_auroc)} balanced over {len(report.slices)} domains"
            per = ", ".join(f"{s.value} {_f(s.auroc)} (n={s.n})" for s in report.slices)
            notes.append(
                f"{name}: pooled AUROC {_f(report.auroc)} [{_f(report.auroc_low)}, "
                f"{_f(report.auroc_high)}]; per domain: {per}"
            )
        else:
            auc = f"{_f(report.auroc)} [{_f(report.auroc_low)}, {_f(report.auroc_high)}]"
        lines.append(
            (
                name,
                spec.metric,
                n,
                auc,
                _f(report.balanced_accuracy),
                f"{_f(report.best_balanced_accuracy)} @ {_f(report.best_threshold)}",
                _f(report.ece),
                _f(report.spearman),
                f"{seconds:.0f} s",
            )
        )
        print(f"done {name}: {seconds:.0f} s", flush=True)

    widths = [max(len(r[i]) for r in [columns, *lines]) for i in range(len(columns))]
    print()
    print(" | ".join(h.ljust(w) for h, w in zip(columns, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in lines:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print()
    print("sub = seeded sample stratified by label (and domain), in file order; --full for all.")
    print("best bal.acc: threshold chosen on the same items (optimistic).")
    for note in notes:
        print(note)
    people = [reports[n] for n in ("begin_dev", "summedits") if n in reports]
    if len(people) == 2:
        print(
            "BEGIN and SummEdits (faithfulness judged by people) pooled: ECE "
            f"{_f(pooled_ece(people))} over {sum(r.n for r in people)} items"
        )
    context_sets = [n for n in names if SETS[n].metric == "context"]
    if context_sets:
        print()
        from contextlens.offline.model import load_model

        fitted = {n.split(":")[0] for n in load_model("support").meta.get("trained_on", [])}
        trained = sorted(fitted & set(context_sets))
        if trained:
            print(
                f"note: the shipped support model was fitted on {', '.join(trained)}: those rows "
                "above are in-sample; quote the held-out figures below."
            )
        for line in held_out_lines():
            print(line)
        if args.throughput > 0:
            spec = SETS[context_sets[0]]
            rows = subsample(load_set(spec, args.data), args.throughput, spec.by)
            print(throughput(rows), flush=True)
    if any(SETS[n].metric == "contextual-relevancy" for n in names):
        print()
        print(relevance_held_out_line())
    if args.json:
        args.json.write_text(json.dumps(dump, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
