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

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from markupsafe import Markup

from contextlens.files import OutputError, describe_os_error, write_parts
from contextlens.metrics.base import OFFLINE_SCALE_NOTE
from contextlens.report.cases import case_table
from contextlens.report.format import as_dict, ci_text, fmt_seconds, get
from contextlens.report.page import page_path, render_page, script_json
from contextlens.report.spool import Spool
from contextlens.report.views import (
    Collected,
    accounting_stats,
    collect_item,
    comparison_view,
    metric_view,
)

__all__ = ["render_report", "report_parts", "write_report"]

SCRIPTS = ("common.js", "casedetail.js", "report.js", "cases.js", "ready.js")


_ROWS, _BLOCKS = "<!--cl-rows-->", "<!--cl-case-blocks-->"


def render_report(
    run: Any,
    *,
    comparison: Any = None,
    title: str | None = None,
) -> str:
    """The report page as a string; see :func:`write_report`."""
    with Spool() as spool:
        return "".join(report_parts(run, spool, comparison=comparison, title=title))


def report_parts(
    run: Any,
    spool: Spool,
    *,
    comparison: Any = None,
    title: str | None = None,
) -> Iterator[str]:
    """The report page in pieces: the run is read once into ``spool`` (its items grouped by
    case, each case's row and drill-down written as it is made), then the page is given out
    from it, so what it holds at once does not grow with the run."""
    summaries = get(run, "summaries") or {}
    level = next((v for s in summaries.values() if (v := get(s, "ci_level"))), 0.95)
    collected: dict[str, Collected] = {}
    table = case_table(
        run, list(summaries), spool, ci_level=level, collect=lambda i: collect_item(collected, i)
    )
    names = table.metrics
    metrics = [
        metric_view(name, summaries.get(name, {}), collected.get(name, Collected()), i)
        for i, name in enumerate(names)
    ]
    for m in metrics:
        m.worst = table.worst.get(m.name, [])
        m.lowest = table.lowest.get(m.name, [])
        m.counts = table.counts.get(m.name, {})
        m.column = names.index(m.name)
    total = get(get(run, "accounting"), "total")
    run_id = str(get(run, "run_id", "") or "")
    out_dir = get(run, "out_dir")
    config = get(run, "config") or {}
    data = {
        "run_id": run_id,
        "started_at": get(run, "started_at"),
        "duration_s": get(run, "duration_s"),
        "judge": get(run, "judge"),
        "summaries": {n: as_dict(summaries[n]) if n in summaries else {} for n in names},
    }
    page = render_page(
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
        case_metrics=names,
        meta_fields=list(table.meta_fields),
        n_cases=table.n_rows,
        slice_fields=list(table.slices),
        slice_ci=ci_text(level),
        pass_marks={k: f"{v:g}" for k, v in table.pass_marks.items() if v is not None},
        data_json=script_json(data),
        rows_json=Markup(_ROWS),
        case_blocks=Markup(_BLOCKS),
    )
    head, rest = page.split(_ROWS, 1)
    middle, tail = rest.split(_BLOCKS, 1)
    yield head
    yield str(script_json(table.head_json()))[:-1] + ',"rows":['
    yield from spool.read(spool.rows)
    yield "]}"
    yield middle
    yield from spool.read(spool.details)
    yield tail


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
    ``report.html``. The page is written in pieces, its scratch files in a temporary folder
    beside it, so a run of a million cases is written in bounded memory.
    """
    target = page_path(path, "report.html")
    try:
        spool = Spool(target.parent)
    except OSError as exc:
        raise OutputError(target, describe_os_error(exc)) from None
    with spool:
        try:
            parts = report_parts(run, spool, comparison=comparison, title=title)
            return write_parts(target, parts)
        except (OSError, sqlite3.Error) as exc:  # the scratch files beside it
            raise OutputError(target, f"its scratch files: {exc}") from None
