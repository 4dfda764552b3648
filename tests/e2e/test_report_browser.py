"""The HTML report in a real browser: headless Chromium renders it, runs its script, and
runs nothing from the evaluated data.

Chromium comes from Debian (``apt-get install chromium``); when it is missing the test
installs it if it runs as root, and is skipped (saying why) only where it cannot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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
INSTALL_TIMEOUT = 900
NAMES = ("chromium", "chromium-browser")


def _find() -> str | None:
    for name in NAMES:
        path = shutil.which(name) or (
            f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None
        )
        if path:
            return path
    return None


def _install() -> str:
    """Install Debian's chromium; the reason it cannot be done otherwise."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root, so it cannot be installed here (apt-get install chromium)"
    if shutil.which("apt-get") is None:
        return "no apt-get on this machine to install it with"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, env=env, timeout=INSTALL_TIMEOUT
            )
        except subprocess.TimeoutExpired:
            return f"{' '.join(command)} took longer than {INSTALL_TIMEOUT} s"
        if done.returncode != 0:
            return f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}"
    return ""


@pytest.fixture(scope="module")
def chromium() -> str:
    path = _find()
    if path is None:
        why = _install()
        path = _find()
        if path is None:
            pytest.skip(f"headless Chromium is not available: {why or 'not found after install'}")
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
    failed = [a for t, a in dom.tags if t == "tr" and "failed" in a.get("class", "")]
    assert [a["data-case"] for a in failed] == ["nothing-to-compare"]

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
