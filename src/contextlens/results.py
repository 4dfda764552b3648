"""What an evaluation returns: per-item results, per-metric summaries, the run."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
)

from contextlens.cases import CASES_FILE, CaseRecord, Lines
from contextlens.engine.accounting import Counts, LedgerReport
from contextlens.errors import InputError
from contextlens.fields import TEST_CASE_FIELDS
from contextlens.metrics.registry import details_type, match, registered
from contextlens.metrics.settings import MetricSettings
from contextlens.nesting import MAX_DEPTH, deep_message, text_too_deep
from contextlens.provenance import Provenance
from contextlens.runfiles import check_run_id, read_records, read_small
from contextlens.schemas import MetricDetails, MetricKey, ModelTestCase, TriageBand, TriageDecision

RESULTS_FILE = "results.jsonl"
"""The name, in a run's folder, of the file of its item results."""
SUMMARY_FILE = "summary.json"
"""The name, in a run's folder, of its summaries and configuration."""

FAILED, BELOW, PASS, SCORED = "failed", "below", "pass", "scored"
NOT_APPLICABLE, NOT_RUN = "not applicable", "not run"
STATUSES = (FAILED, BELOW, PASS, SCORED, NOT_APPLICABLE, NOT_RUN)
"""The statuses an item has in the report, the files for CI and ``to_pandas()``: ``pass``
or ``below`` (its score against the pass mark the run set), ``scored`` (a score without a
verdict), ``failed`` (not scored), ``not applicable`` (the metric does not apply to the
case), ``not run`` (the run stopped before it)."""


class ItemResult(BaseModel):
    """One metric's verdict on one case (the mean over repeats when ``repeats > 1``).

    ``score`` is None exactly when ``error`` says why the item could not be scored.
    ``metric`` is the key of the metric (its registered name, ``NAME:LABEL`` for a labelled
    instance); ``details`` are that metric's own :class:`~contextlens.schemas.MetricDetails`.
    An item the metric does not apply to (a case without retrieved chunks for a metric that
    reads them, an answer that abstains, a case the offline reader cannot decide) has
    ``not_applicable`` set, saying why, and neither a score nor an error; an item a run
    stopped before (its cost cap) has ``not_run`` set, saying why. ``success``: the score
    reached the metric's pass mark (None when there is no score).
    """

    case_id: str
    metric: MetricKey
    score: float | None
    reason: str | None = None
    error: str | None = None
    not_applicable: str | None = None
    not_run: str | None = None
    success: bool | None = None
    judge: str | None = None
    repeats: list[float | None] | None = None
    spread: float | None = None
    details: SerializeAsAny[MetricDetails] = Field(default_factory=MetricDetails)
    triage: TriageDecision | None = None
    """In a triage run, who decided the item (``offline`` or ``judge``) and why."""
    _exception: BaseException | None = PrivateAttr(default=None)

    @field_validator("details", mode="before")
    @classmethod
    def _metric_details(cls, value: Any, info: ValidationInfo) -> Any:
        """Details read back (from ``results.jsonl``, the store) as their metric's model."""
        if isinstance(value, dict) and "metric" in info.data:
            return details_type(info.data["metric"]).model_validate(value)
        return value

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def status(self) -> str:
        """One of :data:`STATUSES`, one meaning for every metric: ``failed``, ``not
        applicable``, ``not run``, else the verdict against the run's pass mark (``pass``,
        ``below``), or ``scored`` for a score without one."""
        if self.failed:
            return FAILED
        if self.not_applicable is not None:
            return NOT_APPLICABLE
        if self.not_run is not None:
            return NOT_RUN
        if self.success is None:
            return SCORED
        return PASS if self.success else BELOW

    @property
    def exception(self) -> BaseException | None:
        """The exception that failed the item, when it happened in this process."""
        return self._exception


def status_of(item: ItemResult) -> str:
    """The item's status (one of :data:`STATUSES`; :attr:`ItemResult.status`)."""
    return item.status


class TriageSummary(BaseModel):
    """What triage did for one metric of a triage run: its ``band`` (None, with the
    reason in ``note``, for a metric without a calibrated offline scorer: every item
    judged), the items the offline scorer decided (``n_offline``) and those judged
    (``n_judged``: ``n_inside_band`` of them inside the band, ``n_offline_cannot`` that the
    offline scorer could not score), and what the items decided offline saved: the judge
    calls, tokens and cost (USD; None when the model has no price) they would have taken,
    counted as a dry run counts them."""

    band: TriageBand | None
    note: str | None = None
    n_offline: int = 0
    n_judged: int = 0
    n_inside_band: int = 0
    n_offline_cannot: int = 0
    saved_calls: int = 0
    saved_prompt_tokens: int = 0
    saved_completion_tokens: int = 0
    saved_cost: float | None = None

    @property
    def share_judged(self) -> float | None:
        """The share of decided items that went to the judge (None: none was decided)."""
        decided = self.n_offline + self.n_judged
        return self.n_judged / decided if decided else None

    def line(self) -> str:
        """One line for the terminal and the report."""
        if self.band is None:
            return f"triage: no band ({self.note}); every item judged"
        decided = self.n_offline + self.n_judged
        cost = "" if self.saved_cost is None else f", ${self.saved_cost:.4f}"
        return (
            f"triage band {self.band}: {self.n_offline} of {decided} decided offline, "
            f"{self.n_judged} judged ({self.n_inside_band} inside the band, "
            f"{self.n_offline_cannot} not scorable offline); saved {self.saved_calls} calls, "
            f"{self.saved_prompt_tokens + self.saved_completion_tokens} tokens{cost}"
        )


class Breakdown(BaseModel):
    """What a metric's scored items say besides their scores, over the run: how many fall
    in each ``cells`` of a cross (sufficient context by answer), and the mean of each of
    ``means`` (the diagnostics' shares) over the ``n_means`` items it counts."""

    cells: dict[str, int] = Field(default_factory=dict)
    means: dict[str, float] = Field(default_factory=dict)
    n_means: dict[str, int] = Field(default_factory=dict)

    def line(self) -> str:
        """One line for the terminal and the report."""
        parts = [f"{n} {cell}" for cell, n in self.cells.items()]
        parts += [
            f"{name.replace('_', ' ')} {mean:.2f} (of {self.n_means.get(name, 0)})"
            for name, mean in self.means.items()
        ]
        return "; ".join(parts)


class MetricSummary(BaseModel):
    """Aggregate of one metric over the run: the scored items' mean and its interval, and the
    share of them that reached the pass mark (``threshold``) with its interval.

    ``n`` counts every item; ``n_scored`` those with a score, ``n_failed`` those that could
    not be scored, ``n_not_applicable`` those the metric does not apply to, ``n_not_run``
    those the run stopped before (its cost cap); neither of the last two is in the mean or
    the failures. ``n_not_english`` counts the items (of any status) whose case has a text
    in a language other than English, each with its note in ``details.language``.
    """

    metric: MetricKey
    n: int
    n_scored: int
    n_failed: int
    n_not_applicable: int = 0
    n_not_run: int = 0
    n_not_english: int = 0
    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None
    threshold: float | None = None
    n_passed: int = 0
    pass_rate: float | None = None
    pass_low: float | None = None
    pass_high: float | None = None
    judge_spread: float | None = None
    judge: str | None = None
    seconds: float = 0.0
    accounting: Counts | None = None
    """What the metric's judge calls took; None when it recorded none (offline), written as
    ``{}`` in ``summary.json`` as it always was."""
    settings: MetricSettings | None = None
    """The metric's configuration in the run (its settings and prompts; its pass mark is
    ``threshold``)."""
    triage: TriageSummary | None = None
    """In a triage run: who decided its items and what that saved."""
    breakdown: Breakdown | None = None
    """For a metric whose items say more than a score (sufficient context's cells, the
    diagnostics' shares): that, over its scored items."""

    @field_validator("accounting", mode="before")
    @classmethod
    def _none_recorded(cls, value: Any) -> Any:
        return None if value == {} else value

    @field_serializer("accounting")
    def _as_written(self, value: Counts | None) -> dict[str, Any]:
        return {} if value is None else value.model_dump()


class RecordedConfig(BaseModel):
    """What a run records of its :class:`~contextlens.runner.config.RunConfig`
    (``summary.json``'s ``config``, the run store): the judge and embedder by name (secrets
    masked), the cache and ``out`` as text, the rest as given. A caller's own additions (the
    command's ``data`` and ``metrics``) are kept beside them as given, in ``model_extra``.
    Every field has a default: a ``summary.json`` of an older contextlens reads back."""

    model_config = ConfigDict(frozen=True, extra="allow")

    judge: str | None = None
    embedder: str | None = None
    max_concurrency: int | None = None
    retry: dict[str, int | float | str | bool | None] | None = None
    repeats: int = 1
    thresholds: dict[str, float | None] = Field(default_factory=dict)
    max_cost: float | None = None
    triage: bool = False
    batch: bool = False
    cache: str | None = None
    out: str | None = None
    statistical_mode: str | None = None
    name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    def with_extra(self, extra: Mapping[str, Any] | None) -> RecordedConfig:
        """This configuration with a caller's ``extra`` settings over it (a known field
        among them is checked as that field); a ``ValueError`` naming a bad one."""
        if not extra:
            return self
        try:
            return type(self).model_validate({**self.model_dump(), **extra})
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            raise ValueError(
                f"config {key}: {first['msg']} (got {first.get('input')!r:.60})"
            ) from None


class EvalRun(BaseModel):
    """What :func:`contextlens.evaluate` returns: summaries, accounting, per-item results.

    ``judge`` names the judges the metrics used (``offline`` when none); each summary says
    which judge its metric used; ``config`` is the run's configuration as it was recorded
    (its ``name`` and ``tags`` among it); ``provenance`` says how the run was made (versions,
    data file, command; None for a run of a contextlens that did not record it). Summaries go
    by the metrics' keys (``run.summaries["context-precision"]``); :meth:`summary` takes any
    name of a metric.
    ``stopped`` says why the run stopped before scoring all its cases (its cost cap was
    reached), None when it did not.

    ``results`` holds every item result whether or not the run wrote a folder: a run with
    ``out=`` reads them back from its ``results.jsonl`` when asked (iterating streams the
    file; ``len()`` and indexing read it once). :meth:`iter_cases` gives the cases the items
    were scored on; ``data_fingerprint`` identifies them (see
    :class:`~contextlens.cases.DataFingerprint`).
    """

    run_id: str
    started_at: str
    duration_s: float
    judge: str
    embedder: str
    repeats: int
    summaries: dict[str, MetricSummary]
    accounting: LedgerReport = Field(default_factory=LedgerReport)
    config: RecordedConfig = Field(default_factory=RecordedConfig)
    provenance: Provenance | None = None
    out_dir: str | None = None
    stopped: str | None = None
    data_fingerprint: str | None = None
    results: Sequence[ItemResult] = Field(default_factory=list)
    _cases: list[CaseRecord] | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        if not self.results and self._reads_results():
            self.results = Lines(self._stream_results)

    @field_serializer("results")
    def _results_list(self, results: Sequence[ItemResult]) -> list[ItemResult]:
        return list(results)

    def _reads_results(self) -> bool:
        """Whether the items are read back from where the run keeps them."""
        return self.out_dir is not None

    def _stream_results(self) -> Iterator[ItemResult]:
        if self.out_dir is None:
            return iter(())
        path = Path(self.out_dir) / RESULTS_FILE
        return read_records(path, ItemResult.model_validate_json, what="result")

    @classmethod
    def from_folder(cls, folder: str | Path) -> EvalRun:
        """The completed run whose folder ``folder`` is (its ``summary.json``, with its items
        and cases read from the folder when asked); an :class:`InputError` naming the file
        when it cannot be read. The folder may come from elsewhere: its files are read as
        :mod:`contextlens.runfiles` says (regular files of bounded size, a run id checked)."""
        path = Path(folder)
        summary = path / SUMMARY_FILE
        if not summary.exists() and not summary.is_symlink():
            raise FileNotFoundError(
                f"{path}: not the folder of a completed run (no {SUMMARY_FILE})"
            )
        text = read_small(summary)
        deep = text_too_deep(text, MAX_DEPTH + 1)
        if deep is not None:
            raise InputError(f"not the summary of a run ({deep_message()})", file=str(summary))
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"not the summary of a run (not JSON: {exc.msg} at column {exc.colno})",
                file=str(summary),
                line=exc.lineno,
            ) from None
        if not isinstance(data, dict):
            raise InputError(
                f"not the summary of a run (it holds a JSON {_json_kind(data)}, not an object)",
                file=str(summary),
            )
        if "run_id" in data:  # a missing one is the model's to say
            check_run_id(data["run_id"], file=summary)
        data.pop("results", None)
        try:
            return cls.model_validate({**data, "out_dir": str(path)})
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            why = f"{key}: {first['msg']}"
            raise InputError(f"not the summary of a run ({why})", file=str(summary)) from None

    @property
    def name(self) -> str | None:
        """The run's name (``run --name``, ``evaluate(name=...)``), or None."""
        return self.config.name

    @property
    def tags(self) -> dict[str, str]:
        """The run's tags (``run --tag key=value``)."""
        return dict(self.config.tags)

    def iter_results(self) -> Iterator[ItemResult]:
        """Every item result: from memory, or streamed back from where the run keeps them."""
        yield from self.results

    def with_cases(self, cases: Iterable[CaseRecord] | None) -> EvalRun:
        """This run, holding ``cases`` in memory (a run without a folder); returns it."""
        self._cases = None if cases is None else list(cases)
        return self

    def iter_cases(self) -> Iterator[CaseRecord]:
        """The cases of the run, each with the id its items go by: those held in memory, else
        those of the run folder's ``cases.jsonl`` (none when neither is there)."""
        if self._cases is not None:
            yield from self._cases
        elif self.out_dir is not None:
            path = Path(self.out_dir) / CASES_FILE
            yield from read_records(path, CaseRecord.model_validate_json, what="case")

    def cases(self) -> dict[str, CaseRecord]:
        """The cases of the run by their id."""
        return {c.case_id: c for c in self.iter_cases()}

    def failures(self) -> list[ItemResult]:
        return [r for r in self.iter_results() if r.failed]

    def summary(self, name: str) -> MetricSummary:
        """The summary of the metric ``name`` names: a key of :attr:`summaries`, or any name
        of the metric (``context_precision_metric``); an error says which metrics ran."""
        return self.summaries[match(name, list(self.summaries))]

    def to_pandas(self, wide: bool = False) -> Any:
        """The run's items as a DataFrame (needs pandas).

        Long (the default): one row per case and metric, the item's fields with its
        ``status`` (one of :data:`STATUSES`) after its ``score``, then its case's (the
        fields of :func:`case_columns`; a session's ``assistant_id``, ``context`` and
        ``turns``), then one ``meta.KEY`` column per key of the cases' ``meta``.

        ``wide=True``: one row per case, in the order of :attr:`results` (the cases' own
        order in a run held in memory): ``case_id``, the case's columns and ``meta.KEY``
        columns, then for each metric key ``KEY.score`` and ``KEY.status`` (empty where the
        metric has no item for the case). The suffixes keep a metric's columns apart from
        a case's (the ``context`` metric and a session's ``context``)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("to_pandas() needs pandas: pip install pandas") from exc
        cases = self.cases()
        if wide:
            return pd.DataFrame(self._wide_rows(cases))
        rows = []
        for item in self.iter_results():
            row: dict[str, Any] = {}
            for key, value in item.model_dump(exclude={"details"}).items():
                row[key] = value
                if key == "score":
                    row["status"] = status_of(item)
            record = cases.get(item.case_id)
            if record is not None:
                row.update(_case_columns(record))
            rows.append(row)
        frame = pd.DataFrame(rows)
        meta = sorted(c for c in frame.columns if c.startswith("meta."))
        return frame[[c for c in frame.columns if c not in meta] + meta]

    def _wide_rows(self, cases: Mapping[str, CaseRecord]) -> list[dict[str, Any]]:
        """The rows of ``to_pandas(wide=True)``: each case's columns, then its metrics'."""
        scores: dict[str, dict[str, Any]] = {}
        keys = list(self.summaries)
        for item in self.iter_results():
            if item.metric not in keys:
                keys.append(item.metric)
            scores.setdefault(item.case_id, {})[item.metric] = (item.score, status_of(item))
        order = list(scores) + [c for c in cases if c not in scores]
        fields = [_case_columns(cases[c]) if c in cases else {} for c in order]
        meta = sorted({k for row in fields for k in row if k.startswith("meta.")})
        columns = list(dict.fromkeys(k for row in fields for k in row if k not in meta))
        rows = []
        for case, own in zip(order, fields, strict=True):
            row: dict[str, Any] = {"case_id": case}
            row.update({c: own.get(c) for c in columns + meta})
            for key in keys:
                score, status = scores.get(case, {}).get(key, (None, None))
                row[f"{key}.score"] = score
                row[f"{key}.status"] = status
            rows.append(row)
        return rows

    def _repr_html_(self) -> str:
        """The run as a notebook shows it: its metrics' means, intervals and failures."""
        head = "".join(
            f"<th>{h}</th>" for h in ("metric", "judge", "mean", "interval", "n", "failed")
        )
        body = []
        for s in self.summaries.values():
            interval = (
                f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
                if s.ci_low is not None and s.ci_high is not None
                else "-"
            )
            cells = [
                escape(s.metric),
                escape(s.judge or "-"),
                "-" if s.mean is None else f"{s.mean:.3f}",
                interval,
                str(s.n),
                f'<b style="color:#b91c1c">{s.n_failed}</b>' if s.n_failed else "0",
            ]
            body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        where = ""
        if self.out_dir:
            report = Path(self.out_dir) / "report.html"
            where = f"<br>folder <code>{escape(self.out_dir)}</code>"
            if report.exists():
                where += f' · <a href="{escape(report.as_uri())}">report.html</a>'
        name = f" <b>{escape(self.name)}</b>" if self.name else ""
        return (
            f"<div><b>EvalRun</b> <code>{escape(self.run_id)}</code>{name} · "
            f"{self.duration_s:.1f} s · judge {escape(self.judge)}{where}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )


def _json_kind(value: Any) -> str:
    """What a JSON value is called: an array, a string, a number..."""
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, (int, float)) else "null"


def case_columns() -> list[str]:
    """The test-case fields a run's exports carry (``to_pandas()``, the CSV file): every
    field of the field table that a registered metric reads or requires, in the table's
    order, under its own name."""
    used: set[str] = set()
    for info in registered().values():
        if issubclass(info.case_type, ModelTestCase):
            needs = [
                n for need in info.requires for n in ((need,) if isinstance(need, str) else need)
            ]
            used.update(TEST_CASE_FIELDS.canonical(n) or n for n in (*info.reads, *needs))
    return [f.name for f in TEST_CASE_FIELDS if f.name in used]


def _case_columns(record: CaseRecord) -> dict[str, Any]:
    """The columns ``to_pandas()`` gives a case: its fields, then ``meta.KEY``."""
    case = record.case
    if isinstance(case, ModelTestCase):
        row: dict[str, Any] = {name: getattr(case, name) for name in case_columns()}
    else:
        row = {
            "assistant_id": case.assistant_id,
            "context": case.context,
            "turns": len(case.conversation),
        }
    row.update({f"meta.{k}": v for k, v in case.meta.items()})
    return row
