"""A self-contained HTML report of an evaluation run (and optionally a comparison of two).

The page loads nothing from anywhere: CSS and JavaScript are inline, plots are SVG drawn
here. Everything that comes from the evaluated system (case ids, reasons, errors, metric
names) is escaped by Jinja2's autoescape; the SVG built here escapes its text with
:func:`markupsafe.escape`; data for scripts goes through a ``<script type="application/json">``
block with ``<``, ``>`` and ``&`` escaped. A Content-Security-Policy allows only the page's
own script (by hash) and no network at all, as a second line of defence.

Numbers carry stable attributes for tools and tests: ``data-metric`` / ``data-field`` (and the
raw value in ``data-value``) in the metric sections, ``data-comparison`` / ``data-field`` in
the comparison section.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Mapping
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from contextlens.files import make_folder, write_text
from contextlens.metrics.base import OFFLINE_SCALE_NOTE
from contextlens.report.format import (
    as_dict,
    fmt_count,
    fmt_score,
    fmt_seconds,
    get,
)
from contextlens.report.views import (
    Collected,
    accounting_stats,
    collect,
    comparison_view,
    metric_view,
)

__all__ = ["MAX_ROWS", "render_report", "write_report"]

MAX_ROWS = 5000
"""Rows of the per-item table shown per metric; the histogram always uses every item."""


def _json_for_script(data: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&``."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, code)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


def _clean(value: Any) -> Any:
    """``value`` with non-finite floats as None, for strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


@cache
def _asset(name: str) -> str:
    return resources.files("contextlens.report").joinpath("templates", name).read_text("utf-8")


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("contextlens.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = fmt_score
    env.filters["count"] = fmt_count
    return env


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def render_report(
    run: Any,
    *,
    comparison: Any = None,
    title: str | None = None,
    max_rows: int = MAX_ROWS,
) -> str:
    """The report page as a string; see :func:`write_report`."""
    summaries = get(run, "summaries") or {}
    collected = collect(run, max_rows)
    names = list(summaries) + [m for m in collected if m not in summaries]
    metrics = [
        metric_view(name, summaries.get(name, {}), collected.get(name, Collected()), i)
        for i, name in enumerate(names)
    ]
    accounting = get(run, "accounting") or {}
    total = accounting.get("total", {}) if isinstance(accounting, Mapping) else {}
    run_id = str(get(run, "run_id", "") or "")
    out_dir = get(run, "out_dir")
    script = _asset("report.js")
    data = _clean(
        {
            "run_id": run_id,
            "started_at": get(run, "started_at"),
            "duration_s": get(run, "duration_s"),
            "judge": get(run, "judge"),
            "summaries": {
                name: as_dict(summaries[name]) if name in summaries else {} for name in names
            },
        }
    )
    context = {
        "title": title or "contextlens report",
        "run_id": run_id,
        "started_at": get(run, "started_at") or "",
        "duration": fmt_seconds(get(run, "duration_s")),
        "judge": get(run, "judge") or "",
        "embedder": get(run, "embedder") or "",
        "repeats": get(run, "repeats") or 1,
        "out_dir": str(out_dir) if out_dir else "",
        "totals": accounting_stats(total),
        "metrics": metrics,
        "comparison": comparison_view(comparison) if comparison is not None else None,
        "max_rows": max_rows,
        "offline_note": OFFLINE_SCALE_NOTE,
        "results_path": str(Path(out_dir) / "results.jsonl") if out_dir else "results.jsonl",
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "version": _version(),
        "data_json": _json_for_script(data),
        "script": Markup(script),
        "styles": Markup(_asset("report.css")),
        "csp": f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src '{_csp_hash(script)}'; base-uri 'none'; form-action 'none'",
    }
    return _environment().get_template("report.html.j2").render(**context)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("contextlens")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return ""


def write_report(
    run: Any,
    path: str | Path,
    *,
    comparison: Any = None,
    title: str | None = None,
    max_rows: int = MAX_ROWS,
) -> Path:
    """Write one self-contained HTML page for ``run`` (an :class:`~contextlens.runner.EvalRun`
    or anything with ``summaries`` and ``iter_results()``) and return its path.

    ``comparison``: a :class:`~contextlens.compare.Comparison` (read by attribute) adds a
    section with each metric's paired difference. ``max_rows`` caps the per-item table of
    each metric; the histograms use every item. A folder ``path`` gets ``report.html``.
    """
    target = Path(path)
    if target.is_dir() and not target.is_symlink():
        target = target / "report.html"
    make_folder(target.parent)
    html = render_report(run, comparison=comparison, title=title, max_rows=max_rows)
    return write_text(target, html)
