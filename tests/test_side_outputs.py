"""The files a run writes for CI (``--junit``, ``--markdown``, ``--csv``) where people point
them: a device or a pipe is written into, never replaced; the cases' own file is refused; a
CSV that cannot be written stops before a JUnit file could say the run passed; a report that
cannot be written fails the run in the store."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "examples" / "data" / "rag_cases.jsonl"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return Path(shutil.copy(DATA, tmp_path / "cases.jsonl"))


def run(run_cli, data: Path, tmp_path: Path, *args: object) -> tuple[int, str]:
    """A quick offline run of ``data`` into ``tmp_path / "o"`` with ``args``."""
    return run_cli("run", data, "-m", "context-similarity", "--out", tmp_path / "o", *args)


def test_a_link_to_a_device_stays_a_link_to_the_device(run_cli, data, tmp_path):
    link = tmp_path / "null"
    link.symlink_to(os.devnull)
    code, text = run(run_cli, data, tmp_path, "--csv", link)
    assert code == 0, text
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)


def test_a_named_pipe_gets_the_junit_file_and_stays_a_pipe(run_cli, data, tmp_path):
    pipe = tmp_path / "junit.fifo"
    os.mkfifo(pipe)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()), daemon=True)
    reader.start()
    code, text = run(run_cli, data, tmp_path, "--junit", pipe)
    reader.join(10)
    assert code == 0, text
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    assert got and got[0].startswith(b"<?xml")


def test_a_named_pipe_nobody_reads_is_said_not_waited_on(run_cli, data, tmp_path):
    pipe = tmp_path / "nobody.fifo"
    os.mkfifo(pipe)
    code, text = run(run_cli, data, tmp_path, "--junit", pipe)
    assert code == 2 and "a pipe that nobody reads" in text and str(pipe) in text


@pytest.mark.parametrize("option", ["--csv", "--junit", "--markdown"])
def test_the_file_the_cases_come_from_is_not_an_output(run_cli, data, tmp_path, option):
    before = data.read_bytes()
    code, text = run(run_cli, data, tmp_path, option, data)
    assert code == 2 and "the file the cases are read from" in text
    assert data.read_bytes() == before
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").glob("*/results.jsonl"))


def test_a_csv_that_cannot_be_written_leaves_no_junit_file_saying_passed(run_cli, data, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, so nothing can be made under it")
    junit = tmp_path / "junit.xml"
    code, text = run_cli(
        "run", data, "-m", "context-similarity", "--out", tmp_path / "o",
        "--junit", junit, "--csv", blocked / "items.csv",
    )  # fmt: skip
    assert code == 2 and "blocked" in text
    assert not junit.exists()


def test_a_report_that_cannot_be_written_fails_the_run_in_the_store(
    run_cli, data, tmp_path, monkeypatch
):
    from contextlens.report import html

    def in_the_way(run, path, **kwargs):
        target = Path(path) / "report.html"
        target.mkdir(parents=True)  # a folder where the page goes
        return real(run, path, **kwargs)

    real = html.write_report
    monkeypatch.setattr(html, "write_report", in_the_way)
    store = tmp_path / "runs.sqlite"
    code, text = run_cli(
        "run", data, "-m", "context-similarity", "--out", tmp_path / "o", "--store", store
    )
    assert code == 2 and "report.html: a folder is there" in text
    assert not list((tmp_path / "o").glob("*/report.html/report.html"))
    with sqlite3.connect(store) as conn:
        [(status, error)] = conn.execute("SELECT status, error FROM runs").fetchall()
    assert status == "failed" and "report.html" in error
