"""The screenshots of the Reports and CI page: the top of a run report, a case opened from
its first worst-case link, and (with ``--compare``) a comparison of two runs.

Run: .venv/bin/python docs/screenshots.py [--out docs] [--compare]

Scores a few hundred shop-assistant cases offline, some answers made worse and one case left
out (with ``--compare``, also as they were, and compares the two), writes the report, and has
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, through Selenium) take, 1400
pixels wide, ``report.png`` (the top of the report: each metric's worst cases),
``report-case.png`` (the case its first worst-case link opens, with its evidence over its
texts) and, with ``--compare``, ``compare.png``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from contextlens import ModelTestCase, compare, evaluate
from contextlens.report import write_report
from contextlens.report.comparison import write_comparison

TOPICS = [
    (
        "returns",
        "Can I return a kettle I bought three weeks ago?",
        "Yes, unused items can be returned within 30 days with the receipt.",
        "Unused items can be returned within 30 days of purchase, with the receipt.",
        [
            "Returns: items may be returned within 30 days of purchase.",
            "Condition: products must be unused and in their original packaging.",
            "Our stores are open from 9 am to 6 pm.",
        ],
    ),
    (
        "shipping",
        "Do you charge for delivery?",
        "Delivery is free on orders over $50; below that it costs $4.99.",
        "Free delivery over $50, otherwise $4.99.",
        [
            "Shipping: free standard delivery on orders over $50.",
            "Orders under $50 pay a flat $4.99 delivery fee.",
            "Gift cards cannot be used for delivery fees.",
        ],
    ),
    (
        "warranty",
        "How long is the warranty on the K2 kettle?",
        "The K2 kettle has a two-year warranty from the date of purchase.",
        "Two years from the date of purchase.",
        [
            "The K2 kettle has a two-year warranty from the date of purchase.",
            "Damage caused by limescale is not covered.",
            "Parking at the store is free for customers.",
        ],
    ),
    (
        "hours",
        "Are you open on Sundays?",
        "Yes, on Sundays we are open from 10 am to 4 pm.",
        "Sundays 10 am to 4 pm.",
        [
            "Opening hours: Monday to Saturday 9 am to 6 pm.",
            "Sunday: 10 am to 4 pm.",
            "Returns need the original receipt.",
        ],
    ),
]
WORSE = {
    "returns": "You can return anything at any time, no receipt needed.",
    "shipping": "Delivery always costs $15.",
    "warranty": "The K2 kettle has a lifetime warranty that covers limescale.",
    "hours": "We are closed on Sundays.",
}


def cases(worse: bool) -> list[ModelTestCase]:
    out = []
    for i in range(200):
        domain, question, answer, expected, chunks = TOPICS[i % len(TOPICS)]
        if worse and i % 7 == 3:
            answer = WORSE[domain]
        out.append(
            ModelTestCase(
                name=f"{domain}-{i:03d}",
                input=question,
                actual_output=answer,
                expected_output=expected,
                retrieval_context=chunks[i % 3 :] + chunks[: i % 3],
                meta={"domain": domain, "channel": "chat" if i % 3 else "email"},
            )
        )
    return out[:-1] if worse else out


#: The width of every screenshot, in CSS pixels.
WIDTH = 1400


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--compare", action="store_true", help="also take compare.png")
    args = parser.parse_args()
    metrics = ["faithfulness", "contextual-relevancy", "context-precision"]
    names = ["report.png", "report-case.png"] + (["compare.png"] if args.compare else [])
    with tempfile.TemporaryDirectory() as tmp:
        runs = [
            evaluate(cases(worse), metrics, cache=False, progress=False, out=tmp, name="shop")
            for worse in ([False, True] if args.compare else [True])
        ]
        after = runs[-1]
        report = write_report(after, Path(tmp) / "report.html", title="Shop assistant")
        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
            options.add_argument(arg)
        options.add_argument(f"--window-size={WIDTH},1000")
        driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
        browser = webdriver.Chrome(service=Service(driver), options=options)
        wait = WebDriverWait(browser, 60)
        ready = "return document.documentElement.dataset.ready"
        try:
            browser.get(report.as_uri())
            wait.until(lambda b: b.execute_script(ready))
            browser.save_screenshot(str(args.out / "report.png"))
            browser.find_element(By.CSS_SELECTOR, "a[data-worst-case]").click()
            view = browser.find_element(By.CSS_SELECTOR, "[data-role=case-view]")
            wait.until(lambda b: view.is_displayed())
            browser.set_window_size(WIDTH, 1500)  # down to the last chunk, its sentence marked
            browser.save_screenshot(str(args.out / "report-case.png"))
            if args.compare:
                page = write_comparison(compare(runs[0], after), tmp)
                browser.set_window_size(WIDTH, 1150)
                browser.get(page.as_uri())
                wait.until(lambda b: b.execute_script(ready))
                browser.save_screenshot(str(args.out / "compare.png"))
        finally:
            browser.quit()
    for name in names:
        print(args.out / name, f"{(args.out / name).stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
