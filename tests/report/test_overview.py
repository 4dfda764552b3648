"""What the report shows first: each metric's worst cases (its failures, then its lowest
scores) as one-line links to the case, with the case's input and answer; the rows of the
case table carry them too."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import unquote

from contextlens.cases import CaseRecord
from contextlens.report import render_report
from contextlens.report.cases import EXCERPT, WORST, case_table
from contextlens.results import EvalRun, ItemResult, MetricSummary
from contextlens.schemas import Batch, Dataset, ModelTestCase
from support.runs import RELEVANCY, SIMILARITY, synthetic_run

HOSTILE = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"


class Worst(HTMLParser):
    """The worst-case links of a page, per metric section they are in, with their text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[dict[str, str]] = []
        self._where = ""
        self._row: dict[str, str] | None = None
        self._depth = 0
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if "data-overview" in found:
            self._where = "overview"
        elif found.get("data-role") == "lowest":
            self._where = "lowest"
        if tag == "a" and "data-worst-case" in found:
            self._row = {**found, "where": self._where, "#text": ""}
            self.rows.append(self._row)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None:
            self._row["#text"] += data

    def of(self, metric: str, where: str = "overview") -> list[dict[str, str]]:
        return [r for r in self.rows if r["data-metric"] == metric and r["where"] == where]


def _run(items: list[ItemResult], records: list[CaseRecord], mark: float | None = 0.5) -> EvalRun:
    metrics = dict.fromkeys(i.metric for i in items)
    return EvalRun(
        run_id="r",
        started_at="",
        duration_s=0,
        judge="j",
        embedder="e",
        repeats=1,
        summaries={
            m: MetricSummary(metric=m, n=1, n_scored=1, n_failed=0, mean=0.5, threshold=mark)
            for m in metrics
        },
        accounting={},
        results=items,
    ).with_cases(records)


def test_each_metric_lists_its_failures_then_its_lowest_scores() -> None:
    run = synthetic_run(300)
    page = Worst(render_report(run))
    similarity = page.of(SIMILARITY)
    assert len(similarity) == WORST
    failed = sorted(r.case_id for r in run.results if r.metric == SIMILARITY and r.failed)
    assert len(failed) > 2
    # failures take at most two places, so the lowest scores are shown too
    assert [r["data-worst-case"] for r in similarity[:2]] == failed[:2]
    assert [r["data-status"] for r in similarity] == ["failed", "failed", "below", "below", "below"]
    scored = sorted(
        (r.score, r.case_id) for r in run.results if r.metric == SIMILARITY and r.score is not None
    )
    assert [r["data-worst-case"] for r in similarity[2:]] == [c for _, c in scored[:3]]
    # each row: the score, the status, the case, its input and the start of its answer
    row = similarity[2]
    case = next(c.case for c in run.iter_cases() if c.case_id == row["data-worst-case"])
    assert f"{scored[0][0]:.3f}" in row["#text"] and "below pass mark" in row["#text"]
    assert case.input in row["#text"] and case.actual_output in row["#text"]
    assert row["href"] == f"#case={row['data-worst-case']}&metric={SIMILARITY}"
    assert "JudgeError" in similarity[0]["title"]  # why it failed
    # the metric's own section lists its ten lowest scores, no failure among them
    lowest = page.of(SIMILARITY, "lowest")
    assert [r["data-worst-case"] for r in lowest] == [c for _, c in scored[:10]]
    relevancy = page.of(RELEVANCY)
    assert len(relevancy) == WORST and {r["data-status"] for r in relevancy} <= {"pass", "below"}


def test_a_metric_with_nothing_wrong_says_so_and_links_still_escape() -> None:
    records = [
        CaseRecord(case_id=HOSTILE, case=ModelTestCase(input=HOSTILE, actual_output="fine")),
        CaseRecord(case_id="b&c=d#e", case=ModelTestCase(input="q", actual_output="a")),
    ]
    items = [
        ItemResult(case_id=HOSTILE, metric="m", score=0.9, success=True),
        ItemResult(case_id="b&c=d#e", metric="m", score=0.7, success=True),
    ]
    html = render_report(_run(items, records))
    assert "<script>alert(1)" not in html and "<img" not in html
    assert 'data-role="none-wrong"' in html
    rows = Worst(html).of("m")
    assert [r["data-worst-case"] for r in rows] == ["b&c=d#e", HOSTILE]
    href = rows[0]["href"]
    assert href == "#case=b%26c%3Dd%23e&metric=m"  # each part encoded: the link parses back
    assert unquote(href.split("&")[0].removeprefix("#case=")) == "b&c=d#e"
    assert unquote(rows[1]["href"].split("&")[0].removeprefix("#case=")) == HOSTILE


def test_rows_carry_the_start_of_the_input_and_the_answer_on_one_line() -> None:
    long = "word " * 200
    records = [
        CaseRecord(
            case_id="rag",
            case=ModelTestCase(
                input="When\n\ndo you   open?", actual_output=long, meta={"a": {"b": 1}}
            ),
        ),
        CaseRecord(
            case_id="chat",
            case=Dataset(
                session_id="chat",
                assistant_id="bot",
                context="Open 9 to 5.",
                conversation=[
                    Batch(qa_id="q1", query="Hi?", assistant="Hello."),
                    Batch(qa_id="q2", query="Open?", assistant="At 9."),
                ],
            ),
        ),
    ]
    items = [ItemResult(case_id=c.case_id, metric="m", score=0.5) for c in records]
    table = case_table(_run(items, records), ["m"])
    rag, chat = table.rows()
    assert rag[4] == "When do you open?"
    assert len(rag[5]) == EXCERPT and rag[5].endswith("…") and "\n" not in rag[5]
    assert chat[4] == "Hi? (+1 more turn)" and chat[5] == "Hello."
    # a meta value that is not a text is shown readably, never as JSON
    assert rag[3] == {"a": "b: 1"} and table.details()[0]["meta"] == {"a": "b: 1"}
