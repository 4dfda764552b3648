"""The report's case explorer: one row per case (its scores, statuses and ``meta``), the
drill-down of each case (its fields, chunks, turns and each metric's evidence), and slice
tables (mean, interval, pass rate and n per value of a ``meta`` field).

Each item has one status: ``pass`` or ``below`` (its score against the pass mark the run
set), ``failed`` (not scored), ``not applicable`` (the metric does not apply to the case),
``not run`` (the run stopped before it), or ``scored`` (a score without a verdict).

Rows are one JSON block the page reads at load; each case's drill-down is a JSON block of its
own, read when the case is opened, so a page of 10,000 cases opens at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contextlens.cases import CaseRecord
from contextlens.report.evidence import clip, evidence_of
from contextlens.report.format import finite, get, iter_results
from contextlens.results import (
    BELOW,
    FAILED,
    NOT_APPLICABLE,
    NOT_RUN,
    PASS,
    SCORED,
    STATUSES,
    ItemResult,
    status_of,
)
from contextlens.schemas import Dataset
from contextlens.stats import BayesianMode

__all__ = [
    "BELOW",
    "FAILED",
    "MAX_SLICE_VALUES",
    "NOT_APPLICABLE",
    "NOT_RUN",
    "PASS",
    "SCORED",
    "STATUSES",
    "CaseTable",
    "case_table",
    "status_of",
]

#: A ``meta`` field gets a slice table when it has at most this many distinct values.
MAX_SLICE_VALUES = 50
#: Draws of each slice's interval.
SLICE_DRAWS = 2000


@dataclass
class CaseTable:
    """What the case explorer is made of: ``rows`` (one JSON block), ``details`` (one JSON
    text per row, in order) and ``slices`` per ``meta`` field."""

    metrics: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    meta_fields: dict[str, list[str]] = field(default_factory=dict)
    slices: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pass_marks: dict[str, float | None] = field(default_factory=dict)

    def rows_json(self) -> dict[str, Any]:
        return {
            "metrics": self.metrics,
            "pass_marks": self.pass_marks,
            "meta_fields": self.meta_fields,
            "rows": self.rows,
            "slices": self.slices,
        }


def _meta_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def case_table(
    run: Any,
    metrics: Sequence[str],
    ci_level: float = 0.95,
    items: Iterable[Any] | None = None,
) -> CaseTable:
    """The case explorer of ``run``: its items (``items``, else the run's) grouped by case,
    joined to its cases; each metric's pass mark is the ``threshold`` of its summary."""
    summaries = get(run, "summaries") or {}
    table = CaseTable(
        metrics=list(metrics),
        pass_marks={m: finite(get(summaries.get(m), "threshold")) for m in metrics},
    )
    index = {m: i for i, m in enumerate(table.metrics)}
    grouped: dict[str, dict[str, ItemResult]] = {}
    for item in iter_results(run) if items is None else items:
        if not isinstance(item, ItemResult):
            item = ItemResult.model_validate(item)
        if item.metric not in index:
            index[item.metric] = len(table.metrics)
            table.metrics.append(item.metric)
        grouped.setdefault(item.case_id, {}).setdefault(item.metric, item)
    cases = _records(run)
    order = [c for c in cases if c in grouped] + [c for c in grouped if c not in cases]
    meta_values: dict[str, dict[str, None]] = {}
    for case_id in order:
        record = cases.get(case_id)
        meta = {k: _meta_text(v) for k, v in (record.meta if record else {}).items()}
        for key, value in meta.items():
            meta_values.setdefault(key, {})[value] = None
        by_metric = grouped[case_id]
        scores: list[float | None] = [None] * len(table.metrics)
        statuses: list[str | None] = [None] * len(table.metrics)
        for metric, item in by_metric.items():
            at = index[metric]
            scores[at] = None if item.failed else finite(item.score)
            statuses[at] = status_of(item)
        table.rows.append([case_id, scores, statuses, meta])
        table.details.append(_detail(case_id, record, by_metric, statuses, index))
    table.meta_fields = {
        k: sorted(v) for k, v in sorted(meta_values.items()) if len(v) <= MAX_SLICE_VALUES
    }
    table.slices = {
        key: _slices(table, key, values, ci_level) for key, values in table.meta_fields.items()
    }
    table.meta_fields.update(
        {k: [] for k, v in sorted(meta_values.items()) if len(v) > MAX_SLICE_VALUES}
    )
    return table


def _records(run: Any) -> dict[str, CaseRecord]:
    cases = getattr(run, "iter_cases", None)
    if cases is None:
        return {}
    return {c.case_id: c for c in cases()}


def _detail(
    case_id: str,
    record: CaseRecord | None,
    by_metric: Mapping[str, ItemResult],
    statuses: Sequence[str | None],
    index: Mapping[str, int],
) -> dict[str, Any]:
    """One case's drill-down: its fields, then each metric's result and evidence."""
    out: dict[str, Any] = {"id": case_id}
    n_chunks = 0
    if record is not None:
        out.update(_fields(record))
        n_chunks = len(out.get("chunks") or [])
        out["meta"] = record.meta
    out["metrics"] = [
        {
            "metric": metric,
            "score": None if item.failed else finite(item.score),
            "status": statuses[index[metric]],
            "reason": clip(item.reason),
            "why_not": clip(item.not_applicable or item.not_run),
            "error": clip(item.error),
            "judge": item.judge,
            "raw_reply": clip(get(item.details, "raw_reply")),
            "spread": finite(item.spread),
            **evidence_of(item.details, n_chunks).to_json(),
        }
        for metric, item in by_metric.items()
    ]
    return out


def _fields(record: CaseRecord) -> dict[str, Any]:
    case = record.case
    if isinstance(case, Dataset):
        return {
            "kind": "session",
            "assistant_id": case.assistant_id,
            "system_context": clip(case.context),
            "turns": [
                {
                    "qa_id": b.qa_id,
                    "query": clip(b.query),
                    "assistant": clip(b.assistant),
                    "ground_truth": clip(b.ground_truth_assistant) or None,
                    "observation": clip(b.observation),
                    "weight": b.weight,
                    "meta": b.meta or None,
                }
                for b in case.conversation
            ],
        }
    return {
        "kind": "case",
        "input": clip(case.input),
        "output": clip(case.actual_output),
        "expected": clip(case.expected_output),
        "chunks": [clip(c) for c in case.retrieval_context or []],
        "reference": [clip(c) for c in case.context or []],
    }


def _slices(
    table: CaseTable, key: str, values: Iterable[str], ci_level: float
) -> list[dict[str, Any]]:
    """Per value of ``meta[key]``: per metric, the scored items' n, mean and interval, and
    the share of them at or above the pass mark with its interval."""
    mode = BayesianMode(mc_samples=SLICE_DRAWS, ci_level=ci_level, rng_seed=7)
    out = []
    for value in values:
        rows = [r for r in table.rows if r[3].get(key) == value]
        per_metric = []
        for at, metric in enumerate(table.metrics):
            scores = np.array([r[1][at] for r in rows if r[1][at] is not None], dtype=float)
            failed = sum(1 for r in rows if r[2][at] == FAILED)
            est = mode.estimate(scores, np.ones(scores.size), key=f"{key}={value}/{metric}")
            outcomes = np.array([r[2][at] == PASS for r in rows if r[2][at] in (PASS, BELOW)])
            rate = mode.estimate(
                outcomes.astype(float), np.ones(outcomes.size), key=f"{key}={value}/{metric}:pass"
            )
            per_metric.append(
                {
                    "n": int(scores.size),
                    "failed": failed,
                    "mean": est.value,
                    "low": est.ci_low if scores.size > 1 else None,
                    "high": est.ci_high if scores.size > 1 else None,
                    "pass": rate.value if outcomes.size else None,
                    "pass_low": rate.ci_low if outcomes.size > 1 else None,
                    "pass_high": rate.ci_high if outcomes.size > 1 else None,
                }
            )
        out.append({"value": value, "cases": len(rows), "metrics": per_metric})
    return out
