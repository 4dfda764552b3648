"""A self-contained HTML page for a :class:`~contextlens.calibration.CalibrationReport`.

No network and no script: inline CSS and inline SVG (a ROC curve and a reliability plot).
Every piece of text is escaped with :func:`markupsafe.escape`; a Content-Security-Policy
forbids loading anything, as a second line of defence.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from markupsafe import escape

from contextlens.files import make_folder, write_text

__all__ = ["render_calibration_report", "write_calibration_report"]

_CSS = """
:root { --bg:#f5f6f8; --card:#fff; --text:#111827; --muted:#6b7280; --border:#e5e7eb;
  --accent:#4f46e5; --faint:#9ca3af; --warn:#b45309; color-scheme: light dark; }
@media (prefers-color-scheme: dark) { :root { --bg:#0d1117; --card:#161b22; --text:#e6edf3;
  --muted:#9aa4b2; --border:#2a313c; --accent:#a5b4fc; --faint:#6e7681; --warn:#fbbf24; } }
body { margin:0; background:var(--bg); color:var(--text);
  font:15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 28px 20px 48px; }
h1 { font-size: 1.5rem; margin: 0 0 4px; } h2 { font-size: 1.1rem; margin: 0 0 12px; }
.meta { color: var(--muted); font-size: .9rem; margin-bottom: 20px; word-break: break-all; }
.card { background: var(--card); border: 1px solid var(--border); border-radius: 14px;
  padding: 18px 20px; margin-bottom: 18px; }
.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 12px; }
.stat .label { color: var(--muted); font-size: .8rem; text-transform: uppercase;
  letter-spacing: .03em; }
.stat .value { font-size: 1.4rem; font-variant-numeric: tabular-nums; }
.stat .sub { color: var(--muted); font-size: .82rem; }
.opt { color: var(--warn); }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 18px; }
svg { width: 100%; height: auto; } svg text { fill: var(--muted); font-size: 11px; }
svg .axis { stroke: var(--border); } svg .diag { stroke: var(--faint); stroke-dasharray: 4 4; }
svg .curve { stroke: var(--accent); fill: none; stroke-width: 2; }
svg .dot { fill: var(--accent); fill-opacity: .75; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--border); }
th { color: var(--muted); font-weight: 600; font-size: .85rem; }
td.num, th.num { text-align: right; }
.note { color: var(--muted); font-size: .88rem; }
"""

_W, _H, _M = 340.0, 300.0, 40.0  # plot size and margin


def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}"


def _px(x: float, y: float) -> tuple[float, float]:
    left = _M + 14
    inner_w, inner_h = _W - left - _M / 2, _H - 1.5 * _M
    return left + x * inner_w, _M / 2 + (1 - y) * inner_h


def _frame(xlabel: str, ylabel: str) -> list[str]:
    parts = []
    (x0, y0), (x1, y1) = _px(0, 0), _px(1, 1)
    parts.append(
        f'<rect class="axis" x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="none"/>'
    )
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        tx, _ = _px(t, 0)
        _, ty = _px(0, t)
        parts.append(f'<text x="{tx:.1f}" y="{y0 + 14:.1f}" text-anchor="middle">{t:g}</text>')
        parts.append(f'<text x="{x0 - 6:.1f}" y="{ty + 4:.1f}" text-anchor="end">{t:g}</text>')
    parts.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{_H - 4:.1f}" text-anchor="middle">'
        f"{escape(xlabel)}</text>"
    )
    parts.append(
        f'<text x="12" y="{(y0 + y1) / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {(y0 + y1) / 2:.1f})">{escape(ylabel)}</text>'
    )
    (dx0, dy0), (dx1, dy1) = _px(0, 0), _px(1, 1)
    parts.append(f'<line class="diag" x1="{dx0}" y1="{dy0}" x2="{dx1}" y2="{dy1}"/>')
    return parts


def roc_svg(points: list[tuple[float, float]], title: str) -> str:
    """The ROC curve (false positive rate vs true positive rate) as inline SVG."""
    parts = _frame("false positive rate", "true positive rate")
    if points:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in (_px(a, b) for a, b in points))
        parts.append(f'<polyline class="curve" points="{path}"/>')
    else:
        parts.append(f'<text x="{_W / 2}" y="{_H / 2}" text-anchor="middle">no curve</text>')
    return (
        f'<svg viewBox="0 0 {_W:g} {_H:g}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>{''.join(parts)}</svg>"
    )


def reliability_svg(bins: list[Any], title: str) -> str:
    """Observed rate against mean score per bin; dot area grows with the bin's count."""
    parts = _frame("mean score in bin", "observed rate of label 1")
    total = sum(b.count for b in bins) or 1
    line = []
    for b in bins:
        x, y = _px(b.mean_predicted, b.observed_rate)
        r = 3 + 9 * math.sqrt(b.count / total)
        line.append(f"{x:.1f},{y:.1f}")
        tip = (
            f"[{b.low:.1f}, {b.high:.1f}): n={b.count}, mean score {b.mean_predicted:.3f}, "
            f"observed {b.observed_rate:.3f}"
        )
        parts.append(
            f'<circle class="dot" cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}">'
            f"<title>{escape(tip)}</title></circle>"
        )
    if line:
        parts.append(f'<polyline class="curve" points="{" ".join(line)}"/>')
    return (
        f'<svg viewBox="0 0 {_W:g} {_H:g}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>{''.join(parts)}</svg>"
    )


def _stat(label: str, value: str, sub: str = "", field: str = "", optimistic: bool = False) -> str:
    cls = "value opt" if optimistic else "value"
    return (
        f'<div class="stat" data-field="{escape(field)}"><div class="label">{escape(label)}</div>'
        f'<div class="{cls}">{escape(value)}</div><div class="sub">{escape(sub)}</div></div>'
    )


def _worst(report: Any) -> str:
    """The most misjudged items: the highest-scored negatives, the lowest-scored positives."""
    t = report.threshold
    parts = []
    for title, items, wrong in (
        ("Highest-scored items labelled 0", report.worst_negatives, lambda s: s >= t),
        ("Lowest-scored items labelled 1", report.worst_positives, lambda s: s < t),
    ):
        if not items:
            continue
        body = "".join(
            f'<tr><td>{escape(i.id)}</td><td class="num">{i.label:g}</td>'
            f'<td class="num">{escape(_f(i.score))}</td>'
            f"<td>{'misjudged' if wrong(i.score) else ''}</td>"
            + (f"<td>{escape(i.slice or '')}</td>" if report.by else "")
            + "</tr>"
            for i in items
        )
        slice_head = f"<th>{escape(report.by)}</th>" if report.by else ""
        parts.append(
            f"<div><h2>{escape(title)}</h2><table><thead><tr><th>id</th>"
            f'<th class="num">label</th><th class="num">score</th><th>@ {t:g}</th>'
            f"{slice_head}</tr></thead><tbody>{body}</tbody></table></div>"
        )
    if not parts:
        return ""
    return (
        f'<section class="card"><div class="plots">{"".join(parts)}</div>'
        '<p class="note">Every item, with its score and label, is in items.jsonl beside this '
        "page.</p></section>"
    )


def render_calibration_report(report: Any, title: str | None = None) -> str:
    """The page as a string; see :func:`write_calibration_report`."""
    r = report
    interval = (
        f"pooled over all items; {r.ci_level:.0%} interval [{_f(r.auroc_low)}, {_f(r.auroc_high)}]"
        if r.auroc_low is not None
        else "needs both classes"
    )
    stats = [
        _stat("AUROC", _f(r.auroc), interval, "auroc"),
        _stat(
            f"balanced accuracy @ {r.threshold:g}",
            _f(r.balanced_accuracy),
            f"F1 {_f(r.f1)}",
            "balanced_accuracy",
        ),
        _stat(
            "best threshold (optimistic)",
            _f(r.best_threshold),
            f"balanced accuracy {_f(r.best_balanced_accuracy)}, F1 {_f(r.best_f1)}",
            "best_threshold",
            optimistic=True,
        ),
        _stat(
            "balanced accuracy, cross-validated",
            _f(r.cv_balanced_accuracy),
            f"each item at the best threshold of the other items ({r.cv_folds or 0} folds)",
            "cv_balanced_accuracy",
        ),
        _stat("ECE", _f(r.ece), "expected calibration error, 10 bins", "ece"),
        _stat("items", f"{r.n}", f"of {r.n_rows}; {r.n_failed} failed and excluded", "n"),
        _stat("labels 1 / 0", f"{r.n_positive} / {r.n_negative}", r.positive_rule, "labels"),
    ]
    if r.graded:
        stats.append(_stat("Spearman", _f(r.spearman), "score vs graded label", "spearman"))
    if r.by:
        stats.append(
            _stat(
                f"mean AUROC over {r.by}",
                _f(r.slice_mean_auroc),
                f"mean of the per-slice AUROCs; {r.n_slices_scored} of {len(r.slices)} "
                "slices have both classes",
                "slice_mean_auroc",
            )
        )
    explained = (
        "<p>The best threshold is the cut that maximises balanced accuracy on these same "
        'items, so it and the figures at it are <span class="opt">optimistic</span>. The '
        "cross-validated balanced accuracy judges each item at a threshold chosen on the "
        "other items: what a threshold chosen on labels like these reaches on new ones.</p>"
    )
    slices = ""
    if r.by:
        body = "".join(
            f'<tr><td>{escape(s.value)}</td><td class="num">{s.n}</td>'
            f'<td class="num">{s.n_positive} / {s.n_negative}</td>'
            f'<td class="num">{escape(_f(s.auroc))}</td>'
            f'<td class="num">{escape(_f(s.balanced_accuracy))}</td>'
            f"<td>{escape(s.note or '')}</td></tr>"
            for s in r.slices
        )
        slices = (
            f'<section class="card"><h2>By {escape(r.by)}</h2><table><thead><tr>'
            '<th>slice</th><th class="num">n</th><th class="num">1 / 0</th>'
            f'<th class="num">AUROC</th><th class="num">bal. acc. @ {r.threshold:g}</th>'
            f"<th>note</th></tr></thead><tbody>{body}</tbody></table>"
            f'<p class="note">The AUROC above is pooled over all items; the mean AUROC over '
            f"{escape(r.by)} is the mean of these per-slice AUROCs. They differ when the "
            "score's level shifts from slice to slice.</p></section>"
        )
    failures = ""
    if r.failures:
        items = "".join(
            f"<tr><td>{escape(f.get('id', ''))}</td><td>{escape(f.get('error', ''))}</td></tr>"
            for f in r.failures
        )
        failures = (
            f'<section class="card"><h2>Failed items ({r.n_failed}, excluded)</h2>'
            f"<table><thead><tr><th>id</th><th>error</th></tr></thead><tbody>{items}</tbody>"
            "</table></section>"
        )
    note = f'<p class="note">{escape(r.note)}</p>' if r.note else ""
    page_title = title or f"contextlens calibration: {r.metric}"
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    csp = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(page_title)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>{escape(page_title)}</h1>"
        f'<div class="meta">data {escape(r.data)} · metric {escape(r.metric)} · judge '
        f"{escape(r.judge)} · {r.duration_s:.1f} s · generated {escape(generated)}</div>"
        f'<section class="card"><div class="stats">{"".join(stats)}</div>{explained}{note}'
        "</section>"
        '<section class="card plots">'
        f"<div><h2>ROC curve</h2>{roc_svg(list(r.roc), 'ROC curve')}</div>"
        f"<div><h2>Reliability</h2>{reliability_svg(list(r.reliability), 'Reliability')}"
        '<p class="note">Dots on the dashed diagonal mean the score can be read as the '
        "probability of label 1.</p></div></section>"
        f"{_worst(r)}{slices}{failures}</main></body></html>"
    )


def write_calibration_report(report: Any, path: str | Path) -> Path:
    """Write the calibration page for ``report`` and return its path (a folder gets
    ``calibration.html``)."""
    target = Path(path)
    if target.is_dir() and not target.is_symlink():
        target = target / "calibration.html"
    make_folder(target.parent)
    return write_text(target, render_calibration_report(report))
