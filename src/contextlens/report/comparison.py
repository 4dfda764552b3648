"""The page of a comparison of two runs: which run is A and which is B, where they are not
alike, each metric's paired difference B − A and the tolerance its cases were held to, and
every case's change, regressions first and largest first.

A changed case links to its page in each run's report (``report.html#case=ID&metric=NAME``
in the run's folder, by a path relative to the page, when the folder has a report), and
opens A and B side by side on the page itself (``#case=ID&metric=NAME``): each metric's
scores in both runs, then the answers, chunks and each metric's evidence of A and of B, read
by :mod:`~contextlens.report.evidence` as the run report reads them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from contextlens.compare import Comparison, side_label
from contextlens.report.cases import case_details
from contextlens.report.format import DASH, fmt_diff, fmt_prob, fmt_score, rates_text
from contextlens.report.page import render_page, script_json, write_page
from contextlens.report.views import comparison_view

__all__ = [
    "MAX_VIEWS",
    "SCRIPTS",
    "changes_context",
    "default_folder",
    "render_comparison",
    "report_href",
    "write_comparison",
]

SCRIPTS = ("common.js", "casedetail.js", "changes.js", "ready.js")
#: Cases a page opens side by side at most (regressions first); the others link to the
#: runs' reports only.
MAX_VIEWS = 1000
#: The folder, beside the runs' folders, that the comparison pages go to unless told.
COMPARISONS = "comparisons"


def default_folder(comparison: Comparison, kind: str = COMPARISONS) -> Path:
    """Where the page goes unless told: the ``comparisons/`` folder of the runs' out folder
    (the folder that holds their run folders; run B's when they are not in one), so it sits
    beside the runs; ``contextlens-out/comparisons/`` when neither run has a folder."""
    outs = [Path(f).parent for f in (comparison.folder_b, comparison.folder_a) if f]
    return (outs[0] if outs else Path("contextlens-out")) / kind


def report_href(folder: str | None, page: Path | None) -> str | None:
    """The report of the run folder ``folder``, by a path relative to ``page``'s folder (a
    ``file:`` address when the page's place is not known); None when it has no report."""
    if not folder:
        return None
    report = Path(folder) / "report.html"
    if not report.is_file():
        return None
    if page is None:
        return report.resolve().as_uri()
    return Path(os.path.relpath(report.resolve(), page.parent.resolve())).as_posix()


def _view_ids(comparison: Comparison, rows: Sequence[list[Any]]) -> list[str]:
    """The cases shown side by side, in the rows' order: each that changed at all (moved,
    failed, in one run only), the first :data:`MAX_VIEWS`."""
    wanted: dict[str, None] = {}
    for row in rows:
        if row[5] != "unchanged" or row[4]:
            wanted.setdefault(row[1], None)
    return list(wanted)


def changes_context(comparison: Comparison, page: Path | None) -> dict[str, Any]:
    """What the changes table and the A/B view of a page are made of: the rows (metric,
    case, A, B, B − A, change, regression, within noise, view), each run's label and
    report, each metric's tolerance, and a JSON block per case shown side by side."""
    changes = sorted(
        ((at, c) for at, m in enumerate(comparison.metrics) for c in m.changes),
        key=lambda pair: pair[1].order(),
    )
    rows: list[list[Any]] = [
        [at, c.case_id, c.a, c.b, c.diff, c.change, c.regression, c.within_noise, -1]
        for at, c in changes
    ]
    runs = comparison.runs
    ids = _view_ids(comparison, rows) if runs is not None else []
    shown = ids[:MAX_VIEWS]
    blocks = ""
    if runs is not None and shown:
        sides = [case_details(run, shown) for run in runs]
        at = {case_id: i for i, case_id in enumerate(shown)}
        for row in rows:
            row[8] = at.get(row[1], -1)
        blocks = "".join(
            f'<script type="application/json" id="cl-side-{i}">'
            f"{script_json({'a': sides[0].get(c), 'b': sides[1].get(c)})}</script>\n"
            for i, c in enumerate(shown)
        )
    data = {
        "metrics": [m.metric for m in comparison.metrics],
        "tolerances": [m.tolerance.value if m.tolerance else None for m in comparison.metrics],
        "rows": rows,
        "sides": {
            "a": side_label(comparison.run_a, comparison.label_a),
            "b": side_label(comparison.run_b, comparison.label_b),
        },
        "reports": {
            "a": report_href(comparison.folder_a, page),
            "b": report_href(comparison.folder_b, page),
        },
        "unviewed": len(ids) - len(shown),
    }
    return {
        "changes_json": script_json(data),
        "side_blocks": Markup(blocks),
        "n_views": len(shown),
        "n_unviewed": len(ids) - len(shown),
        "reports": data["reports"],
        "sides": data["sides"],
    }


def render_comparison(
    comparison: Comparison, *, title: str | None = None, page: Path | None = None
) -> str:
    """The comparison page as a string; ``page``: where it will be written, which its links
    to the runs' reports are relative to (see :func:`write_comparison`)."""
    view = comparison_view(comparison)
    summary = [
        {
            "metric": m.metric,
            "anchor": card.anchor,
            "pairs": m.n_paired,
            "a": fmt_score(m.mean_a),
            "b": fmt_score(m.mean_b),
            "diff": fmt_diff(m.mean_diff),
            "tone": "" if not m.mean_diff else "neg" if m.mean_diff < 0 else "pos",
            "interval": (
                f"[{fmt_diff(m.ci_low)}, {fmt_diff(m.ci_high)}]" if m.ci_low is not None else "—"
            ),
            "p": fmt_prob(m.p_b_better),
            "pass": rates_text(m.pass_rate_a, m.pass_rate_b, missing=DASH, arrow="→"),
            "unpaired": m.n_unpaired,
            "regressed": len(m.regressions),
            "improved": len(m.improvements),
            "within": m.n_within_noise,
            "tolerance": f"±{m.tolerance.value:.3f}" if m.tolerance else DASH,
            "tolerance_how": m.tolerance.how if m.tolerance else "",
            "tolerance_basis": m.tolerance.basis if m.tolerance else "",
            "verdict": m.verdict,
            "verdict_tone": card.tone,
        }
        for m, card in zip(comparison.metrics, view.metrics, strict=True)
    ]
    return render_page(
        "compare.html.j2",
        scripts=SCRIPTS,
        wide=True,
        title=title or f"contextlens comparison: {comparison.sides}",
        comparison=view,
        warnings=comparison.warnings,
        summary=summary,
        **changes_context(comparison, page),
    )


def write_comparison(comparison: Comparison, path: str | Path, *, title: str | None = None) -> Path:
    """Write the comparison page to ``path`` (a folder gets ``compare-A-B.html``); its links
    to the runs' reports are relative to where it is written."""
    name = f"compare-{comparison.run_a}-{comparison.run_b}.html"
    target = Path(path)
    page = target / name if target.is_dir() and not target.is_symlink() else target
    return write_page(render_comparison(comparison, title=title, page=page), page, name)
