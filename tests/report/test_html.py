"""The HTML report: escaping, the numbers shown, the comparison section, no network."""

from __future__ import annotations

import base64
import hashlib
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pydantic import BaseModel

from contextlens.report import render_report, write_report
from contextlens.report.format import fmt_diff, fmt_prob, fmt_score
from contextlens.runner import EvalRun, ItemResult, MetricSummary

SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
HOSTILE = f"{SCRIPT}{IMG} & \"quotes\" 'single' </script><!--"


class Page(HTMLParser):
    """Every start tag with its attributes, and the text of each script element."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self.texts: list[str] = []
        self._pending: dict[str, str | None] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._pending = self.tags[-1][1] if "data-field" in self.tags[-1][1] else None
        if tag == "script":
            self._in_script = dict(attrs)

    def handle_endtag(self, tag: str) -> None:
        self._pending = None
        if tag == "script":
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self.scripts.append((self._in_script, data))
        else:
            self.texts.append(data)
        if self._pending is not None:  # the text an element with data-field shows
            self._pending["#text"] = self._pending.get("#text", "") + data

    def field(self, field: str, **match: str) -> list[dict[str, str | None]]:
        want = {f"data-{k}": v for k, v in match.items()}
        return [
            a
            for _, a in self.tags
            if a.get("data-field") == field and all(a.get(k) == v for k, v in want.items())
        ]


def make_run(n_context: int = 6, **extra: object) -> EvalRun:
    items = [
        ItemResult(case_id=f"s{i}", metric="context", score=0.1 + 0.15 * i, reason=f"ok {i}")
        for i in range(n_context)
    ]
    items += [
        ItemResult(case_id=HOSTILE, metric="precision", score=0.25, reason=f"quoted: {HOSTILE}"),
        ItemResult(case_id="bad-1", metric="precision", score=None, error=f"judge said {IMG}"),
        ItemResult(case_id="ok-1", metric="precision", score=0.75, reason="fine", success=True),
    ]
    summaries = {
        "context": MetricSummary(
            metric="context",
            n=n_context,
            n_scored=n_context,
            n_failed=0,
            mean=0.475,
            ci_low=0.3125,
            ci_high=0.6375,
            ci_level=0.95,
            accounting={
                "calls": 6,
                "prompt_tokens": 1200,
                "completion_tokens": 345,
                "cost": 0.0123,
                "unpriced_calls": 0,
            },
        ),
        "precision": MetricSummary(
            metric="precision",
            n=3,
            n_scored=2,
            n_failed=1,
            mean=0.5,
            ci_low=0.25,
            ci_high=0.75,
            ci_level=0.95,
        ),
    }
    return EvalRun(
        run_id="abc123",
        started_at="2025-01-01T00:00:00+00:00",
        duration_s=12.5,
        judge="offline",
        embedder="minilm",
        repeats=1,
        summaries=summaries,
        accounting={"total": {"calls": 6, "prompt_tokens": 1200, "completion_tokens": 345}},
        results=items,
        **extra,
    )


class Pair(BaseModel):
    case_id: str
    a: float
    b: float
    diff: float


class StandInMetricComparison(BaseModel):
    metric: str
    n_paired: int
    n_unpaired_a: int
    n_unpaired_b: int
    n_failed_a: int
    n_failed_b: int
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_b_better: float | None
    verdict: str
    pairs: list[Pair]


class StandInComparison(BaseModel):
    run_a: str
    run_b: str
    metrics: list[StandInMetricComparison]


def stand_in_comparison() -> StandInComparison:
    pairs = [Pair(case_id=f"s{i}", a=0.5, b=0.5 + d, diff=d) for i, d in enumerate([0.1, 0.2, 0])]
    return StandInComparison(
        run_a="run-a",
        run_b="run-b",
        metrics=[
            StandInMetricComparison(
                metric="context",
                n_paired=3,
                n_unpaired_a=2,
                n_unpaired_b=1,
                n_failed_a=1,
                n_failed_b=0,
                mean_a=0.5,
                mean_b=0.6,
                mean_diff=0.1,
                ci_low=0.01234,
                ci_high=0.19,
                p_b_better=0.9731,
                verdict=f"B is better {SCRIPT}",
                pairs=pairs,
            )
        ],
    )


def text_of(attrs: dict[str, str | None]) -> str:
    """The text shown by the element with these attributes (up to its first child tag)."""
    return (attrs.get("#text") or "").strip()


@pytest.fixture
def html() -> str:
    return render_report(make_run(), title=f"Title {SCRIPT}")


def rows_of(html: str) -> dict:
    """The case explorer's rows block of a page."""
    [body] = [b for attrs, b in Page(html).scripts if attrs.get("id") == "cl-rows"]
    return json.loads(body)


def test_hostile_text_is_escaped_and_nothing_of_it_is_markup(html: str) -> None:
    assert SCRIPT not in html and "<img" not in html
    assert "alert(1)" in html  # shown, as text
    page = Page(html)
    assert not [t for t, _ in page.tags if t in ("img", "iframe", "object", "embed")]
    assert not [a for _, a in page.tags if any(k.startswith("on") for k in a)]
    # our scripts only: the JSON blocks (data, rows, one per case) and the page's code
    scripts = [a for t, a in page.tags if t == "script"]
    blocks = ["contextlens-data", "cl-rows", *(f"cl-case-{i}" for i in range(9))]
    assert scripts == [*({"type": "application/json", "id": b} for b in blocks), {}]
    for attrs, body in page.scripts:
        if attrs:
            assert "<" not in body and ">" not in body and "&" not in body
    assert HOSTILE in [r[0] for r in rows_of(html)["rows"]]  # the case id, exactly as given
    text = "".join(page.texts)
    assert f"judge said {IMG}" in text  # the failure reason
    assert f"Title {SCRIPT}" in text


def test_json_for_scripts_cannot_close_its_element() -> None:
    run = make_run()
    run.summaries[HOSTILE] = MetricSummary(metric=HOSTILE, n=0, n_scored=0, n_failed=0, mean=None)
    html = render_report(run)
    page = Page(html)
    [data] = [body for attrs, body in page.scripts if attrs.get("id") == "contextlens-data"]
    assert "<" not in data and ">" not in data and "&" not in data
    parsed = json.loads(data)
    assert HOSTILE in parsed["summaries"]
    assert parsed["summaries"]["context"]["mean"] == 0.475


def test_numbers_carry_stable_attributes(html: str) -> None:
    page = Page(html)
    shown = {}
    for field in ("mean", "ci_low", "ci_high", "n", "n_scored", "n_failed", "tokens", "cost"):
        [attrs] = page.field(field, metric="context")
        shown[field] = text_of(attrs)
    assert shown["mean"] == fmt_score(0.475) == "0.475"
    assert shown["ci_low"] == "0.312" and shown["ci_high"] == "0.637"
    assert shown["n"] == "6" and shown["n_failed"] == "0"
    assert shown["tokens"] == "1,545"
    assert shown["cost"] == "$0.0123"
    [failed] = page.field("n_failed", metric="precision")
    assert failed["data-value"] == "1"
    [mean] = page.field("mean", metric="context")
    assert float(mean["data-value"] or "nan") == 0.475


def test_failed_items_are_marked_with_their_reason(html: str) -> None:
    rows = rows_of(html)
    at = rows["metrics"].index("precision")
    failed = [r[0] for r in rows["rows"] if r[2][at] == "failed"]
    assert failed == ["bad-1"]
    assert "1 failed item" in html
    assert f"judge said {IMG}" in "".join(Page(html).texts)


def test_histogram_and_the_case_explorer_use_every_item() -> None:
    html = render_report(make_run(n_context=12))
    rows = rows_of(html)["rows"]
    assert [r[0] for r in rows if r[0].startswith("s")] == [f"s{i}" for i in range(12)]
    assert "Distribution of 12 item scores" in html
    assert "<tr data-case" not in html  # rows are built by the page, a page at a time


def test_comparison_section_with_a_stand_in() -> None:
    html = render_report(make_run(), comparison=stand_in_comparison())
    page = Page(html)

    def shown(field: str) -> str:
        [attrs] = page.field(field, comparison="context")
        return text_of(attrs)

    assert shown("mean_diff") == fmt_diff(0.1) == "+0.100"
    assert shown("ci_low") == "+0.012" and shown("ci_high") == "+0.190"
    assert shown("p_b_better") == fmt_prob(0.9731) == "97.3%"
    assert shown("n_unpaired_a") == "2" and shown("n_failed_a") == "1"
    assert "B is better &lt;script&gt;" in html and SCRIPT not in html
    assert "Distribution of 3 paired differences" in html
    assert "run-a" in html and "run-b" in html


def test_comparison_section_with_the_real_compare() -> None:
    compare = pytest.importorskip("contextlens.compare")
    a, b = make_run(), make_run()
    b.results = [
        r.model_copy(update={"score": min(1.0, r.score + 0.1)}) if r.score is not None else r
        for r in b.results
    ]
    comparison = compare.compare(a, b, mc_samples=500)
    html = render_report(b, comparison=comparison)
    page = Page(html)
    context = comparison.metric("context")
    [attrs] = page.field("mean_diff", comparison="context")
    assert text_of(attrs) == fmt_diff(context.mean_diff)
    [attrs] = page.field("verdict", comparison="context")
    assert context.verdict.split(" (")[0] in html
    assert page.field("n_paired", comparison="precision")


def test_no_network_resources(html: str) -> None:
    full = render_report(make_run(), comparison=stand_in_comparison())
    for page_html in (html, full):
        assert "http://" not in page_html and "https://" not in page_html
        assert "@import" not in page_html and "url(" not in page_html
        for _, attrs in Page(page_html).tags:
            for key in ("src", "href", "action", "srcset", "poster", "data"):
                value = attrs.get(key)
                assert value is None or value.startswith("#"), (key, value)


def test_a_url_in_the_data_is_text_not_a_link() -> None:
    run = make_run()
    run.results[0] = run.results[0].model_copy(
        update={"reason": "see https://example.com/x.png and <a href='https://evil'>x</a>"}
    )
    page = Page(render_report(run))
    assert not [a for _, a in page.tags if (a.get("href") or "").startswith("http")]


def test_csp_allows_only_the_page_script() -> None:
    html = render_report(make_run())
    page = Page(html)
    [csp] = [a["content"] for t, a in page.tags if a.get("http-equiv") == "Content-Security-Policy"]
    [code] = [body for attrs, body in page.scripts if not attrs]
    digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in (csp or "")
    assert "default-src 'none'" in (csp or "")


def test_write_report_to_a_file_or_a_folder(tmp_path: Path) -> None:
    path = write_report(make_run(), tmp_path / "sub" / "r.html")
    assert path == tmp_path / "sub" / "r.html" and path.read_text().startswith("<!doctype html>")
    assert write_report(make_run(), tmp_path) == tmp_path / "report.html"


def test_empty_and_odd_runs_render() -> None:
    run = make_run()
    run.results = [
        ItemResult(case_id="nan", metric="context", score=float("nan")),
        ItemResult(case_id="big", metric="context", score=3.0, reason="out of range"),
    ]
    run.summaries["context"] = run.summaries["context"].model_copy(update={"mean": None})
    html = render_report(run)
    assert "no scored items" in html  # precision has no rows now
    empty = EvalRun(
        run_id="e",
        started_at="",
        duration_s=0.0,
        judge="offline",
        embedder="",
        repeats=1,
        summaries={},
        accounting={},
    )
    assert "This run has no metric results" in render_report(empty)


def test_results_stream_from_results_jsonl(tmp_path: Path) -> None:
    run = make_run()
    with open(tmp_path / "results.jsonl", "w") as handle:
        for item in run.results:
            handle.write(item.model_dump_json() + "\n")
    streamed = EvalRun.model_validate(
        {**run.model_dump(exclude={"results"}), "out_dir": str(tmp_path)}
    )
    assert [(r.case_id, r.score) for r in streamed.results] == [
        (r.case_id, r.score) for r in run.results
    ]
    html = render_report(streamed)
    assert [r[0] for r in rows_of(html)["rows"]][:2] == ["s0", "s1"]
    assert str(tmp_path / "results.jsonl") in html


def test_each_metric_names_the_judge_it_used() -> None:
    run = make_run()
    run.summaries["context"].judge = "openai-compat:judge-a"
    run.summaries["precision"].judge = "langchain:judge-b"
    page = Page(render_report(run))
    shown = [a.get("#text", "").strip() for a in page.field("judge")]
    assert "judge openai-compat:judge-a" in shown and "langchain:judge-b" in shown
