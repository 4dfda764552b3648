"""The runs index: one page listing runs of the store, each linked to its report."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contextlens.report.format import fmt_score
from contextlens.report.page import render_page, write_page

__all__ = ["render_index", "write_index"]


def _href(out_dir: str | None, page: Path) -> str | None:
    """The report of a run folder, relative to the page (None when it has none)."""
    if not out_dir:
        return None
    report = Path(out_dir) / "report.html"
    if not report.is_file():
        return None
    return Path(os.path.relpath(report, page.parent.resolve())).as_posix()


def render_index(infos: Sequence[Any], page: Path, *, store: str = "") -> str:
    """The index page of ``infos`` (:class:`~contextlens.store.RunInfo`), linked from
    ``page``'s folder."""
    rows = [
        {
            "run_id": i.run_id,
            "href": _href(i.out_dir, page),
            "started_at": i.started_at,
            "status": i.status,
            "name": i.name or "",
            "tags": [f"{k}={v}" for k, v in i.tags.items()],
            "judge": i.judge,
            "cases": i.n_cases,
            "failed": i.n_failed,
            "means": [(k, fmt_score(v)) for k, v in i.means.items()],
            "folder": i.out_dir or "",
        }
        for i in infos
    ]
    return render_page(
        "index.html.j2",
        scripts=("common.js", "ready.js"),
        title="contextlens runs",
        rows=rows,
        store=store,
    )


def write_index(infos: Sequence[Any], path: str | Path, *, store: str = "") -> Path:
    """Write the index page to ``path`` (a folder gets ``index.html``)."""
    target = Path(path)
    page = target / "index.html" if target.is_dir() else target
    return write_page(render_index(infos, page, store=store), page, "index.html")
