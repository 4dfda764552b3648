"""The comparison page, the trend page and the runs index: what each shows, and that it
stays a self-contained page."""

from __future__ import annotations

import json
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

from contextlens.compare import compare
from contextlens.report.comparison import default_folder, render_comparison, write_comparison
from contextlens.report.index import write_index
from contextlens.report.trend import default_folder as trend_folder
from contextlens.report.trend import render_trend, run_labels
from contextlens.store import RunStore
from contextlens.trend import RunPoint, trend
from support.runs import RELEVANCY, SIMILARITY, moved_run, synthetic_run


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


# -- what a comparison says of each case, and where it goes -----------------------------------


def _in_folders(tmp_path, *runs):
    """The runs, each in a folder ``out/<run id>`` with its report."""
    from contextlens.report import write_report

    for run in runs:
        folder = tmp_path / "out" / run.run_id
        folder.mkdir(parents=True)
        write_report(run, folder / "report.html")
        run.out_dir = str(folder)
    return runs


def _blocks(html: str) -> dict[str, str]:
    return Tags(html).blocks


def test_a_changed_case_opens_a_and_b_and_links_each_run_s_report(tmp_path):
    a = synthetic_run(30, run_id="before")
    b = moved_run(a, run_id="after", moves={"case-00005": -0.4, "case-00009": 0.3})
    _in_folders(tmp_path, a, b)
    comparison = compare(a, b)
    folder = default_folder(comparison)
    assert folder == tmp_path / "out" / "comparisons"  # beside the runs
    folder.mkdir()
    path = write_comparison(comparison, folder)
    blocks = _blocks(path.read_text())
    data = json.loads(blocks["cl-changes"])
    assert data["reports"] == {"a": "../before/report.html", "b": "../after/report.html"}
    assert data["sides"] == {"a": "nightly (before)", "b": "nightly (after)"}
    rows = [r for r in data["rows"] if r[5] != "unchanged" or r[4]]
    assert [(r[1], r[5]) for r in rows[:2]] == [
        ("case-00005", "regressed"),
        ("case-00009", "improved"),
    ]
    assert all(r[5] == "failed in both" for r in rows[2:])  # the items neither run scored
    views = {r[1]: r[8] for r in data["rows"]}
    assert views["case-00005"] >= 0 and views["case-00000"] == -1  # unchanged: links only
    side = json.loads(blocks[f"cl-side-{views['case-00005']}"])
    assert side["a"]["id"] == side["b"]["id"] == "case-00005"
    assert side["a"]["output"] == a.cases()["case-00005"].case.actual_output
    for run, shown in ((a, side["a"]), (b, side["b"])):
        item = next(r for r in run.results if r.case_id == "case-00005" and r.metric == SIMILARITY)
        [result] = [m for m in shown["metrics"] if m["metric"] == SIMILARITY]
        assert result["score"] == item.score
        assert result["chunks"]["0"][0]["label"] == "query similarity"  # its evidence, read
    assert sum(k.startswith("cl-side-") for k in blocks) == len({r[1] for r in rows})


def test_the_page_says_which_run_is_a_and_each_metric_s_tolerance():
    a = synthetic_run(30, run_id="before")
    b = moved_run(a, run_id="after", moves={"case-00005": -0.4}, wobble=0.02)
    comparison = compare(a, b)
    page = Tags(render_comparison(comparison))
    html = render_comparison(comparison)
    assert (
        "<title>contextlens comparison: A = nightly (before), B = nightly (after)</title>" in html
    )
    said = {
        t[1]["data-tolerance"]: t[1]["data-basis"] for t in page.tags if "data-tolerance" in t[1]
    }
    assert said == {RELEVANCY: "floor", SIMILARITY: "differences"}
    m = comparison.metric(SIMILARITY)
    assert m.tolerance.how in unescape(html) and f"±{m.tolerance.value:.3f}" in html
    assert [c.case_id for c in m.regressions] == ["case-00005"] and m.n_within_noise > 20
    rows = json.loads(page.blocks["cl-changes"])["rows"]
    assert sum(r[7] for r in rows) == m.n_within_noise  # each flagged within noise


def test_where_pages_go_unless_told(tmp_path):
    a, b = _pair()
    assert default_folder(compare(a, b)) == Path("contextlens-out") / "comparisons"
    a.out_dir, b.out_dir = str(tmp_path / "x" / "before"), str(tmp_path / "y" / "after")
    assert default_folder(compare(a, b)) == tmp_path / "y" / "comparisons"  # B's
    assert trend_folder(trend([a, b])) == tmp_path / "y" / "trends"


def test_only_so_many_cases_open_side_by_side(monkeypatch):
    import contextlens.report.comparison as page

    a = synthetic_run(20, run_id="before")
    b = moved_run(a, run_id="after", moves={f"case-{i:05d}": -0.3 for i in (1, 2, 4)})
    monkeypatch.setattr(page, "MAX_VIEWS", 2)
    html = render_comparison(compare(a, b))
    assert sum(k.startswith("cl-side-") for k in _blocks(html)) == 2
    assert "The first 2 changed cases open side by side here; the other 2" in html


# -- a trend's runs and charts -------------------------------------------------------------


def _points(*times: str) -> list[RunPoint]:
    return [
        RunPoint(run_id=f"r{i}", started_at=t, name="nightly", tags={"branch": f"b{i}"})
        for i, t in enumerate(times)
    ]


def test_trend_labels_tell_runs_apart():
    same_day = run_labels(
        _points(
            "2026-03-01T09:00:05+00:00", "2026-03-01T09:00:41+00:00", "2026-03-01T17:30:00+00:00"
        )
    )
    assert [x.axis for x in same_day] == ["09:00:05", "09:00:41", "17:30:00"]  # a minute shared
    assert same_day[1].full == "#2 · nightly · branch=b1 · 2026-03-01 09:00:41 UTC · run r1"
    minutes = run_labels(_points("2026-03-01T09:00:05+00:00", "2026-03-01T11:30:00+02:00"))
    assert [x.axis for x in minutes] == ["09:00", "09:30"]  # in UTC
    days = run_labels(_points("2026-03-01T09:00:00+00:00", "2026-03-04T09:00:00+00:00"))
    assert [x.axis for x in days] == ["03-01 09:00", "03-04 09:00"]
    years = run_labels(_points("2025-12-31T09:00:00+00:00", "2026-01-02T09:00:00+00:00"))
    assert [x.when for x in years] == ["2025-12-31 09:00", "2026-01-02 09:00"]


def test_the_trend_is_a_small_chart_per_metric_with_pass_rates():
    runs = [synthetic_run(20, run_id=f"r{i}", seed=i) for i in (1, 2, 3)]
    for run, at in zip(runs, ("09:00:05", "09:00:41", "17:30:00"), strict=True):
        run.started_at = f"2026-03-01T{at}+00:00"
    page = Tags(render_trend(trend(runs)))
    charts = [t[1]["data-trend-metric"] for t in page.tags if "data-trend-metric" in t[1]]
    assert charts == [RELEVANCY, SIMILARITY]
    svgs = [t[1] for t in page.tags if t[0] == "svg"]
    assert len(svgs) == 2 and all(s["viewbox"] == "0 0 400 230" for s in svgs)  # small, alike
    rates = [t[1]["data-run"] for t in page.tags if t[1].get("data-series") == "pass"]
    assert rates == ["r1", "r2", "r3"] * 2
    key = [t[1]["data-run"] for t in page.tags if t[0] == "li" and "data-run" in t[1]]
    assert key == ["r1", "r2", "r3"]
