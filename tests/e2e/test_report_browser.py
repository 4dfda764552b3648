"""The HTML report in a real browser: headless Chromium renders it, runs its script, and
runs nothing from the evaluated data; driven through Selenium, a report of 10,000 cases
opens, a case opens on its chunks and verdicts, the cases filter by a ``meta`` field, and a
comparison lists the regressed cases first. Over a run of every metric: the worst case's
evidence is one click from the top of the page, no case view shows JSON, a deep link
``#case=ID`` opens its case, and the table filters by one metric's status.

Chromium and its driver come from Debian (``apt-get install chromium chromium-driver``);
``make test`` installs them when they are missing and it runs as root; where they are not
installed the tests are skipped, saying so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from contextlens import Batch, Context, ContextPrecision, Dataset
from contextlens.report import write_report
from contextlens.runner import evaluate
from contextlens.schemas import ModelTestCase

HOSTILE = (
    "<script>document.title='PWNED'</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
)
BROWSER_TIMEOUT = 60
INSTALL = "apt-get install chromium chromium-driver, or make test as root"
NAMES = ("chromium", "chromium-browser")


def _find() -> str | None:
    for name in NAMES:
        path = shutil.which(name) or (
            f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None
        )
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    path = _find()
    if path is None:
        pytest.skip(f"headless Chromium is not installed ({INSTALL})")
    return path


def _browse(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=BROWSER_TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


class Dom(HTMLParser):
    """Tags, attributes, the text of each ``data-field`` element, the visible text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.title = ""
        self._open: dict[str, str] | None = None
        self._in: str = ""
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        entry = {k: v or "" for k, v in attrs}
        self.tags.append((tag, entry))
        self._open = entry if "data-field" in entry else None
        self._in = tag

    def handle_endtag(self, tag: str) -> None:
        self._open, self._in = None, ""

    def handle_data(self, data: str) -> None:
        if self._in == "title" and not any(t == "body" for t, _ in self.tags):
            self.title += data  # the document's title, not the plots' <title>s
        if self._in not in ("script", "style", "title"):
            self.text.append(data)
        if self._open is not None:
            self._open["#text"] = self._open.get("#text", "") + data

    def shown(self, metric: str, field: str) -> str:
        [attrs] = [
            a
            for _, a in self.tags
            if a.get("data-metric") == metric and a.get("data-field") == field
        ]
        return attrs.get("#text", "").strip()


def _cases() -> list[Dataset | ModelTestCase]:
    context = "The shop opens at 9 am and closes at 5 pm. Returns are accepted within 30 days."
    answers = [
        "We open at 9 am.",
        "You can return items within 30 days.",
        HOSTILE + " We are open 24/7.",
        "We close at 5 pm.",
    ]
    sessions = [
        Dataset(
            session_id=f"session-{i}",
            assistant_id="shop-bot",
            context=context,
            conversation=[Batch(qa_id="q1", query="When are you open?", assistant=answer)],
        )
        for i, answer in enumerate(answers)
    ]
    rag = [
        ModelTestCase(
            input="When do you open?",
            actual_output="We open at 9 am every day.",
            expected_output="The shop opens at 9 am.",
            retrieval_context=["Opening hours: 9 am to 5 pm."],
            name="hours",
        ),
        ModelTestCase(
            input="When do you open?",
            actual_output=HOSTILE,
            expected_output="The shop opens at 9 am.",
            retrieval_context=["Opening hours: 9 am to 5 pm."],
            name=HOSTILE,
        ),
        ModelTestCase(  # an empty context: nothing to compare the output with
            input="Anything?",
            actual_output="Something.",
            context=[],
            name="nothing-to-compare",
        ),
    ]
    return [*sessions, *rag]


def test_report_renders_in_chromium_and_runs_nothing_from_the_data(
    chromium: str, tmp_path: Path
) -> None:
    run = evaluate(
        _cases(),
        [Context(), ContextPrecision()],
        cache=False,
        progress=False,
        out=tmp_path / "run",
    )
    summary = json.loads((Path(run.out_dir) / "summary.json").read_text(encoding="utf-8"))
    assert summary["summaries"]["context-precision"]["n_failed"] == 1
    page = write_report(run, tmp_path / "report.html", title="Shop bot")

    dumped = _browse(
        chromium,
        tmp_path / "profile-dom",
        "--virtual-time-budget=2000",
        "--dump-dom",
        page.as_uri(),
    )
    dom = Dom(dumped.stdout)
    html_attrs = next(a for t, a in dom.tags if t == "html")
    assert html_attrs.get("data-ready") == "1", "the page's own script did not run"

    # nothing from the data ran
    assert "PWNED" not in dom.title and dom.title.strip() == "Shop bot"
    assert not [a for _, a in dom.tags if "data-pwned" in a]
    assert not [t for t, _ in dom.tags if t == "img"]
    text = "".join(dom.text)
    assert HOSTILE in text  # the case named with the hostile answer, shown as text
    assert "document.title=" in text and "onerror=" in text  # quoted in reasons, as text

    # the numbers shown are the summary's, formatted the same way
    for name, s in summary["summaries"].items():
        assert dom.shown(name, "mean") == f"{s['mean']:.3f}"
        assert dom.shown(name, "ci_low") == f"{s['ci_low']:.3f}"
        assert dom.shown(name, "ci_high") == f"{s['ci_high']:.3f}"
        assert dom.shown(name, "n") == f"{s['n']:,}"
        assert dom.shown(name, "n_scored") == f"{s['n_scored']:,}"
        assert dom.shown(name, "n_failed") == f"{s['n_failed']:,}"
    failed = [a for t, a in dom.tags if t == "tr" and a.get("data-status") == "failed"]
    assert [a["data-case"] for a in failed] == ["nothing-to-compare"]  # rows built by the page

    shot = tmp_path / "report.png"
    _browse(
        chromium,
        tmp_path / "profile-shot",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        page.as_uri(),
    )
    assert shot.exists() and shot.stat().st_size > 30_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- driven through Selenium ---------------------------------------------------------------

DRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser(chromium: str):
    """A headless Chromium driven by Debian's chromedriver."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    driver = shutil.which("chromedriver") or (DRIVER if Path(DRIVER).exists() else None)
    if driver is None:
        pytest.skip(f"chromedriver is not installed ({INSTALL})")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1280,1600")
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_page_load_timeout(BROWSER_TIMEOUT)
    yield session
    session.quit()


def _open(browser, page: Path) -> float:
    """Open ``page`` and wait for its script to finish; the seconds it took."""
    from selenium.webdriver.support.ui import WebDriverWait

    start = time.perf_counter()
    browser.get(page.as_uri())
    WebDriverWait(browser, BROWSER_TIMEOUT).until(
        lambda b: b.execute_script("return document.documentElement.dataset.ready") == "1"
    )
    return time.perf_counter() - start


def test_a_report_of_10000_cases_opens_a_case_and_filters_by_meta(browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from support.runs import RELEVANCY, synthetic_run

    run = synthetic_run(10_000)
    page = write_report(run, tmp_path / "report.html")
    seconds = _open(browser, page)
    assert seconds < 30, f"the page took {seconds:.1f} s to open"
    cases = browser.find_element(By.ID, "cases")
    rows = cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    assert len(rows) == 100  # a page at a time
    assert cases.find_element(By.CSS_SELECTOR, "[data-role=case-count]").text == (
        "10,000 of 10,000 shown"
    )

    # open a case: its chunks, and each statement's verdict laid over its chunk
    row = cases.find_element(By.CSS_SELECTOR, "tr[data-case='case-00007']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
    row.click()
    detail = cases.find_element(By.CSS_SELECTOR, "[data-role=case-detail]")
    chunks = detail.find_elements(By.CSS_SELECTOR, "[data-role=chunk]")
    assert [c.find_element(By.CSS_SELECTOR, ".text").text for c in chunks] == [
        "Opening hours of shop 7: 9 am to 5 pm.",
        "Parking is free.",
    ]
    expected = next(r for r in run.results if r.case_id == "case-00007" and r.metric == RELEVANCY)
    verdicts = chunks[1].find_elements(By.CSS_SELECTOR, "[data-role=verdict]")
    assert [v.get_attribute("data-verdict") for v in verdicts] == [
        expected.details.verdicts[1].verdict
    ]
    assert "Parking is free." in verdicts[0].text and "parking does not say" in verdicts[0].text
    assert detail.find_element(By.CSS_SELECTOR, "[data-role=input]").text.endswith(
        "Question 7: when do you open on day 0?"
    )
    assert browser.execute_script("return location.hash") == "#case=case-00007"
    # the case is a page of its own; Escape goes back to the table
    from selenium.webdriver.common.keys import Keys

    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    view = cases.find_element(By.CSS_SELECTOR, "[data-role=case-view]")
    WebDriverWait(browser, BROWSER_TIMEOUT).until(lambda b: not view.is_displayed())
    assert browser.execute_script("return location.hash") == ""

    # filter by a meta field: only the billing cases remain
    Select(cases.find_element(By.CSS_SELECTOR, "[data-role=meta-field]")).select_by_value("domain")
    Select(cases.find_element(By.CSS_SELECTOR, "[data-role=meta-value]")).select_by_value("billing")
    assert cases.find_element(By.CSS_SELECTOR, "[data-role=case-count]").text == (
        "2,500 of 10,000 shown"
    )
    shown = cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    assert shown and all("domain=billing" in r.text for r in shown)

    # and by status: the items that could not be scored
    Select(cases.find_element(By.CSS_SELECTOR, "[data-role=status-filter]")).select_by_value(
        "failed"
    )
    failed = [
        r.get_attribute("data-case") for r in cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    ]
    assert (
        failed == sorted(f"case-{i:05d}" for i in range(10_000) if i % 97 == 3 and i % 4 == 0)[:100]
    )

    Select(cases.find_element(By.CSS_SELECTOR, "[data-role=status-filter]")).select_by_value("pass")
    passing = cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    assert passing and {r.get_attribute("data-status") for r in passing} == {"pass"}

    # the slice table of the first meta field
    slices = browser.find_elements(By.CSS_SELECTOR, "[data-role=slice-table] tr[data-slice]")
    assert [s.get_attribute("data-slice") for s in slices] == [
        "billing",
        "hours",
        "returns",
        "shipping",
    ]


def test_a_comparison_lists_the_regressed_cases_first(browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By

    from contextlens.compare import compare
    from contextlens.report.comparison import write_comparison
    from support.runs import SIMILARITY, synthetic_run

    a = synthetic_run(300, run_id="before", seed=1)
    b = synthetic_run(300, run_id="after", seed=2, shift=-0.15)
    b.summaries[SIMILARITY] = b.summaries[SIMILARITY].model_copy(
        update={"judge": "openai:gpt-4o-mini"}
    )
    comparison = compare(a, b)
    page = write_comparison(comparison, tmp_path)
    _open(browser, page)
    warnings = browser.find_elements(By.CSS_SELECTOR, "[data-role=warning]")
    assert any(
        w.get_attribute("data-kind") == "judge" and "openai:gpt-4o-mini" in w.text for w in warnings
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "#changes tr[data-change]")
    kinds = [r.get_attribute("data-regression") for r in rows]
    n_regressed = sum(len(m.regressions) for m in comparison.metrics)
    assert n_regressed > 0
    assert kinds[: min(n_regressed, len(rows))] == ["true"] * min(n_regressed, len(rows))
    first = rows[0].find_elements(By.TAG_NAME, "td")
    worst = min(
        (c for m in comparison.metrics for c in m.changes if c.change == "regressed"),
        key=lambda c: c.diff,
    )
    newly_failed = [c for m in comparison.metrics for c in m.changes if c.change == "newly failed"]
    if not newly_failed:
        assert first[0].text == worst.case_id and first[4].text == f"{worst.diff:+.3f}"


def test_cases_not_applicable_or_not_run_are_shown_and_filtered(browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from contextlens.results import ItemResult
    from support.runs import RELEVANCY, synthetic_run

    run = synthetic_run(200)
    chit = {f"case-{i:05d}" for i in range(0, 150, 10)}  # no chunks: relevancy does not apply
    late = {f"case-{i:05d}" for i in range(180, 200)}  # the cost cap stopped the run before
    for at, item in enumerate(run.results):
        if item.case_id in late:
            why = {"not_run": "not run: the cost cap of $0.5 was reached"}
        elif item.case_id in chit and item.metric == RELEVANCY:
            why = {"not_applicable": "not applicable: no retrieved context"}
        else:
            continue
        run.results[at] = ItemResult(case_id=item.case_id, metric=item.metric, score=None, **why)
    run.stopped = "the cost cap of $0.5 was reached"
    page = write_report(run, tmp_path / "report.html")
    _open(browser, page)
    assert "cost cap" in browser.find_element(By.CSS_SELECTOR, "[data-role=stopped]").text
    rate = run.summaries[RELEVANCY].pass_rate
    shown = browser.find_element(
        By.CSS_SELECTOR, f"dd[data-metric='{RELEVANCY}'][data-field='pass_rate']"
    )
    assert shown.text == f"{rate:.0%}"
    cases = browser.find_element(By.ID, "cases")
    status = Select(cases.find_element(By.CSS_SELECTOR, "[data-role=status-filter]"))

    status.select_by_value("not run")
    rows = cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    assert {r.get_attribute("data-case") for r in rows} == late
    assert {r.get_attribute("data-status") for r in rows} == {"not run"}
    cells = rows[0].find_elements(By.CSS_SELECTOR, "td[data-status]")
    assert [c.text for c in cells] == ["not run", "not run"]

    status.select_by_value("not applicable")
    rows = cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    assert {r.get_attribute("data-case") for r in rows} == chit
    row = rows[0]
    cell = row.find_element(By.CSS_SELECTOR, "td[data-status='not applicable']")
    assert cell.text == "n/a"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
    row.click()
    detail = cases.find_element(By.CSS_SELECTOR, "[data-role=case-detail]")
    result = detail.find_element(
        By.CSS_SELECTOR, f"[data-role=metric-result][data-metric='{RELEVANCY}']"
    )
    assert "not applicable" in result.text
    why = result.find_element(By.CSS_SELECTOR, "[data-role=not-scored]")
    assert why.text == "not applicable: no retrieved context"

    # every metric that applies passes: a case relevancy does not apply to counts by the other
    status.select_by_value("pass")
    rows = cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    expected = set()
    for case_id in {r.case_id for r in run.results} - late:
        items = [r for r in run.results if r.case_id == case_id]
        applied = [r for r in items if r.not_applicable is None]
        if applied and all(r.status == "pass" for r in applied):
            expected.add(case_id)
    got = {r.get_attribute("data-case") for r in rows}
    assert got == set(sorted(expected)[:100]) and got & chit
    assert {r.get_attribute("data-status") for r in rows} == {"pass"}


# -- a run of every metric: what went wrong first, each case's evidence, deep links ----------

RAG_METRICS = (
    "faithfulness",
    "context-recall",
    "contextual-relevancy",
    "context-precision-ranked",
    "context-precision",
    "context-similarity",
    "retrieval",
    "rag-diagnostics",
)
CHUNKS = [
    "Returns: items may be returned within 30 days of purchase.",
    "Condition: products must be unused and in their original packaging.",
    "Our stores are open from 9 am to 6 pm.",
]
ANSWERS = [
    "Yes, unused items can be returned within 30 days.",
    "You can return anything at any time, no receipt needed.",
]


@pytest.fixture(scope="module")
def every_metric(tmp_path_factory):
    """A report of every built-in metric, offline, over RAG cases (one named with a script)
    and a session, plus a metric of one's own whose details type the report has no reader
    for; and the run."""
    from contextlens.results import ItemResult
    from contextlens.schemas import MetricDetails

    cases: list[Dataset | ModelTestCase] = [
        ModelTestCase(
            name=HOSTILE if i == 5 else f"case-{i}",
            input="Can I return a kettle I bought three weeks ago?",
            actual_output=ANSWERS[i % 2],
            expected_output="Unused items can be returned within 30 days of purchase.",
            retrieval_context=CHUNKS if i % 3 else CHUNKS[::-1],
            retrieved_ids=["r0", "r1", "r2"] if i % 3 else ["r2", "r1", "r0"],
            relevant_ids={"r0": 2, "r1": 1, "r9": 1},
            meta={"topic": "returns", "shop": "north" if i == 0 else "south"},
            tools_called=[{"name": "orders", "input": {"id": 7}, "output": "Bought 21 days ago."}]
            if i == 2
            else None,
        )
        for i in range(6)
    ]
    cases.append(
        Dataset(
            session_id="session-1",
            assistant_id="shop-bot",
            context="The shop opens at 9 am. Returns are accepted within 30 days.",
            conversation=[
                Batch(
                    qa_id="q1",
                    query="Can I return it?",
                    assistant="Returns are accepted within 30 days. Shipping to Mars is free.",
                )
            ],
        )
    )
    run = evaluate(cases, [*RAG_METRICS, Context()], cache=False, progress=False)
    own = MetricDetails(
        judge="rules",
        steps=[{"name": "lookup", "ok": True}, {"name": "compare", "ok": False}],
        weights={"lookup": 0.25, "compare": 0.75},
    )
    run.results.append(ItemResult(case_id="case-1", metric="own-metric", score=0.4, details=own))
    page = write_report(run, tmp_path_factory.mktemp("every") / "report.html")
    return run, page


def _view(browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    view = browser.find_element(By.CSS_SELECTOR, "[data-role=case-view]")
    WebDriverWait(browser, BROWSER_TIMEOUT).until(
        lambda b: view.is_displayed() and view.find_elements(By.CSS_SELECTOR, "[data-case]")
    )
    return view.find_element(By.CSS_SELECTOR, "[data-role=case-detail]")


def test_the_worst_case_s_evidence_is_one_click_from_the_top(browser, every_metric) -> None:
    from selenium.webdriver.common.by import By

    run, page = every_metric
    _open(browser, page)
    assert browser.execute_script("return window.scrollY") == 0
    for metric in ("faithfulness", "context-precision-ranked"):
        items = [r for r in run.results if r.metric == metric and r.score is not None]
        lowest = min(r.score for r in items)
        card = browser.find_element(By.CSS_SELECTOR, f"[data-overview='{metric}']")
        first = card.find_element(By.CSS_SELECTOR, "a.worst")
        worst = first.get_attribute("data-worst-case")
        assert next(r for r in items if r.case_id == worst).score == lowest
        assert first.location["y"] < 1600  # on the first screens, not under the metric sections
        assert "Can I return a kettle" in first.text  # its input, and the start of its answer
        first.click()  # one click
        detail = _view(browser)
        assert detail.get_attribute("data-case") == worst
        result = detail.find_element(By.CSS_SELECTOR, "[data-role=metric-result].focused")
        assert result.get_attribute("data-metric") == metric
        top = browser.execute_script("return arguments[0].getBoundingClientRect().top", result)
        assert 0 <= top < browser.execute_script("return innerHeight")  # in view, no scrolling
        tables = [
            t.text for t in result.find_elements(By.CSS_SELECTOR, "[data-role=evidence-table]")
        ]
        assert tables and ("CLAIMS" in tables[0].upper() or "BY RANK" in tables[0].upper())
        browser.back()
        browser.execute_script("window.scrollTo(0, 0)")


def test_every_case_view_shows_readable_evidence_and_no_json(browser, every_metric) -> None:
    from urllib.parse import quote

    from selenium.webdriver.common.by import By

    run, page = every_metric
    _open(browser, page)
    seen: set[str] = set()
    for case_id in dict.fromkeys(r.case_id for r in run.results):
        browser.get(f"{page.as_uri()}#case={quote(case_id, safe='')}")
        detail = _view(browser)
        assert detail.get_attribute("data-case") == case_id
        text = detail.text
        assert '{"' not in text and '":' not in text, (case_id, text)
        shown = {
            r.get_attribute("data-metric")
            for r in detail.find_elements(By.CSS_SELECTOR, "[data-role=metric-result]")
        }
        assert shown == {r.metric for r in run.results if r.case_id == case_id}
        seen |= shown
    assert seen == {*RAG_METRICS, "context", "own-metric"}
    assert browser.title != "PWNED" and not browser.find_elements(By.TAG_NAME, "img")

    # faithfulness: a claim of the answer marked with its verdict, its sentence in its chunk
    browser.get(f"{page.as_uri()}#case=case-1")
    detail = _view(browser)
    item = next(r for r in run.results if r.case_id == "case-1" and r.metric == "faithfulness")
    claim = item.details.claims[0]
    [mark] = detail.find_elements(By.CSS_SELECTOR, "[data-role=output] mark")
    assert mark.text == claim.claim and "bad" in mark.get_attribute("class")  # not supported
    chunk = detail.find_element(By.CSS_SELECTOR, f"[data-role=chunk][data-chunk='{claim.chunk}']")
    assert chunk.find_elements(By.CSS_SELECTOR, ".text mark")
    assert chunk.find_element(By.CSS_SELECTOR, "[data-role=claim]").get_attribute(
        "data-metric"
    ) == ("faithfulness")
    # ranked verdicts by rank, on their chunks and in rank order
    ranked = next(
        r for r in run.results if r.case_id == "case-1" and r.metric == "context-precision-ranked"
    )
    on_chunks = [
        c.find_element(By.CSS_SELECTOR, "[data-role=rank-verdict]").get_attribute("data-verdict")
        for c in detail.find_elements(By.CSS_SELECTOR, "[data-role=chunk]")
    ]
    assert on_chunks == [v.verdict for v in sorted(ranked.details.verdicts, key=lambda v: v.chunk)]
    # retrieval: the relevant ids marked on the list, the one not retrieved named
    hits = [
        h.get_attribute("data-relevant")
        for h in detail.find_elements(By.CSS_SELECTOR, "[data-role=chunk] [data-role=hit]")
    ]
    assert hits == ["true", "true", "false"]
    retrieval = detail.find_element(
        By.CSS_SELECTOR, "[data-role=metric-result][data-metric='retrieval']"
    )
    assert "relevant, not retrieved" in retrieval.text and "r9" in retrieval.text
    # a details type without a reader: a table of its records and its values by key
    own = detail.find_element(
        By.CSS_SELECTOR, "[data-role=metric-result][data-metric='own-metric']"
    )
    assert "lookup" in own.text and "compare" in own.text and "weights · compare" in own.text
    # rag-diagnostics: each answer claim's kind marked in the answer
    diagnostics = detail.find_element(
        By.CSS_SELECTOR, "[data-role=metric-result][data-metric='rag-diagnostics']"
    )
    assert "hallucination" in diagnostics.text and "context utilization" in diagnostics.text

    # a case's tool calls: shown with the case, and the claims resting on them
    browser.get(f"{page.as_uri()}#case=case-2")
    detail = _view(browser)
    [call] = detail.find_elements(By.CSS_SELECTOR, "[data-role=tool-call]")
    assert call.get_attribute("data-tool") == "tools_called[0] (orders)"
    assert "Bought 21 days ago." in call.text
    faithful = detail.find_element(
        By.CSS_SELECTOR, "[data-role=metric-result][data-metric='faithfulness']"
    )
    assert "claims resting on a tool output" in faithful.text

    # the session: its least supported claim marked in the reply, its evidence in the context
    browser.get(f"{page.as_uri()}#case=session-1")
    detail = _view(browser)
    turn = detail.find_element(By.CSS_SELECTOR, "[data-role=turn][data-qa=q1]")
    assert "Shipping to Mars is free." in [m.text for m in turn.find_elements(By.TAG_NAME, "mark")]
    assert detail.find_elements(By.CSS_SELECTOR, "[data-role=system-context] mark")


def test_a_deep_link_opens_its_case_and_the_table_filters_per_metric(browser, every_metric):
    from urllib.parse import quote

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    run, page = every_metric
    # a deep link, the hostile id too: opened, shown as text, nothing of it run
    _open(browser, page)
    browser.get(f"{page.as_uri()}#case={quote(HOSTILE, safe='')}")
    detail = _view(browser)
    assert detail.get_attribute("data-case") == HOSTILE
    assert HOSTILE in detail.text and browser.title != "PWNED"
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-pwned]")
    # the case before it in the list (it is the last), then back to the table
    assert not browser.find_element(By.CSS_SELECTOR, "[data-role=case-next]").is_enabled()
    browser.find_element(By.CSS_SELECTOR, "[data-role=case-prev]").click()
    WebDriverWait(browser, BROWSER_TIMEOUT).until(
        lambda b: b.execute_script("return location.hash") == "#case=case-4"
    )
    assert _view(browser).get_attribute("data-case") == "case-4"
    browser.find_element(By.CSS_SELECTOR, "[data-role=case-close]").click()
    view = browser.find_element(By.CSS_SELECTOR, "[data-role=case-view]")
    WebDriverWait(browser, BROWSER_TIMEOUT).until(lambda b: not view.is_displayed())
    # an id not in the report says so
    browser.get(f"{page.as_uri()}#case=nobody")
    WebDriverWait(browser, BROWSER_TIMEOUT).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, "[data-role=case-missing]")
    )
    browser.find_element(By.CSS_SELECTOR, "[data-role=case-close]").click()

    # the status of one metric, in a table of the cases' input and answer
    cases = browser.find_element(By.ID, "cases")
    Select(cases.find_element(By.CSS_SELECTOR, "[data-role=status-filter]")).select_by_value(
        "below"
    )
    Select(cases.find_element(By.CSS_SELECTOR, "[data-role=status-metric]")).select_by_visible_text(
        "faithfulness"
    )
    rows = cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    below = [r.case_id for r in run.results if r.metric == "faithfulness" and r.status != "pass"]
    assert {r.get_attribute("data-case") for r in rows} == set(below) and below
    assert all(ANSWERS[1][:20] in r.text and "Can I return" in r.text for r in rows)
    row_height = rows[0].size["height"]
    assert row_height < 60, row_height  # one case, one or two lines
    # sorted by a metric's column
    Select(cases.find_element(By.CSS_SELECTOR, "[data-role=status-filter]")).select_by_value("")
    cases.find_element(By.CSS_SELECTOR, "th[data-metric-column='retrieval'] button").click()
    at = [c.text for c in cases.find_elements(By.CSS_SELECTOR, "th[data-metric-column]")].index(
        "retrieval"
    )
    shown = [
        r.find_elements(By.CSS_SELECTOR, "td.num")[at].text
        for r in cases.find_elements(By.CSS_SELECTOR, "tr[data-case]")
    ]
    numbers = [float(t) for t in shown if t not in ("n/a", "—")]
    assert numbers == sorted(numbers) and len(numbers) == 6

    # a slice of one case: its value, no interval
    Select(browser.find_element(By.CSS_SELECTOR, "[data-role=slice-field]")).select_by_value("shop")
    north = browser.find_element(By.CSS_SELECTOR, "[data-role=slice-table] tr[data-slice=north]")
    cell = north.find_element(By.CSS_SELECTOR, "td[data-metric='faithfulness']")
    assert "(n = 1)" in cell.text and "[" not in cell.text


# -- a comparison's changes, a case in A and B, a trend's labels -----------------------------


def _renamed(run, old: str, new: str):
    """``run`` with its case ``old`` named ``new`` (its items and its case)."""
    from contextlens.cases import CaseRecord

    run.results = [
        r.model_copy(update={"case_id": new}) if r.case_id == old else r for r in run.results
    ]
    cases = [CaseRecord(case_id=new if c.case_id == old else c.case_id, case=c.case)
             for c in run.iter_cases()]  # fmt: skip
    return run.with_cases(cases)


def test_from_a_regression_to_its_a_b_view_in_one_click(browser, tmp_path) -> None:
    from urllib.parse import unquote

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from contextlens.compare import compare
    from contextlens.report.comparison import default_folder, write_comparison
    from support.runs import SIMILARITY, moved_run, synthetic_run

    a = _renamed(synthetic_run(40, run_id="before"), "case-00005", HOSTILE)
    b = moved_run(a, run_id="after", moves={HOSTILE: -0.45, "case-00011": -0.2}, wobble=0.01)
    for run in (a, b):
        folder = tmp_path / "out" / run.run_id
        folder.mkdir(parents=True)
        write_report(run, folder / "report.html")
        run.out_dir = str(folder)
    comparison = compare(a, b)
    folder = default_folder(comparison)
    folder.mkdir()
    page = write_comparison(comparison, folder)
    _open(browser, page)
    # the summary fits its card at 1200 pixels: no verdict cut off, nothing to scroll to
    browser.set_window_size(1200, 1600)
    wrap = browser.find_element(By.CSS_SELECTOR, ".summary-wrap")
    assert browser.execute_script(
        "return arguments[0].scrollWidth <= arguments[0].clientWidth", wrap
    )
    edge = wrap.rect["x"] + wrap.rect["width"]
    for verdict in browser.find_elements(
        By.CSS_SELECTOR, "[data-comparison-row] [data-field=verdict]"
    ):
        assert verdict.rect["x"] + verdict.rect["width"] <= edge and verdict.text
    browser.set_window_size(1280, 1600)
    rows = browser.find_elements(By.CSS_SELECTOR, "#changes tr[data-change]")
    assert [r.get_attribute("data-case") for r in rows[:2]] == [HOSTILE, "case-00011"]
    assert [r.get_attribute("data-regression") for r in rows] == ["true", "true", "false"]
    assert rows[2].get_attribute("data-change") == "failed in both"  # the wobble: within noise

    rows[0].find_element(By.CSS_SELECTOR, "[data-role=open-ab]").click()  # one click
    view = browser.find_element(By.CSS_SELECTOR, "[data-role=ab-view]")
    WebDriverWait(browser, BROWSER_TIMEOUT).until(lambda b: view.is_displayed())
    detail = view.find_element(By.CSS_SELECTOR, "[data-role=ab-detail]")
    assert detail.get_attribute("data-case") == HOSTILE and HOSTILE in detail.text
    assert browser.title != "PWNED" and not browser.find_elements(By.TAG_NAME, "img")
    hashed = browser.execute_script("return location.hash")
    assert hashed.startswith("#case=") and "<" not in hashed
    assert unquote(hashed) == f"#case={HOSTILE}&metric={SIMILARITY}"
    # each metric's score in A and in B, the regressed one first
    scores = detail.find_element(By.CSS_SELECTOR, "[data-role=ab-scores] tr[data-metric]")
    item = {
        run.run_id: next(r for r in run.results if r.case_id == HOSTILE and r.metric == SIMILARITY)
        for run in (a, b)
    }
    assert (
        scores.find_element(By.CSS_SELECTOR, "[data-side=a]").text == f"{item['before'].score:.3f}"
    )
    assert (
        scores.find_element(By.CSS_SELECTOR, "[data-side=b]").text == f"{item['after'].score:.3f}"
    )
    # the answers side by side: A's at the left of B's, on one line
    answers = {
        c.get_attribute("data-side"): c
        for c in detail.find_elements(By.CSS_SELECTOR, "[data-row=output] .ab-cell")
    }
    assert set(answers) == {"a", "b"}
    left, right = answers["a"].rect, answers["b"].rect
    assert left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 2
    assert answers["a"].find_element(By.CSS_SELECTOR, "[data-role=output]").text
    # each run's evidence on its own chunks, read as the run report reads it
    for side, run in (("a", "before"), ("b", "after")):
        notes = detail.find_elements(
            By.CSS_SELECTOR, f"[data-role=chunk][data-side={side}] [data-role=chunk-value]"
        )
        shown = item[run].details.query_context_similarity.contexts_score[0]
        assert notes and f"query similarity {shown:.3f}" in notes[0].text
    text = detail.text
    assert '{"' not in text and '":' not in text  # no raw JSON
    # to the case in B's own report, by its relative link
    link = detail.find_element(By.CSS_SELECTOR, "a[data-role=report-b]")
    assert link.get_attribute("href") == (  # a relative link, resolved by the browser
        (tmp_path / "out" / "after" / "report.html").as_uri() + hashed
    )
    link.click()
    report = _view(browser)
    assert report.get_attribute("data-case") == HOSTILE
    focused = report.find_element(By.CSS_SELECTOR, "[data-role=metric-result].focused")
    assert focused.get_attribute("data-metric") == SIMILARITY
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-pwned]")


def test_trend_labels_tell_three_runs_on_one_day_apart(browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By

    from contextlens.report.trend import write_trend
    from contextlens.trend import trend
    from support.runs import synthetic_run

    runs = [synthetic_run(30, run_id=f"run{i}", seed=i + 1) for i in range(3)]
    for run, at, tag in zip(runs, ("09:00:05", "09:00:41", "17:30:00"), ("main", HOSTILE, "pr"),
                            strict=True):  # fmt: skip
        run.started_at = f"2026-03-01T{at}+00:00"
        run.config = run.config.model_copy(update={"tags": {"branch": tag}})
    page = write_trend(trend(runs), tmp_path / "trend.html")
    _open(browser, page)
    charts = browser.find_elements(By.CSS_SELECTOR, "[data-trend-metric]")
    assert len(charts) == 2
    assert abs(charts[0].rect["y"] - charts[1].rect["y"]) < 2  # a grid, side by side
    for chart in charts:
        svg = chart.find_element(By.TAG_NAME, "svg").rect
        labels = chart.find_elements(By.CSS_SELECTOR, "text.run-label")
        assert [t.text for t in labels] == ["09:00:05", "09:00:41", "17:30:00"]
        for label in labels:  # each whole, inside its chart
            box = label.rect
            assert svg["x"] <= box["x"] and box["x"] + box["width"] <= svg["x"] + svg["width"]
        assert len(chart.find_elements(By.CSS_SELECTOR, "[data-series=pass]")) == 3
    key = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "[data-role=run-key] li")]
    assert len(set(key)) == 3 and "nightly" in key[0] and "branch=main" in key[0]
    assert HOSTILE in key[1] and browser.title != "PWNED"
    assert "2026-03-01 09:00:41 UTC" in key[1]
