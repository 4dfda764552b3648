"""The report's case explorer: one row per case (its scores, statuses, ``meta`` and the
start of its input and answer), the drill-down of each case (its fields, chunks, ranked ids,
turns and each metric's evidence), each metric's worst cases, and slice tables (mean,
interval, pass rate and n per value of a ``meta`` field, with the intervals of the run's own
statistical mode).

Each item has one status: ``pass`` or ``below`` (its score against the pass mark the run
set), ``failed`` (not scored), ``not applicable`` (the metric does not apply to the case),
``not run`` (the run stopped before it), or ``scored`` (a score without a verdict).

Rows are one JSON block the page reads at load; each case's drill-down is a JSON block of its
own, read when the case is opened, so a page of 10,000 cases opens at once.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contextlens.cases import CaseRecord
from contextlens.metrics.retrieval import grades_of
from contextlens.report.evidence import clip, evidence_of, readable
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
from contextlens.stats import BayesianMode, FrequentistMode, StatisticalMode

__all__ = [
    "BELOW",
    "EXCERPT",
    "FAILED",
    "MAX_SLICE_VALUES",
    "NOT_APPLICABLE",
    "NOT_RUN",
    "PASS",
    "SCORED",
    "STATUSES",
    "WORST",
    "CaseTable",
    "Worst",
    "case_details",
    "case_table",
    "run_mode",
    "status_of",
]

#: A ``meta`` field gets a slice table when it has at most this many distinct values.
MAX_SLICE_VALUES = 50
#: Characters of a case's input and answer its row shows.
EXCERPT = 160
#: Cases each metric lists as its worst at the top of the report (failures take at most
#: :data:`WORST_FAILED` of them), and lowest-scoring items its section lists.
WORST, WORST_FAILED, LOWEST = 5, 2, 10
#: Scores no further apart than this are one value: an interval this narrow is no interval.
_NO_WIDTH = 1e-9
#: From this many alike scores on, a slice without spread says so rather than "n too small".
_MANY = 20


@dataclass(frozen=True)
class Worst:
    """One item of a metric's worst cases: its case, score, status and why."""

    case_id: str
    score: float | None
    status: str
    input: str
    answer: str
    reason: str


@dataclass
class CaseTable:
    """What the case explorer is made of: ``rows`` (one JSON block: id, scores, statuses,
    meta, input and answer), ``details`` (one JSON text per row, in order), ``slices`` per
    ``meta`` field, and per metric its ``worst`` cases, its ``lowest``-scoring items and the
    count of each status (``counts``)."""

    metrics: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    meta_fields: dict[str, list[str]] = field(default_factory=dict)
    slices: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pass_marks: dict[str, float | None] = field(default_factory=dict)
    worst: dict[str, list[Worst]] = field(default_factory=dict)
    lowest: dict[str, list[Worst]] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def rows_json(self) -> dict[str, Any]:
        return {
            "metrics": self.metrics,
            "pass_marks": self.pass_marks,
            "meta_fields": self.meta_fields,
            "rows": self.rows,
            "slices": self.slices,
        }


def _meta_text(value: Any) -> str:
    """A ``meta`` value as the page shows, filters and slices it: a text as it is, a number
    as JSON writes it, a list or a mapping readably (never as JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (Mapping, list, tuple)):
        return readable(dict(sorted(value.items())) if isinstance(value, Mapping) else value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _excerpt(text: Any, limit: int = EXCERPT) -> str:
    """The start of a text on one line."""
    if not isinstance(text, str):
        return ""
    line = " ".join(text[: limit * 4].split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _input_answer(record: CaseRecord | None) -> tuple[str, str]:
    """A case's input and answer as its row shows them: a session's first turn's."""
    if record is None:
        return "", ""
    case = record.case
    if isinstance(case, Dataset):
        if not case.conversation:
            return "", ""
        first = case.conversation[0]
        more = len(case.conversation) - 1
        suffix = f" (+{more} more {'turn' if more == 1 else 'turns'})" if more else ""
        return _excerpt(first.query) + suffix, _excerpt(first.assistant)
    return _excerpt(case.input), _excerpt(case.actual_output)


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
    ranked: dict[str, list[tuple[int, float, int, Worst]]] = {m: [] for m in table.metrics}
    counts: dict[str, dict[str, int]] = {m: dict.fromkeys(STATUSES, 0) for m in table.metrics}
    for case_id in order:
        record = cases.get(case_id)
        meta = {k: _meta_text(v) for k, v in (record.meta if record else {}).items()}
        for key, value in meta.items():
            meta_values.setdefault(key, {})[value] = None
        shown_input, answer = _input_answer(record)
        by_metric = grouped[case_id]
        scores: list[float | None] = [None] * len(table.metrics)
        statuses: list[str | None] = [None] * len(table.metrics)
        for metric, item in by_metric.items():
            at = index[metric]
            score = None if item.failed else finite(item.score)
            status = status_of(item)
            scores[at], statuses[at] = score, status
            counts[metric][status] += 1
            if status == FAILED or score is not None:
                why = item.error if status == FAILED else item.reason
                worst = Worst(case_id, score, status, shown_input, answer, _excerpt(why, 300))
                group = 0 if status == FAILED else 1
                ranked[metric].append(
                    (group, 0.0 if score is None else score, len(table.rows), worst)
                )
        table.rows.append([case_id, scores, statuses, meta, shown_input, answer])
        table.details.append(_detail(case_id, record, by_metric, statuses, index))
    for metric, entries in ranked.items():
        entries.sort(key=lambda e: e[:3])
        failed = [e[3] for e in entries if e[0] == 0]
        scored = [e[3] for e in entries if e[0] == 1]
        shown_failed = failed[: max(WORST_FAILED, WORST - len(scored))]
        table.worst[metric] = shown_failed + scored[: WORST - len(shown_failed)]
        table.lowest[metric] = scored[:LOWEST]
    table.counts = counts
    table.meta_fields = {
        k: sorted(v) for k, v in sorted(meta_values.items()) if len(v) <= MAX_SLICE_VALUES
    }
    mode = run_mode(run, ci_level)
    table.slices = {
        key: _slices(table, key, values, mode) for key, values in table.meta_fields.items()
    }
    table.meta_fields.update(
        {k: [] for k, v in sorted(meta_values.items()) if len(v) > MAX_SLICE_VALUES}
    )
    return table


def case_details(run: Any, case_ids: Collection[str]) -> dict[str, dict[str, Any]]:
    """The drill-down of each case of ``run`` named in ``case_ids``, as the run report opens
    it (its fields, then each metric's result and evidence); a case the run has no item of
    is left out."""
    wanted = set(case_ids)
    grouped: dict[str, dict[str, ItemResult]] = {}
    for item in iter_results(run):
        if not isinstance(item, ItemResult):
            item = ItemResult.model_validate(item)
        if item.case_id in wanted:
            grouped.setdefault(item.case_id, {}).setdefault(item.metric, item)
    cases = getattr(run, "iter_cases", None)
    records = {} if cases is None else {c.case_id: c for c in cases() if c.case_id in grouped}
    out = {}
    for case_id, by_metric in grouped.items():
        index = {m: i for i, m in enumerate(by_metric)}
        statuses = [status_of(item) for item in by_metric.values()]
        out[case_id] = _detail(case_id, records.get(case_id), by_metric, statuses, index)
    return out


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
    if record is not None:
        out.update(_fields(record))
        out["meta"] = {k: _meta_text(v) for k, v in record.meta.items()}
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
            **evidence_of(item.details, record.case if record is not None else None).to_json(),
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
                    "meta": {k: _meta_text(v) for k, v in b.meta.items()} if b.meta else None,
                }
                for b in case.conversation
            ],
        }
    out: dict[str, Any] = {
        "kind": "case",
        "input": clip(case.input),
        "output": clip(case.actual_output),
        "expected": clip(case.expected_output),
        "chunks": [clip(c) for c in case.retrieval_context or []],
        "reference": [clip(c) for c in case.context or []],
    }
    if case.retrieved_ids is not None:
        out["retrieved_ids"] = list(case.retrieved_ids)
    if case.relevant_ids is not None:
        out["relevant_ids"] = grades_of(case.relevant_ids)
    return out


_MODES: dict[str, type[BayesianMode] | type[FrequentistMode]] = {
    "BayesianMode": BayesianMode,
    "FrequentistMode": FrequentistMode,
}


def run_mode(run: Any, ci_level: float = 0.95) -> StatisticalMode:
    """The statistical mode the run's summaries were computed with, rebuilt from what the
    run recorded (``config.statistical_mode``: the mode's repr; none recorded is the
    engine's default, :class:`~contextlens.stats.BayesianMode`). A mode of one's own, which
    cannot be rebuilt from its repr, gives the default at the run's ``ci_level``."""
    recorded = get(get(run, "config"), "statistical_mode")
    if isinstance(recorded, str):
        try:
            call = ast.parse(recorded.strip(), mode="eval").body
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.args:
                kind = _MODES.get(call.func.id)
                if kind is not None:
                    return kind(
                        **{k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
                    )
        except (SyntaxError, ValueError, TypeError):  # not a repr of a built-in mode
            pass
    return BayesianMode(ci_level=ci_level)


def _interval(
    mode: StatisticalMode, values: np.ndarray, key: str
) -> tuple[float | None, float | None, float | None, str | None]:
    """A slice's mean, its interval and, when there is none to show, why: one item has no
    interval; scores without spread give the share's interval when they are 0 or 1, else
    ``n too small`` (a zero-width interval says nothing)."""
    n = int(values.size)
    if n == 0:
        return None, None, None, None
    est = mode.estimate(values, np.ones(n), key=key)
    if n == 1:
        return est.value, None, None, "n = 1"
    low, high = est.ci_low, est.ci_high
    if low is None or high is None:  # a mode without intervals: none, as in the summaries
        return est.value, None, None, None
    if high - low > _NO_WIDTH:
        return est.value, low, high, None
    rate = getattr(mode, "rate", None)
    binary = bool(np.all((values == 0.0) | (values == 1.0)))
    if binary and callable(rate):
        share = rate(int(values.sum()), n, key=key)
        if share.ci_low is not None and share.ci_high is not None:
            return est.value, share.ci_low, share.ci_high, None
    return est.value, None, None, "n too small" if n < _MANY else f"all {n} alike"


def _rate(
    mode: StatisticalMode, outcomes: np.ndarray, key: str
) -> tuple[float | None, float | None, float | None, str | None]:
    """A slice's pass rate with the interval the run's summaries give a pass rate (the
    mode's ``rate``: a Beta posterior for the Bayesian mode); one item has no interval."""
    n = int(outcomes.size)
    if n == 0:
        return None, None, None, None
    share = float(outcomes.mean())
    if n == 1:
        return share, None, None, "n = 1"
    rate = getattr(mode, "rate", None)
    if callable(rate):
        est = rate(int(outcomes.sum()), n, key=f"{key}:pass")
        if est.ci_low is None or est.ci_high is None:
            return share, None, None, None
        return share, est.ci_low, est.ci_high, None
    _, low, high, note = _interval(mode, outcomes.astype(float), f"{key}:pass")
    return share, low, high, note


def _slices(
    table: CaseTable, key: str, values: Iterable[str], mode: StatisticalMode
) -> list[dict[str, Any]]:
    """Per value of ``meta[key]``: per metric, the scored items' n, mean and interval, and
    the share of them at or above the pass mark with its interval, as the run's summaries
    compute them (the same mode, the same draws and level)."""
    out = []
    for value in values:
        rows = [r for r in table.rows if r[3].get(key) == value]
        per_metric = []
        for at, metric in enumerate(table.metrics):
            scores = np.array([r[1][at] for r in rows if r[1][at] is not None], dtype=float)
            failed = sum(1 for r in rows if r[2][at] == FAILED)
            name = f"{key}={value}/{metric}"
            mean, low, high, note = _interval(mode, scores, name)
            outcomes = np.array(
                [r[2][at] == PASS for r in rows if r[2][at] in (PASS, BELOW)], dtype=bool
            )
            rate, rate_low, rate_high, rate_note = _rate(mode, outcomes, name)
            per_metric.append(
                {
                    "n": int(scores.size),
                    "failed": failed,
                    "mean": mean,
                    "low": low,
                    "high": high,
                    "note": note,
                    "pass": rate,
                    "pass_low": rate_low,
                    "pass_high": rate_high,
                    "pass_n": int(outcomes.size),
                    "pass_note": rate_note,
                }
            )
        out.append({"value": value, "cases": len(rows), "metrics": per_metric})
    return out
