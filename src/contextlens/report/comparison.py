"""The page of a comparison of two runs: where the runs are not alike, each metric's paired
difference, and every case's change, regressions first and largest first."""

from __future__ import annotations

from pathlib import Path

from contextlens.compare import Comparison
from contextlens.report.format import DASH, fmt_diff, fmt_prob, fmt_score, rates_text
from contextlens.report.page import render_page, script_json, write_page
from contextlens.report.views import comparison_view

__all__ = ["render_comparison", "write_comparison"]

SCRIPTS = ("common.js", "changes.js", "ready.js")


def _side(run_id: str, label: str | None) -> str:
    return f"{label} ({run_id})" if label else run_id


def render_comparison(comparison: Comparison, *, title: str | None = None) -> str:
    """The comparison page as a string; see :func:`write_comparison`."""
    metrics = [m.metric for m in comparison.metrics]
    changes = sorted(
        ((at, c) for at, m in enumerate(comparison.metrics) for c in m.changes),
        key=lambda pair: pair[1].order(),
    )
    rows = [[at, c.case_id, c.a, c.b, c.diff, c.change, c.regression] for at, c in changes]
    counts = {
        m.metric: {
            "regressed": sum(c.regression for c in m.changes),
            "improved": sum(c.change in ("improved", "fixed") for c in m.changes),
        }
        for m in comparison.metrics
    }
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
            "regressed": counts[m.metric]["regressed"],
            "improved": counts[m.metric]["improved"],
            "verdict": m.verdict,
            "verdict_tone": card.tone,
        }
        for m, card in zip(comparison.metrics, view.metrics, strict=True)
    ]
    a = _side(comparison.run_a, comparison.label_a)
    b = _side(comparison.run_b, comparison.label_b)
    return render_page(
        "compare.html.j2",
        scripts=SCRIPTS,
        title=title or f"contextlens comparison: {b} against {a}",
        comparison=view,
        warnings=comparison.warnings,
        label_a=a,
        label_b=b,
        counts=counts,
        summary=summary,
        changes_json=script_json({"metrics": metrics, "rows": rows}),
    )


def write_comparison(comparison: Comparison, path: str | Path, *, title: str | None = None) -> Path:
    """Write the comparison page to ``path`` (a folder gets ``compare-A-B.html``)."""
    name = f"compare-{comparison.run_a}-{comparison.run_b}.html"
    return write_page(render_comparison(comparison, title=title), path, name)
