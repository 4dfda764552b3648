"""The HTML report in a real browser: headless Chromium renders it, runs its script, and
runs nothing from the evaluated data; driven through Selenium, a report of 10,000 cases
opens, a case opens on its chunks and verdicts, the cases filter by a ``meta`` field, and a
comparison lists the regressed cases first.

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
    from selenium.webdriver.support.ui import Select

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
