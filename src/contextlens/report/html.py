"""A self-contained HTML report of an evaluation run (and optionally a comparison of two).

The page loads nothing from anywhere (see :mod:`~contextlens.report.page`). It opens on what
went wrong: per metric, its mean and pass rate and its worst cases (failures, then the
lowest scores), one line each with the case's input and answer, each a link that opens the
case on that metric's evidence. Below come the case table (every case with its input, its
answer, each metric's score and status, and its ``meta``; sorted by any metric, filtered by
text, by status (of one metric or any), by score range and by ``meta`` field), the slice
tables per ``meta`` value, and each metric's section: its interval, distribution, lowest
scores and failures with their reasons and the judge's last reply.

A case opens as a page of its own, at ``#case=ID`` (``&metric=NAME`` puts that metric's
evidence first), so a link to it can be shared: its texts and chunks with each metric's
evidence laid over them (claims marked in the answer and their closest sentence in their
chunk, each statement's verdict, the chunk's verdict at its rank, its retrieval id and
whether it is relevant, each side's similarity), then each metric's reason, tables and facts;
a session shows its turns with their verdicts. The rows are one JSON block and each case's
drill-down another, read on demand, so a report of 10,000 cases opens at once.

Numbers carry stable attributes for tools and tests: ``data-metric`` / ``data-field`` (and the
raw value in ``data-value``) in the metric sections, ``data-comparison`` / ``data-field`` in
the comparison section, ``data-worst-case`` on each worst-case link.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markupsafe import Markup

from contextlens.metrics.base import OFFLINE_SCALE_NOTE
from contextlens.report.cases import case_table
from contextlens.report.format import as_dict, ci_text, fmt_seconds, get, iter_results
from contextlens.report.page import render_page, script_json, write_page
from contextlens.report.views import (
    Collected,
    accounting_stats,
    collect,
    comparison_view,
    metric_view,
)

__all__ = ["render_report", "write_report"]

SCRIPTS = ("common.js", "casedetail.js", "report.js", "cases.js", "ready.js")


def render_report(
    run: Any,
    *,
    comparison: Any = None,
    title: str | None = None,
) -> str:
    """The report page as a string; see :func:`write_report`."""
    summaries = get(run, "summaries") or {}
    items = list(iter_results(run))
    collected = collect(items)
    names = list(summaries) + [m for m in collected if m not in summaries]
    metrics = [
        metric_view(name, summaries.get(name, {}), collected.get(name, Collected()), i)
        for i, name in enumerate(names)
    ]
    total = get(get(run, "accounting"), "total")
    run_id = str(get(run, "run_id", "") or "")
    out_dir = get(run, "out_dir")
    levels = [get(summaries.get(n), "ci_level") for n in names]
    level = next((v for v in levels if v), 0.95)
    cases = case_table(run, names, ci_level=level, items=items)
    for m in metrics:
        m.worst = cases.worst.get(m.name, [])
        m.lowest = cases.lowest.get(m.name, [])
        m.counts = cases.counts.get(m.name, {})
        m.column = cases.metrics.index(m.name) if m.name in cases.metrics else 0
    config = get(run, "config") or {}
    data = {
        "run_id": run_id,
        "started_at": get(run, "started_at"),
        "duration_s": get(run, "duration_s"),
        "judge": get(run, "judge"),
        "summaries": {n: as_dict(summaries[n]) if n in summaries else {} for n in names},
    }
    blocks = "".join(
        f'<script type="application/json" id="cl-case-{i}">{script_json(d)}</script>\n'
        for i, d in enumerate(cases.details)
    )
    return render_page(
        "report.html.j2",
        scripts=SCRIPTS,
        wide=True,
        title=title or "contextlens report",
        run_id=run_id,
        run_name=get(config, "name"),
        tags=get(config, "tags") or {},
        started_at=get(run, "started_at") or "",
        duration=fmt_seconds(get(run, "duration_s")),
        judge=get(run, "judge") or "",
        embedder=get(run, "embedder") or "",
        repeats=get(run, "repeats") or 1,
        out_dir=str(out_dir) if out_dir else "",
        stopped=get(run, "stopped") or "",
        totals=accounting_stats(total),
        metrics=metrics,
        comparison=comparison_view(comparison) if comparison is not None else None,
        offline_note=OFFLINE_SCALE_NOTE,
        results_path=_results_file(out_dir),
        case_metrics=cases.metrics,
        meta_fields=list(cases.meta_fields),
        n_cases=len(cases.rows),
        slice_fields=list(cases.slices),
        slice_ci=ci_text(level),
        pass_marks={k: f"{v:g}" for k, v in cases.pass_marks.items() if v is not None},
        data_json=script_json(data),
        rows_json=script_json(cases.rows_json()),
        case_blocks=Markup(blocks),
    )


def _results_file(out_dir: Any) -> str:
    """The run's ``results.jsonl`` when it exists (a run without a folder, a pytest session,
    has none: the page then names no file)."""
    if not out_dir:
        return ""
    path = Path(out_dir) / "results.jsonl"
    return str(path) if path.is_file() else ""


def write_report(
    run: Any,
    path: str | Path,
    *,
    comparison: Any = None,
    title: str | None = None,
) -> Path:
    """Write one self-contained HTML page for ``run`` (an :class:`~contextlens.runner.EvalRun`
    or anything with ``summaries`` and ``iter_results()``) and return its path.

    ``comparison``: a :class:`~contextlens.compare.Comparison` (read by attribute) adds a
    section with each metric's paired difference. An item passes at its metric's pass mark
    as the run set it (``threshold`` of each summary). A folder ``path`` gets
    ``report.html``.
    """
    html = render_report(run, comparison=comparison, title=title)
    return write_page(html, path, "report.html")
