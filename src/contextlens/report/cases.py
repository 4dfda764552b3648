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
import heapq
import json
import math
from array import array
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contextlens.cases import CaseRecord
from contextlens.metrics.retrieval import grades_of
from contextlens.report.evidence import clip, evidence_of, readable
from contextlens.report.format import finite, get, iter_results
from contextlens.report.page import script_json
from contextlens.report.spool import Spool
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
from contextlens.tools import labelled_calls

__all__ = [
    "BELOW",
    "EXCERPT",
    "FAILED",
    "MAX_SLICE_VALUES",
    "META_TEXT",
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
#: Characters of a ``meta`` value the page shows, filters and slices by.
META_TEXT = 300
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
    """What the case explorer is made of besides its rows and drill-downs (written to a
    :class:`~contextlens.report.spool.Spool` as they are made: ``n_rows`` of them):
    ``slices`` per ``meta`` field, and per metric its ``worst`` cases, its ``lowest``-scoring
    items and the count of each status (``counts``)."""

    metrics: list[str]
    n_rows: int = 0
    meta_fields: dict[str, list[str]] = field(default_factory=dict)
    slices: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pass_marks: dict[str, float | None] = field(default_factory=dict)
    worst: dict[str, list[Worst]] = field(default_factory=dict)
    lowest: dict[str, list[Worst]] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    spool: Spool | None = field(default=None, repr=False)

    def rows(self) -> list[list[Any]]:
        """The rows as the page reads them, read back from the spool while it is open: per
        case its id, scores, statuses, meta, input and answer."""
        if self.spool is None:
            return []
        return list(json.loads("[" + "".join(self.spool.read(self.spool.rows)) + "]"))

    def details(self) -> list[dict[str, Any]]:
        """Each row's drill-down as the page reads it, read back from the spool."""
        if self.spool is None:
            return []
        text = "".join(self.spool.read(self.spool.details))
        return [
            json.loads(line[line.index(">") + 1 : line.rindex("<")]) for line in text.splitlines()
        ]

    def head_json(self) -> dict[str, Any]:
        """The row block's fields besides its ``rows``."""
        return {
            "metrics": self.metrics,
            "pass_marks": self.pass_marks,
            "meta_fields": self.meta_fields,
            "slices": self.slices,
        }


def _meta_text(value: Any) -> str:
    """A ``meta`` value as the page shows, filters and slices it: a text as it is, a number
    as JSON writes it, a list or a mapping readably (never as JSON); cut at
    :data:`META_TEXT` characters."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, (Mapping, list, tuple)):
        text = readable(dict(sorted(value.items())) if isinstance(value, Mapping) else value)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= META_TEXT else text[: META_TEXT - 1] + "…"


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


class _Ranking:
    """A metric's worst items as they come, in bounded memory: its first failures and its
    :data:`LOWEST` lowest scores (ties by row)."""

    def __init__(self) -> None:
        self.failed: list[Worst] = []
        self._scored: list[tuple[float, int, Worst]] = []  # a max-heap by (score, row)

    def add(self, worst: Worst, row: int) -> None:
        if worst.status == FAILED:
            if len(self.failed) < WORST:
                self.failed.append(worst)
            return
        entry = (-(worst.score or 0.0), -row, worst)
        if len(self._scored) < LOWEST:
            heapq.heappush(self._scored, entry)
        elif entry > self._scored[0]:
            heapq.heapreplace(self._scored, entry)

    def lowest(self) -> list[Worst]:
        return [w for _, _, w in sorted(self._scored, key=lambda e: (-e[0], -e[1]))]

    def worst(self) -> list[Worst]:
        scored = self.lowest()
        shown_failed = self.failed[: max(WORST_FAILED, WORST - len(scored))]
        return shown_failed + scored[: WORST - len(shown_failed)]


class _Columns:
    """Per row, each metric's score and status and each ``meta`` field's value, as arrays
    (a field with more than :data:`MAX_SLICE_VALUES` values is no longer kept)."""

    def __init__(self, n_metrics: int) -> None:
        self.scores = [array("d") for _ in range(n_metrics)]
        self.statuses = [array("b") for _ in range(n_metrics)]
        self.values: dict[str, dict[str, int]] = {}
        self.codes: dict[str, array[int] | None] = {}
        self.n = 0

    def add(
        self, scores: Sequence[float | None], statuses: Sequence[str | None], meta: dict[str, str]
    ) -> None:
        for at, (score, status) in enumerate(zip(scores, statuses, strict=True)):
            self.scores[at].append(math.nan if score is None else score)
            self.statuses[at].append(-1 if status is None else _STATUS_CODE[status])
        for key, value in meta.items():
            if key not in self.codes:
                self.values[key] = {}
                self.codes[key] = array("i", [-1]) * self.n
            codes, values = self.codes[key], self.values[key]
            if codes is None:
                continue
            code = values.setdefault(value, len(values))
            if len(values) > MAX_SLICE_VALUES:
                self.codes[key] = None
                continue
            codes.append(code)
        self.n += 1
        for codes in self.codes.values():
            if codes is not None and len(codes) < self.n:
                codes.append(-1)


_STATUS_CODE = {status: code for code, status in enumerate(STATUSES)}


def case_table(
    run: Any,
    metrics: Sequence[str],
    spool: Spool | None = None,
    ci_level: float = 0.95,
    collect: Callable[[ItemResult], None] | None = None,
) -> CaseTable:
    """The case explorer of ``run``: its items grouped by case (kept in ``spool``, one in
    memory when None; each item also handed to ``collect``), joined to its cases; each
    case's row and drill-down are written to the spool as they are made. Each metric's pass
    mark is the ``threshold`` of its summary."""
    summaries = get(run, "summaries") or {}
    spool = Spool() if spool is None else spool
    table = CaseTable(
        metrics=list(metrics),
        pass_marks={m: finite(get(summaries.get(m), "threshold")) for m in metrics},
        spool=spool,
    )
    index = {m: i for i, m in enumerate(table.metrics)}
    for item in iter_results(run):
        if not isinstance(item, ItemResult):
            item = ItemResult.model_validate(item)
        if item.metric not in index:
            index[item.metric] = len(table.metrics)
            table.metrics.append(item.metric)
        spool.add(item)
        if collect is not None:
            collect(item)
    spool.ready()
    ranked = {m: _Ranking() for m in table.metrics}
    counts: dict[str, dict[str, int]] = {m: dict.fromkeys(STATUSES, 0) for m in table.metrics}
    columns = _Columns(len(table.metrics))

    def add(case_id: str, record: CaseRecord | None, by_metric: Mapping[str, ItemResult]) -> None:
        meta = {k: _meta_text(v) for k, v in (record.meta if record else {}).items()}
        shown_input, answer = _input_answer(record)
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
                ranked[metric].add(worst, table.n_rows)
        row = [case_id, scores, statuses, meta, shown_input, answer]
        spool.rows.write(("," if table.n_rows else "") + script_json(row))
        detail = script_json(_detail(case_id, record, by_metric, statuses, index))
        spool.details.write(
            f'<script type="application/json" id="cl-case-{table.n_rows}">{detail}</script>\n'
        )
        columns.add(scores, statuses, meta)
        table.n_rows += 1

    cases = getattr(run, "iter_cases", None)
    for record in cases() if cases is not None else ():
        by_metric = spool.take(record.case_id)
        if by_metric:
            add(record.case_id, record, by_metric)
    for case_id in spool.left():
        add(case_id, None, spool.take(case_id))
    for metric, ranking in ranked.items():
        table.worst[metric] = ranking.worst()
        table.lowest[metric] = ranking.lowest()
    table.counts = counts
    mode = run_mode(run, ci_level)
    for key, codes in sorted(columns.codes.items()):
        if codes is None:
            table.meta_fields[key] = []
            continue
        values = columns.values[key]
        table.meta_fields[key] = sorted(values)
        table.slices[key] = _slices(table, columns, key, np.asarray(codes), values, mode)
    table.meta_fields = dict(sorted(table.meta_fields.items(), key=lambda kv: not kv[1]))
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
            "triage": None
            if item.triage is None
            else f"{item.triage.decided_by} ({item.triage.why})",
            "raw_reply": clip(get(item.details, "raw_reply")),
            "spread": finite(item.spread),
            **evidence_of(item.details, record.case if record is not None else None).to_json(),
        }
        for metric, item in by_metric.items()
    ]
    return out


def _tools(holder: Any) -> list[dict[str, Any]]:
    """The tool calls of a case or a turn as the page shows them: the label the claims name
    them by, the input as text, the output clipped."""
    return [
        {
            "label": label,
            "input": _meta_text(call.input) if call.input else None,
            "output": clip(call.output),
        }
        for label, call in labelled_calls(holder)
    ]


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
                    "chunks": None
                    if b.retrieval_context is None
                    else [clip(c) for c in b.retrieval_context],
                    "weight": b.weight,
                    "tools": _tools(b) or None,
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
    tools = _tools(case)
    if tools:
        out["tools"] = tools
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
    table: CaseTable,
    columns: _Columns,
    key: str,
    codes: np.ndarray,
    values: Mapping[str, int],
    mode: StatisticalMode,
) -> list[dict[str, Any]]:
    """Per value of ``meta[key]``: per metric, the scored items' n, mean and interval, and
    the share of them at or above the pass mark with its interval, as the run's summaries
    compute them (the same mode, the same draws and level)."""
    out = []
    scores = [np.asarray(c, dtype=float) for c in columns.scores]
    statuses = [np.asarray(c, dtype=np.int8) for c in columns.statuses]
    failed, passed, below = (_STATUS_CODE[s] for s in (FAILED, PASS, BELOW))
    for value in sorted(values):
        rows = codes == values[value]
        per_metric = []
        for at, metric in enumerate(table.metrics):
            mine, status = scores[at][rows], statuses[at][rows]
            scored = mine[~np.isnan(mine)]
            name = f"{key}={value}/{metric}"
            mean, low, high, note = _interval(mode, scored, name)
            judged = status[(status == passed) | (status == below)]
            outcomes = judged == passed
            rate, rate_low, rate_high, rate_note = _rate(mode, outcomes, name)
            per_metric.append(
                {
                    "n": int(scored.size),
                    "failed": int((status == failed).sum()),
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
        out.append({"value": value, "cases": int(rows.sum()), "metrics": per_metric})
    return out
