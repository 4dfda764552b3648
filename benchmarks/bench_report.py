"""The run report at 10,000 cases: how long the run, the page and the browser take.

Run: .venv/bin/python benchmarks/bench_report.py [--cases 10000]

Scores ``--cases`` test cases offline (contextual relevancy and context similarity, each
case with its three chunks and ``meta``) into a fresh folder, writes ``report.html``, and,
where Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package are there,
opens the page headless and times: the page until its script is done, opening a case on its
chunks and verdicts, and filtering the cases by a ``meta`` value. Prints one table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from contextlens import ModelTestCase, evaluate
from contextlens.report import write_report

DOMAINS = ("billing", "shipping", "returns", "hours")


def case(i: int) -> ModelTestCase:
    domain = DOMAINS[i % len(DOMAINS)]
    return ModelTestCase(
        name=f"case-{i:05d}",
        input=f"What is the {domain} policy for order {i % 50}?",
        actual_output=f"The {domain} policy allows {i % 30} days.",
        expected_output=f"{domain.title()} within 30 days.",
        retrieval_context=[
            f"{domain.title()} policy: customers have 30 days.",
            f"Order {i % 50} ships from the warehouse.",
            "Parking is free.",
        ],
        meta={"domain": domain, "channel": "chat" if i % 3 else "email"},
    )


def browse(page: Path, n: int) -> dict[str, float] | str:
    """Seconds to open the page, open a case and filter by meta; or why it was not done."""
    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import Select, WebDriverWait
    except ImportError:
        return "selenium is not installed"
    if chromium is None or driver is None:
        return "chromium or chromedriver is missing (apt-get install chromium chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(driver), options=options)
    try:
        wait = WebDriverWait(browser, 120)
        start = time.perf_counter()
        browser.get(page.as_uri())
        wait.until(lambda b: b.execute_script("return document.documentElement.dataset.ready"))
        opened = time.perf_counter() - start
        start = time.perf_counter()
        browser.find_element(By.CSS_SELECTOR, "tr[data-case]").click()
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "[data-role=chunk]"))
        case_s = time.perf_counter() - start
        start = time.perf_counter()
        Select(browser.find_element(By.CSS_SELECTOR, "[data-role=meta-field]")).select_by_value(
            "domain"
        )
        Select(browser.find_element(By.CSS_SELECTOR, "[data-role=meta-value]")).select_by_value(
            "billing"
        )
        billing = f"{len(range(0, n, len(DOMAINS))):,} of {n:,} shown"
        wait.until(
            lambda b: b.find_element(By.CSS_SELECTOR, "[data-role=case-count]").text == billing
        )
        filter_s = time.perf_counter() - start
        return {"open the page": opened, "open a case": case_s, "filter by meta": filter_s}
    finally:
        browser.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run = evaluate(
            [case(i) for i in range(args.cases)],
            ["contextual-relevancy", "context-similarity"],
            cache=False,
            progress=False,
            out=tmp,
        )
        run_s = time.perf_counter() - start
        start = time.perf_counter()
        page = write_report(run, Path(run.out_dir or tmp) / "report.html")
        write_s = time.perf_counter() - start
        size = page.stat().st_size
        timings = browse(page, args.cases)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.cases:,} cases, 2 metrics, offline; load average {load}")
    print(f"| step | seconds |\n| --- | ---: |\n| the run | {run_s:.1f} |")
    print(f"| write report.html ({size / 1e6:.1f} MB) | {write_s:.1f} |")
    if isinstance(timings, str):
        print(f"browser not timed: {timings}")
    else:
        for step, seconds in timings.items():
            print(f"| Chromium: {step} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
