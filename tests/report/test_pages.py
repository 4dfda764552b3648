"""The comparison page, the trend page and the runs index: what each shows, and that it
stays a self-contained page."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from contextlens.compare import compare
from contextlens.report.comparison import render_comparison, write_comparison
from contextlens.report.index import write_index
from contextlens.report.trend import render_trend
from contextlens.store import RunStore
from contextlens.trend import trend
from support.runs import RELEVANCY, SIMILARITY, synthetic_run


class Tags(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.blocks: dict[str, str] = {}
        self._block: str | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        self.tags.append((tag, found))
        self._block = found.get("id") if found.get("type") == "application/json" else None

    def handle_data(self, data):
        if self._block:
            self.blocks[self._block] = self.blocks.get(self._block, "") + data

    def handle_endtag(self, tag):
        self._block = None


def _pair():
    a = synthetic_run(40, run_id="before", seed=1)
    b = synthetic_run(40, run_id="after", seed=2, shift=-0.2)
    b.summaries[SIMILARITY] = b.summaries[SIMILARITY].model_copy(update={"judge": "judge-b"})
    return a, b


def test_the_comparison_page_warns_and_lists_regressions_first(tmp_path):
    a, b = _pair()
    comparison = compare(a, b)
    path = write_comparison(comparison, tmp_path)
    assert path.name == "compare-before-after.html"
    page = Tags(path.read_text())
    warnings = [t for t in page.tags if t[1].get("data-role") == "warning"]
    assert [w[1]["data-kind"] for w in warnings] == ["judge"]
    changes = json.loads(page.blocks["cl-changes"])
    assert changes["metrics"] == [RELEVANCY, SIMILARITY]
    flags = [r[6] for r in changes["rows"]]
    n = sum(flags)
    assert n and flags == [True] * n + [False] * (len(flags) - n)  # regressions first
    kinds = [r[5] for r in changes["rows"][:n]]
    assert kinds == sorted(kinds, key=lambda k: k != "newly failed")
    regressed = [r[4] for r in changes["rows"] if r[5] == "regressed"]
    assert regressed == sorted(regressed)  # largest drop first


def test_each_comparison_gets_its_own_file(tmp_path):
    a, b = _pair()
    c = synthetic_run(40, run_id="third", seed=3)
    first = write_comparison(compare(a, b), tmp_path)
    second = write_comparison(compare(b, c), tmp_path)
    assert first != second and first.exists() and second.exists()


def test_no_network_in_any_page(tmp_path):
    a, b = _pair()
    html = render_comparison(compare(a, b)) + render_trend(trend([a, b]))
    assert "http://" not in html and "https://" not in html and "url(" not in html


def test_trend_orders_the_runs_in_time_and_compares_the_first_with_the_last():
    runs = [synthetic_run(20, run_id=f"r{i}", seed=i, shift=-0.05 * i) for i in (3, 1, 2)]
    result = trend(runs)
    assert [r.run_id for r in result.runs] == ["r1", "r2", "r3"]
    assert result.metrics == [RELEVANCY, SIMILARITY]
    series = result.series(RELEVANCY)
    assert [p.mean for p in series] == [
        runs[1].summaries[RELEVANCY].mean,
        runs[2].summaries[RELEVANCY].mean,
        runs[0].summaries[RELEVANCY].mean,
    ]
    assert result.first_to_last is not None
    assert (result.first_to_last.run_a, result.first_to_last.run_b) == ("r1", "r3")
    page = Tags(render_trend(result))
    circles = [t for t in page.tags if t[0] == "circle"]
    assert len(circles) == 6  # a mean per run and metric
    rows = [t[1]["data-run"] for t in page.tags if t[0] == "tr" and "data-run" in t[1]]
    assert rows == ["r1", "r2", "r3"]


def test_the_index_links_each_report(tmp_path):
    with RunStore(tmp_path / "runs.sqlite3") as store:
        for i in range(2):
            run = synthetic_run(3, run_id=f"run{i}", seed=i + 1)
            folder = tmp_path / "out" / run.run_id
            folder.mkdir(parents=True)
            (folder / "report.html").write_text("<!doctype html>")
            run.out_dir = str(folder)
            store.record(run)
        store.start("running1", config={"name": "nightly"})
        infos = store.list_runs()
    page_path = write_index(infos, tmp_path / "site" / "index.html")
    page = Tags(page_path.read_text())
    links = [t[1]["href"] for t in page.tags if t[1].get("data-role") == "report-link"]
    assert sorted(links) == ["../out/run0/report.html", "../out/run1/report.html"]
    rows = {t[1]["data-run"]: t[1]["data-status"] for t in page.tags if "data-run" in t[1]}
    assert rows == {"run0": "completed", "run1": "completed", "running1": "running"}
