"""Run folders: each run writes into ``OUT/<run id>/``, ``OUT/latest`` names the newest
completed run, concurrent runs never mix, a failed run leaves only its own partial results,
and the run store knows which runs are running, completed, failed or interrupted."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from contextlens.errors import InputError
from contextlens.files import OutputError
from contextlens.runner import RunFolder, evaluate, latest_run
from contextlens.schemas import MetricResult, ModelTestCase
from contextlens.store import RunStore
from contextlens.testing import FakeOpenAIServer


class _Slow:
    """A stand-in metric that yields to the event loop before scoring, so runs interleave."""

    name = "slow"
    case_type = ModelTestCase

    async def score(self, case: ModelTestCase, services: object) -> MetricResult:
        await asyncio.sleep(0.002)
        return MetricResult(metric=self.name, score=len(case.input) / 100, reason="len")


class _Embedder:
    name = "fake"

    async def embed(self, texts):  # pragma: no cover - not called
        return np.zeros((len(texts), 2), dtype=np.float32)


def _cases(tag: str, n: int) -> list[ModelTestCase]:
    return [ModelTestCase(input=f"question {i}", name=f"{tag}-{i}") for i in range(n)]


def _run(cases, out, **kwargs):
    return evaluate(
        cases, [_Slow()], embedder=_Embedder(), cache=False, progress=False, out=out, **kwargs
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_run_writes_into_its_own_folder_and_latest_names_the_newest(tmp_path):
    out = tmp_path / "out"
    first = _run(_cases("a", 3), out)
    second = _run(_cases("b", 2), out)
    assert first.run_id != second.run_id
    for run, n in ((first, 3), (second, 2)):
        folder = out / run.run_id
        assert Path(run.out_dir) == folder
        files = sorted(p.name for p in folder.iterdir())
        assert files == ["cases.jsonl", "results.jsonl", "summary.json"]
        assert len(_lines(folder / "results.jsonl")) == n
        assert json.loads((folder / "summary.json").read_text())["run_id"] == run.run_id
    assert not (out / "results.jsonl").exists() and not (out / "summary.json").exists()
    assert (out / "latest").is_symlink()
    assert os.readlink(out / "latest") == second.run_id  # relative: the folder can move
    assert latest_run(out) == out / second.run_id
    assert [i.case_id for i in first.iter_results()] == ["a-0", "a-1", "a-2"]
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_latest_is_a_text_file_where_symlinks_cannot_be_made(tmp_path, monkeypatch):
    def no_symlinks(*args, **kwargs):
        raise OSError("symbolic links are not supported here")

    monkeypatch.setattr(os, "symlink", no_symlinks)
    out = tmp_path / "out"
    first = _run(_cases("a", 1), out)
    assert (out / "latest").read_text().strip() == first.run_id
    second = _run(_cases("b", 1), out)
    latest = out / "latest"
    assert latest.is_file() and not latest.is_symlink()
    assert latest.read_text().strip() == second.run_id
    assert latest_run(out) == out / second.run_id
    assert latest_run(tmp_path / "nothing-here") is None


def test_two_concurrent_runs_into_one_out_never_mix(tmp_path):
    out = tmp_path / "out"
    runs: dict[str, object] = {}
    errors: list[BaseException] = []
    go = threading.Barrier(2)

    def one(tag: str) -> None:
        try:
            go.wait()
            runs[tag] = _run(_cases(tag, 60), out)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(tag,)) for tag in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert runs["a"].run_id != runs["b"].run_id
    for tag, run in runs.items():
        lines = _lines(Path(run.out_dir) / "results.jsonl")  # every line is whole JSON
        assert sorted(line["case_id"] for line in lines) == sorted(f"{tag}-{i}" for i in range(60))
        assert run.summaries["slow"].n == 60
    assert latest_run(out).name in {runs["a"].run_id, runs["b"].run_id}


def test_a_failed_run_leaves_only_its_own_partial_results(tmp_path):
    out = tmp_path / "out"
    done = _run(_cases("ok", 2), out)

    def cases_then_a_bad_one():
        yield from _cases("partial", 3)
        raise InputError("field 'input': Field required", file="cases.jsonl", line=4)

    with pytest.raises(InputError, match=r"cases\.jsonl:4"):
        _run(cases_then_a_bad_one(), out)
    (failed,) = [p for p in out.iterdir() if p.name not in (done.run_id, "latest")]
    # no summary, no report
    assert sorted(p.name for p in failed.iterdir()) == ["cases.jsonl", "results.jsonl"]
    assert sorted(line["case_id"] for line in _lines(failed / "results.jsonl")) == [
        "partial-0",
        "partial-1",
        "partial-2",
    ]
    assert latest_run(out) == out / done.run_id  # still the last completed run
    assert sorted(p.name for p in (out / done.run_id).iterdir()) == [
        "cases.jsonl",
        "results.jsonl",
        "summary.json",
    ]


def test_a_run_folder_is_used_once(tmp_path):
    folder = RunFolder(tmp_path / "out")
    run = _run(_cases("a", 1), folder)
    assert run.run_id == folder.run_id and Path(run.out_dir) == folder.path
    assert latest_run(tmp_path / "out") is None  # its owner says when it is complete
    folder.complete()
    assert latest_run(tmp_path / "out") == folder.path
    with pytest.raises(OutputError, match=f"{folder.run_id}: it exists already"):
        _run(_cases("b", 1), folder)


# -- the command -----------------------------------------------------------------------

CASE = {
    "input": "What are the opening hours?",
    "actual_output": "We open at 9am.",
    "expected_output": "9am to 5pm.",
    "retrieval_context": ["The shop opens at 9am and closes at 5pm."],
}


@pytest.fixture
def cases_file(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps({**CASE, "id": f"c{i}"}) + "\n" for i in range(3)))
    return path


def test_a_failed_command_run_is_recorded_failed_and_leaves_nothing_stale(
    run_cli, tmp_path, cases_file, monkeypatch
):
    out, store = tmp_path / "out", tmp_path / "runs.sqlite3"
    args = ("run", cases_file, "-m", "context-similarity", "--out", out, "--store", store, "-q")
    code, text = run_cli(*args)
    assert code == 0, text
    (done,) = RunStore(store).list_runs()
    assert done.status == "completed"

    from contextlens import loaders

    real = loaders.load_cases

    def breaks_on_line_3(path):
        kind, cases = real(path)

        def stream():
            for i, case in enumerate(cases):
                if i == 2:
                    raise InputError("field 'input': Field required", file=str(path), line=3)
                yield case

        return kind, stream()

    monkeypatch.setattr(loaders, "load_cases", breaks_on_line_3)
    code, text = run_cli(*args)
    assert code == 2 and "cases.jsonl:3" in text and "Traceback" not in text
    failed, completed = RunStore(store).list_runs()
    assert (failed.status, completed.run_id) == ("failed", done.run_id)
    assert "cases.jsonl:3" in failed.error
    assert failed.out_dir == str(out / failed.run_id)
    left = sorted(p.name for p in (out / failed.run_id).iterdir())
    assert left == ["cases.jsonl", "results.jsonl"]
    assert len(_lines(out / failed.run_id / "results.jsonl")) == 2
    assert latest_run(out) == out / done.run_id
    assert (out / "latest" / "report.html").exists()
    loaded = RunStore(store).load(failed.run_id)  # its partial results, from its folder
    assert sorted(i.case_id for i in loaded.iter_results()) == ["c0", "c1"]
    code, text = run_cli("runs", "--store", store)
    assert code == 0 and "failed" in text and "completed" in text
    assert "cases.jsonl:3" in text  # the error is shown


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_run_shows_as_interrupted_and_its_command_resumes_it(run_cli, tmp_path):
    data = tmp_path / "cases.jsonl"
    data.write_text(
        "".join(
            json.dumps({**CASE, "id": f"c{i}", "actual_output": f"answer-{i}"}) + "\n"
            for i in range(3)
        )
    )
    out, store, cache = tmp_path / "out", tmp_path / "runs.sqlite3", tmp_path / "cache.sqlite3"
    release = threading.Event()

    def reply(request: dict) -> str:  # c0 is judged at once, the others wait
        if "answer-0" not in json.dumps(request["messages"]):
            release.wait(30)
        return '{"reason": "ok", "score": 1.0}'

    env = {**os.environ, "CONTEXTLENS_STORE": str(tmp_path / "unused.sqlite3")}
    with FakeOpenAIServer(reply=reply, slots=8) as server:
        command = [
            sys.executable,
            "-m",
            "contextlens",
            "run",
            str(data),
            "-m",
            "context-precision",
            "--judge",
            f"{server.base_url}#judge",
            "--out",
            str(out),
            "--store",
            str(store),
            "--cache",
            str(cache),
            "-q",
        ]
        proc = subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 60
            results: list[Path] = []
            while server.calls < 3 or not results or not results[0].read_text():
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the run never got under way"
                time.sleep(0.05)
                results = list(out.glob("*/results.jsonl"))
            (info,) = RunStore(store).list_runs()
            assert (info.status, info.pid) == ("running", proc.pid)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
            release.set()
        assert proc.returncode == -signal.SIGKILL
        assert [line["case_id"] for line in _lines(results[0])] == ["c0"]

        (info,) = RunStore(store).list_runs()
        assert info.status == "interrupted"
        assert shlex.split(info.command) == command and info.cwd == str(tmp_path)
        assert info.out_dir == str(out / info.run_id)
        code, text = run_cli("runs", "--store", store)
        assert code == 0 and "interrupted" in text
        assert info.command in text  # printed whole, to be run again

        resumed = subprocess.run(
            shlex.split(info.command), cwd=info.cwd, env=env, capture_output=True, timeout=120
        )
        assert resumed.returncode == 0, resumed.stderr
        assert server.calls == 5  # c0's verdict came from the cache
    new, old = RunStore(store).list_runs()
    assert (old.run_id, old.status) == (info.run_id, "interrupted")
    assert new.status == "completed" and new.n_items == 3
    assert latest_run(out) == out / new.run_id
