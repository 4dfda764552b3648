"""Property-based fuzzing of the HTML report, the comparison and the trend page: whatever the
data holds (case ids, metric names, reasons, errors, judge names, run names and tags, odd
numbers), the page renders, shows it as text, and carries no markup of it."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextlens.report import render_report
from contextlens.results import EvalRun, ItemResult, MetricSummary

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
hostile = st.sampled_from(
    [
        "<script>alert(1)</script>",
        "</script><img src=x onerror=alert(2)>",
        "<!--",
        "]]>",
        "{{ 7*7 }}",
        "${x}",
        "\x00\x1b[31m",
        "javascript:alert(3)",
        "&amp;",
        "'\"",
    ]
)
texts = st.one_of(
    st.text(max_size=40), hostile, st.builds(lambda a, b: a + b, st.text(max_size=20), hostile)
)
scores = st.one_of(st.none(), st.floats(0.0, 1.0), st.just(math.nan))


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@st.composite
def runs(draw: st.DrawFn) -> EvalRun:
    metrics = draw(st.lists(texts, min_size=1, max_size=3, unique=True))
    items = []
    for metric in metrics:
        for _ in range(draw(st.integers(0, 4))):
            score = draw(scores)
            failed = score is None or math.isnan(score)
            items.append(
                ItemResult(
                    case_id=draw(texts),
                    metric=metric,
                    score=None if failed else score,
                    reason=draw(st.none() | texts),
                    error=draw(texts) if failed else None,
                    judge=draw(st.none() | texts),
                )
            )
    summaries = {
        m: MetricSummary(
            metric=m,
            n=sum(i.metric == m for i in items),
            n_scored=sum(i.metric == m and not i.failed for i in items),
            n_failed=sum(i.metric == m and i.failed for i in items),
            mean=draw(st.none() | st.floats(0.0, 1.0)),
            judge=draw(st.none() | texts),
        )
        for m in metrics
    }
    return EvalRun(
        run_id=draw(texts),
        started_at="2026-12-01T00:00:00+00:00",
        duration_s=1.0,
        judge=draw(texts),
        embedder="minilm",
        repeats=1,
        summaries=summaries,
        accounting={"total": {}},
        results=items,
    )


@FUZZ
@given(runs())
def test_any_run_renders_as_text_without_markup_of_its_data(run: EvalRun) -> None:
    html = render_report(run)
    page = Tags()
    page.feed(html)
    page.close()
    names = {tag for tag, _ in page.tags}
    assert not names & {"img", "iframe", "object", "embed"}
    assert not [a for _, a in page.tags if any(k.startswith("on") for k in a)]
    scripts = [a for tag, a in page.tags if tag == "script"]
    cases = {c for i in run.results for c in [i.case_id]}
    blocks = ["contextlens-data", "cl-rows", *(f"cl-case-{i}" for i in range(len(cases)))]
    assert scripts == [*({"type": "application/json", "id": b} for b in blocks), {}]
    rows = html.split('<script type="application/json" id="cl-rows">')[1].split("</script>")[0]
    assert "<" not in rows and ">" not in rows and "&" not in rows
    shown = {r[0] for r in json.loads(rows)["rows"]}
    assert {item.case_id for item in run.results} <= shown


def _no_markup_of_the_data(html: str) -> None:
    page = Tags()
    page.feed(html)
    page.close()
    names = {tag for tag, _ in page.tags}
    assert not names & {"img", "iframe", "object", "embed"}
    assert not [a for _, a in page.tags if any(k.startswith("on") for k in a)]
    scripts = [a for tag, a in page.tags if tag == "script"]
    assert scripts[-1] == {} and all(s.get("type") == "application/json" for s in scripts[:-1])
    for block in html.split('<script type="application/json"')[1:]:
        body = block.split(">", 1)[1].split("</script>")[0]
        assert "<" not in body and ">" not in body and "&" not in body
        json.loads(body)


@FUZZ
@given(runs(), runs(), texts, texts)
def test_any_comparison_and_trend_render_as_text(
    a: EvalRun, b: EvalRun, name: str, tag: str
) -> None:
    """Ids, metric names, run names and tags of any text stay text on both pages."""
    from contextlens.compare import compare
    from contextlens.report.comparison import render_comparison
    from contextlens.report.trend import render_trend
    from contextlens.trend import trend

    b.started_at = "2026-12-01T00:00:09+00:00"
    for run in (a, b):
        run.config = run.config.model_copy(update={"name": name, "tags": {tag: tag}})
    comparison = compare(a, b, mc_samples=100)
    _no_markup_of_the_data(render_comparison(comparison))
    _no_markup_of_the_data(render_trend(trend([a, b], mc_samples=100)))
