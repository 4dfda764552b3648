"""Run folders and run ids from elsewhere are read as untrusted files: a run id is checked
wherever it is read, a page named after run ids stays in its folder, only regular files of
bounded size are read (a link to /dev/zero, a FIFO: refused at once, by name), and every
damaged file is a message naming the file and the line, with exit status 2."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from contextlens.compare import compare
from contextlens.errors import InputError
from contextlens.files import OutputError
from contextlens.report.comparison import write_comparison
from contextlens.results import EvalRun
from contextlens.runfiles import (
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    check_run_id,
    confined,
    read_small,
    whole_lines,
)
from contextlens.runner import RunFolder, evaluate, latest_run
from contextlens.schemas import MetricResult, ModelTestCase
from contextlens.store import RunStore, StoreError
from contextlens.store.open import open_run

SRC = Path(__file__).parents[1] / "src"

pytestmark = pytest.mark.skipif(os.name == "nt", reason="FIFOs, devices and symlinks")


class _Length:
    """A stand-in metric: the question's length, at once."""

    name = "length"
    case_type = ModelTestCase

    async def score(self, case: ModelTestCase, services: object) -> MetricResult:
        return MetricResult(metric=self.name, score=len(case.input) / 100, reason="length")


class _Embedder:
    name = "none"

    async def embed(self, texts):  # pragma: no cover - never called
        raise AssertionError("no embedding is needed")


def made_run(out: Path, n: int = 3) -> Path:
    """A real run folder (results.jsonl, cases.jsonl, summary.json) under ``out``."""
    cases = [ModelTestCase(input=f"question {i}", name=f"c{i}") for i in range(n)]
    run = evaluate(cases, [_Length()], embedder=_Embedder(), cache=False, progress=False, out=out)
    return Path(run.out_dir)


def cli(*args: object, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``contextlens ARGS`` in a process of its own, which must end within ``timeout``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    env["CONTEXTLENS_STORE"] = str(cwd / "store.sqlite3")
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "contextlens", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def files_under(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: a file's bytes, a link's target, a FIFO's kind."""
    found: dict[str, bytes | str] = {}
    for path in root.rglob("*"):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "-> " + os.readlink(path)
        elif path.is_fifo():
            found[key] = "fifo"
        elif path.is_file():
            found[key] = path.read_bytes()
    return found


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out"
    return made_run(out), made_run(out)


def edit_summary(folder: Path, **changes: object) -> None:
    path = folder / "summary.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


# --- the command, on folders damaged as the issue says ---------------------------------------


def test_a_traversal_run_id_is_refused_and_nothing_is_written_outside(tmp_path, two_runs):
    a, b = two_runs
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("the site's own page")
    edit_summary(b, run_id="../../../../site/index")
    before = files_under(tmp_path)
    done = cli("compare", a, b, "--out", tmp_path / "comparisons", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{b / 'summary.json'}:" in done.stderr
    assert "is not a run id" in done.stderr and "Traceback" not in done.stderr
    assert files_under(tmp_path) == before  # not a file made, changed or removed
    assert (site / "index.html").read_text() == "the site's own page"


def test_a_results_file_that_links_to_dev_zero_is_refused_at_once(tmp_path, two_runs):
    a, b = two_runs
    (b / "results.jsonl").unlink()
    (b / "results.jsonl").symlink_to("/dev/zero")
    done = cli("compare", a, b, "--out", tmp_path / "pages", cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{b / 'results.jsonl'}: a character device, not a regular file" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "pages").exists() or not any((tmp_path / "pages").iterdir())


def test_a_fifo_in_a_folder_is_refused_without_waiting_on_it(tmp_path, two_runs):
    a, b = two_runs
    (a / "results.jsonl").unlink()
    os.mkfifo(a / "results.jsonl")  # no writer ever opens it: opening it to read would block
    done = cli("compare", a, b, "--out", tmp_path / "pages", cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{a / 'results.jsonl'}: a named pipe (FIFO), not a regular file" in done.stderr
    (b / "summary.json").unlink()
    os.mkfifo(b / "summary.json")
    done = cli("trend", a, b, "--out", tmp_path / "pages", cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{b / 'summary.json'}: a named pipe (FIFO)" in done.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[]", "it holds a JSON array, not an object"),
        ('"run"', "it holds a JSON string, not an object"),
        ("{", "summary.json:1: not the summary of a run (not JSON: Expecting property name"),
        ('{"run_id": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
        ('{"run_id": 7}', "7 is not a run id"),
    ],
)
def test_a_summary_that_holds_no_run_is_a_message_naming_it(tmp_path, two_runs, text, said):
    a, b = two_runs
    (b / "summary.json").write_text(text)
    done = cli("compare", a, b, "--out", tmp_path / "pages", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{b / 'summary.json'}:" in done.stderr and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("[]\n", "not a result: Input should be an object"),
        ("{not json\n", "not a result: Invalid JSON"),
        ('{"case_id": "c9", "metric": "length"}\n', "field 'score': not a result: Field required"),
    ],
)
def test_a_damaged_results_line_names_the_file_and_the_line(tmp_path, two_runs, line, said):
    a, b = two_runs
    results = b / "results.jsonl"
    results.write_text(results.read_text() + line)
    done = cli("compare", a, b, "--out", tmp_path / "pages", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{results}:4: " in done.stderr and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_damaged_cases_line_names_the_file_and_the_line(two_runs):
    a, _ = two_runs
    cases = a / "cases.jsonl"
    cases.write_text('{"case_id": "c0"}\n' + cases.read_text())
    run = EvalRun.from_folder(a)
    with pytest.raises(InputError) as raised:
        run.cases()
    assert raised.value.file == str(cases) and raised.value.line == 1
    assert "not a case" in str(raised.value) and raised.value.field == "case"


def test_a_latest_that_points_out_of_its_folder_is_refused(tmp_path, two_runs):
    a, _ = two_runs
    out = a.parent
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("summary.json", "results.jsonl", "cases.jsonl"):
        (elsewhere / name).write_bytes((a / name).read_bytes())
    (out / "latest").unlink()
    (out / "latest").symlink_to("../elsewhere")
    with pytest.raises(InputError, match=re.escape("'../elsewhere' is not a run id")) as raised:
        latest_run(out)
    assert raised.value.file == str(out / "latest")
    done = cli("compare", a, out, "--out", tmp_path / "pages", cwd=tmp_path)
    assert done.returncode == 2 and f"{out / 'latest'}: " in done.stderr, done.stderr
    (out / "latest").unlink()
    (out / "latest").write_text(str(elsewhere) + "\n")  # the text form, as on Windows
    with pytest.raises(InputError, match="is not a run id"):
        latest_run(out)
    (out / "latest").write_text(a.name + "\n")
    assert latest_run(out) == a


def test_a_link_to_a_regular_file_is_read_and_the_runs_compare(tmp_path, two_runs):
    a, b = two_runs
    kept = tmp_path / "kept-results.jsonl"
    (b / "results.jsonl").rename(kept)
    (b / "results.jsonl").symlink_to(kept)
    result = compare(str(a), str(b))
    assert result.metric("length").n_paired == 3
    done = cli("compare", a, b, "--out", tmp_path / "pages", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (tmp_path / "pages").iterdir()] == [f"compare-{a.name}-{b.name}.html"]


# --- the run store --------------------------------------------------------------------------


def test_a_store_row_whose_run_id_is_no_run_id_is_a_store_error(tmp_path, two_runs):
    a, _ = two_runs
    store = RunStore(tmp_path / "runs.sqlite3")
    store.record(EvalRun.from_folder(a))
    store.close()
    with sqlite3.connect(tmp_path / "runs.sqlite3") as conn:
        conn.execute("UPDATE runs SET run_id = '../../x'")
    store = RunStore(tmp_path / "runs.sqlite3")
    for read in (lambda: store.load("../"), store.list_runs):
        with pytest.raises(StoreError, match=r"holds a run whose id '\.\./\.\./x' is not a run id"):
            read()
    done = cli("runs", "--store", tmp_path / "runs.sqlite3", cwd=tmp_path)
    assert done.returncode == 2 and "is not a run id" in done.stderr, done.stderr


def test_an_unfinished_runs_folder_from_the_store_is_read_as_a_foreign_one(tmp_path, two_runs):
    a, _ = two_runs
    store = RunStore(tmp_path / "runs.sqlite3")
    store.start(a.name, out_dir=a)
    (a / "summary.json").unlink()
    (a / "results.jsonl").unlink()
    (a / "results.jsonl").symlink_to("/dev/zero")
    run = open_run(a, store)
    with pytest.raises(InputError, match="a character device, not a regular file"):
        list(run.iter_results())


# --- the rules themselves, on real files ----------------------------------------------------


def test_run_ids_are_checked_against_the_documented_pattern():
    for good in ("3f2a9c1e0b7d", "tracked-20260101-120000-abc123", "a", "A.b_c-d", "x" * 64):
        assert check_run_id(good) == good
    for bad in ("", ".hidden", "..", "../x", "a/b", "a\\b", "x" * 65, "a b", "é", None, 3):
        with pytest.raises(InputError, match="is not a run id"):
            check_run_id(bad, file="f.json")


def test_a_page_name_made_of_run_ids_is_confined_to_its_folder(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    assert confined(folder, "compare-a-b.html") == folder / "compare-a-b.html"
    for name in ("../x.html", "a/../../x.html", ".hidden.html", "", "..", "a\\b.html"):
        with pytest.raises(OutputError, match="is not a plain file name"):
            confined(folder, name)


def test_a_comparison_of_runs_held_in_memory_writes_no_page_outside(tmp_path, two_runs):
    a, b = two_runs
    first, second = EvalRun.from_folder(a), EvalRun.from_folder(b)
    traversing = second.model_copy(update={"run_id": "../../escaped"})
    folder = tmp_path / "pages"
    folder.mkdir()
    with pytest.raises(OutputError, match="is not a plain file name"):
        write_comparison(compare(first, traversing), folder)
    assert list(tmp_path.rglob("*escaped*")) == [] and list(folder.iterdir()) == []
    page = write_comparison(compare(first, second), folder)
    assert page.parent == folder and page.is_file()


def test_lines_are_bounded_and_read_as_far_as_the_file_was_long(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"x" * 5000 + b"\n" + b'{"b": 2}\n')
    with pytest.raises(InputError, match="longer than") as raised:
        list(whole_lines(path, line_limit=4096))
    assert raised.value.line == 2
    assert [n for n, _ in whole_lines(path, line_limit=8192)] == [1, 2, 3]
    path.write_bytes(b'{"a": 1}\n{"cut')  # a killed writer's last line
    assert [t for _, t in whole_lines(path)] == ['{"a": 1}\n']
    path.write_bytes(b'{"a": 1}\n' * 200)
    with pytest.raises(InputError, match="1,800 bytes, more than the 1 KiB"):
        list(whole_lines(path, limit=1024))
    path.write_bytes(b'{"a": 1}\n\xff\xfe\n')
    with pytest.raises(InputError, match="not UTF-8") as raised:
        list(whole_lines(path))
    assert raised.value.line == 2
    assert MAX_LINE_BYTES < MAX_FILE_BYTES


def test_small_files_are_bounded_regular_files(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("{}" + " " * 4096)
    with pytest.raises(InputError, match="4,098 bytes, more than the 4 KiB"):
        read_small(path, 4096)
    assert read_small(path, 8192).strip() == "{}"
    (tmp_path / "gone.json").symlink_to(tmp_path / "nothing")
    with pytest.raises(InputError, match="a symbolic link to nothing"):
        read_small(tmp_path / "gone.json")
    with pytest.raises(InputError, match="a folder, not a regular file"):
        read_small(tmp_path)


def test_a_dry_run_reads_the_runs_of_its_out_folder_without_waiting_on_a_fifo(tmp_path):
    from contextlens.runner.dry_run import measured_completions

    out = tmp_path / "out"
    entry = {"metric": "m", "judge": "j", "calls": 4, "completion_tokens": 100}
    for name in ("good", "fifo", "zero", "deep"):
        (out / name).mkdir(parents=True)
    (out / "good" / "summary.json").write_text(json.dumps({"accounting": {"entries": [entry]}}))
    os.mkfifo(out / "fifo" / "summary.json")
    (out / "zero" / "summary.json").symlink_to("/dev/zero")
    (out / "deep" / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    found: list[dict[str, float]] = []
    reader = threading.Thread(
        target=lambda: found.append(measured_completions(out, {"m": "j"})), daemon=True
    )
    reader.start()
    reader.join(timeout=30)
    waiting = reader.is_alive()
    if waiting:  # let it go: a writer's open ends the reader's wait
        os.close(os.open(out / "fifo" / "summary.json", os.O_WRONLY | os.O_NONBLOCK))
    assert not waiting, "the estimate waits on a FIFO"
    assert found == [{"m": 25.0}]  # the good run's, the others passed over


def test_a_run_id_that_could_not_be_read_back_is_refused_before_any_work(tmp_path):
    cases = [ModelTestCase(input="q", name="c0")]
    metric = _Length()
    with pytest.raises(InputError, match="is not a run id"):
        evaluate(cases, [metric], embedder=_Embedder(), progress=False,
                 out=RunFolder(tmp_path, "../escaped"))  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    store = RunStore(tmp_path / "runs.sqlite3")
    with pytest.raises(InputError, match="is not a run id"):
        store.start("my run")
    run = EvalRun.from_folder(made_run(tmp_path / "out"))
    with pytest.raises(InputError, match="is not a run id"):
        store.record(run.model_copy(update={"run_id": "../x"}))
    assert store.list_runs() == []
