"""Fail fast and say why: what a new user trips on in the first hour. A judge that cannot be
reached, mistakes found only after the work, files as pandas writes them, cases without
chunks, pass marks, a slow local judge that nobody explains."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from contextlens import ModelTestCase, evaluate
from contextlens.engine.reach import JudgeUnreachable
from contextlens.testing import FakeOpenAIServer
from support.relevancy import all_relevant

PRECISION = json.dumps({"reason": "Matches.", "score": 0.8})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rows(n: int = 3, **extra: object) -> list[dict]:
    return [
        {
            "id": f"c{i}",
            "input": f"When do you open on day {i}?",
            "actual_output": "At 9 am.",
            "expected_output": "9 am.",
            "retrieval_context": ["We open at 9 am.", "Parking is free."],
            **extra,
        }
        for i in range(n)
    ]


def write(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    return path


def verdicts(request: dict) -> str:
    prompt = "\n".join(m["content"] for m in request["messages"])
    if "Chunk 1:" in prompt:
        return json.dumps(all_relevant(request["messages"][-1]["content"]))
    return PRECISION


# --- a judge that cannot be reached ---------------------------------------------------------


def test_a_judge_that_never_answers_is_a_clear_error_in_seconds(run_cli, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nobody listens
    cases = write(tmp_path / "cases.jsonl", rows(30))
    started = time.monotonic()
    code, text = run_cli("run", cases, "-m", "context-precision", "--judge", f"{url}#m",
                         "--no-store", "--out", tmp_path / "out")  # fmt: skip
    assert time.monotonic() - started < 15
    assert code == 2 and url in text and "cannot be reached" in text, text
    assert "Check that the server runs" in text and "Traceback" not in text
    with pytest.raises(JudgeUnreachable, match=r"127\.0\.0\.1"):
        evaluate([ModelTestCase(**rows(1)[0])], ["context-precision"], judge=f"{url}#m")


def test_a_judge_that_takes_connections_and_never_replies_stops_the_run(run_cli, tmp_path):
    """A server that accepts every call and answers none (a hung process, a proxy's wrong
    port) stops the run once two calls have timed out, instead of holding each item for its
    whole retry budget; one that answered before keeps its retries."""
    cases = write(tmp_path / "cases.jsonl", rows(30))
    with FakeOpenAIServer(timeout_rate=1.0, hang_time=5.0) as server:
        judge = f"{server.base_url}#m?timeout=0.3&concurrency=1"
        started = time.monotonic()
        code, text = run_cli("run", cases, "-m", "context-precision", "--judge", judge,
                             "--no-store", "--out", tmp_path / "out")  # fmt: skip
        assert time.monotonic() - started < 15
    assert code == 2 and "gives no reply" in text and "no call was ever answered" in text, text
    assert "--judge-timeout" in text and "Traceback" not in text
    # a first call that times out once (a model loading) is retried, and the run goes on
    with FakeOpenAIServer(script=["timeout"], hang_time=2.0, reply=lambda r: PRECISION) as server:
        run = evaluate(
            [ModelTestCase(**r) for r in rows(3)],
            ["context-precision"],
            judge=f"{server.base_url}#m?timeout=0.3",
            cache=False,
            progress=False,
        )
    assert run.summaries["context-precision"].n_failed == 0


def test_a_judge_down_for_ten_seconds_mid_run_loses_no_item_and_the_log_says_so(tmp_path):
    port = free_port()
    server = FakeOpenAIServer(port=port, reply=lambda r: PRECISION, latency=0.05)
    cases = write(tmp_path / "cases.jsonl", rows(12))

    def outage() -> None:
        deadline = time.monotonic() + 30
        while server.calls < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.stop()
        time.sleep(10.0)
        server.start()

    server.start()
    thread = threading.Thread(target=outage)
    thread.start()
    command = [sys.executable, "-m", "contextlens", "run", str(cases), "-m"]
    command += ["context-precision", "--judge", f"http://127.0.0.1:{port}/v1#m"]
    command += ["--out", str(tmp_path / "out"), "--no-store", "--cache", "off"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        thread.join()
        server.stop()
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "out" / "latest" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 12 and all(json.loads(x)["score"] == 0.8 for x in lines)
    waiting = [x for x in done.stderr.splitlines() if "unreachable since" in x]
    assert waiting and "retrying" in waiting[0]  # a line while nothing completed


# --- preflight: mistakes found before the work ----------------------------------------------


def test_a_missing_key_is_said_before_any_call(run_cli, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    cases = write(tmp_path / "cases.jsonl", rows(2))
    started = time.monotonic()
    code, text = run_cli("run", cases, "-m", "context-precision", "--judge",
                         "openai:gpt-4o-mini", "--no-store")  # fmt: skip
    assert code == 2 and "OPENAI_API_KEY" in text and time.monotonic() - started < 10


def test_a_ray_cluster_that_is_not_there_is_said_before_any_work(run_cli, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cases = write(tmp_path / "cases.jsonl", rows(2))
    started = time.monotonic()
    address = f"127.0.0.1:{free_port()}"  # nobody listens
    code, text = run_cli("run", cases, "-m", "context-similarity", "--ray", address, "--no-store")
    assert code == 2 and "--ray local" in text and address in text, text
    assert "Traceback" not in text and time.monotonic() - started < 10


def test_the_metric_is_named_or_decided_by_the_file(run_cli, tmp_path):
    cases = write(tmp_path / "cases.jsonl", rows(2))
    with FakeOpenAIServer(reply=verdicts) as server:
        code, text = run_cli("run", cases, "--judge", f"{server.base_url}#m", "--no-store")
        assert server.calls == 0
    assert code == 2 and "-m" in text and "context-precision" in text and "test cases" in text
    sessions = write(
        tmp_path / "s.jsonl",
        [
            {
                "session_id": "s",
                "assistant_id": "a",
                "context": "We open at 9 am.",
                "conversation": [{"qa_id": "q", "query": "When?", "assistant": "At 9 am."}],
            }
        ],
    )
    code, text = run_cli("run", sessions, "--no-store", "--out", tmp_path / "o", "-q")
    assert code == 0 and "only 'context' scores" in text, text
    code, text = run_cli("--version")
    assert code == 0 and text.startswith("contextlens ")


# --- files as pandas and spreadsheets write them --------------------------------------------


def test_a_pandas_csv_with_list_columns_and_its_index_runs(run_cli, tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(rows(3))
    path = tmp_path / "cases.csv"
    frame.to_csv(path)  # the index column, and lists written as Python literals
    again = tmp_path / "again.csv"
    pd.read_csv(path).to_csv(again)  # ... and after a round trip: "Unnamed: 0"
    again.write_text(again.read_text() + ",,,,,,,\n,,,,,,,\n")  # a spreadsheet's blank rows
    for csv_file in (path, again):
        out = tmp_path / csv_file.stem
        code, text = run_cli("run", csv_file, "-m", "context-similarity", "--out", out,
                             "--no-store", "-q")  # fmt: skip
        assert code == 0, text
        results = [json.loads(x) for x in (out / "latest" / "results.jsonl").open()]
        assert [r["case_id"] for r in results] == ["c0", "c1", "c2"]
    with pytest.raises(ValueError, match="not a JSON array"):
        from contextlens.loaders import load_cases

        bad = tmp_path / "bad.csv"
        bad.write_text("id,input,retrieval_context\na,q,\"[open('x')]\"\n")
        list(load_cases(bad)[1])


# --- one rule for a case without chunks -----------------------------------------------------


def test_a_case_without_chunks_is_not_applicable_under_every_chunk_metric(run_cli, tmp_path):
    items = [*rows(2), {**rows(1)[0], "id": "chit-chat", "retrieval_context": []}]
    cases = write(tmp_path / "cases.jsonl", items)
    metrics = ["contextual-relevancy", "context-precision", "context-similarity"]
    for judged in (False, True):
        out = tmp_path / ("judged" if judged else "offline")
        args = ["run", cases, "--out", out, "--no-store", "-q"]
        for m in metrics:
            args += ["-m", m]
        with FakeOpenAIServer(reply=verdicts) as server:
            if judged:
                args += ["--judge", f"{server.base_url}#m"]
            code, text = run_cli(*args)
        assert code == 0, text
        results = [json.loads(x) for x in (out / "latest" / "results.jsonl").open()]
        chit = [r for r in results if r["case_id"] == "chit-chat"]
        assert len(chit) == 3
        assert {r["not_applicable"] for r in chit} == {"not applicable: no retrieved context"}
        assert all(r["score"] is None and r["error"] is None for r in chit)
        summary = json.loads((out / "latest" / "summary.json").read_text())["summaries"]
        for m in metrics:
            assert (summary[m]["n_not_applicable"], summary[m]["n_failed"]) == (1, 0)
            assert summary[m]["n_scored"] == 2


# --- pass marks and pass rates --------------------------------------------------------------


def test_thresholds_and_pass_rates_mean_the_same_for_every_metric(run_cli, tmp_path):
    cases = write(tmp_path / "cases.jsonl", rows(4))
    out = tmp_path / "out"
    code, text = run_cli("run", cases, "-m", "context-similarity", "--threshold",
                         "context-similarity=0.01", "--out", out, "--no-store")  # fmt: skip
    assert code == 0, text
    summary = json.loads((out / "latest" / "summary.json").read_text())["summaries"]
    similarity = summary["context-similarity"]
    assert similarity["threshold"] == 0.01 and similarity["pass_rate"] == 1.0
    # 4 of 4 passing: the Beta(5, 1) posterior's interval, not a zero-width one
    assert similarity["n_passed"] == 4
    assert similarity["pass_low"] == pytest.approx(0.025 ** (1 / 5), abs=0.02)
    assert "100% [" in text and "@0.01" in text
    results = [json.loads(x) for x in (out / "latest" / "results.jsonl").open()]
    assert all(r["success"] is True for r in results)
    code, text = run_cli("run", cases, "-m", "context-similarity", "--threshold",
                         "context-similarity=2", "--no-store")  # fmt: skip
    assert code == 2 and "[0, 1]" in text
    run = evaluate(
        [ModelTestCase(**r) for r in rows(2)],
        ["context-similarity"],
        thresholds={"ContextSimilarityEvaluator": 1.0},
        progress=False,
    )
    assert run.summaries["context-similarity"].pass_rate == 0.0
    assert all(r.status == "below" for r in run.results)


def test_a_local_judge_that_does_not_say_its_slots_is_ramped_and_the_run_says_so_once(
    run_cli, tmp_path
):
    cases = write(tmp_path / "cases.jsonl", rows(30))
    with (
        FakeOpenAIServer(reply=verdicts, serves=2, latency=0.15) as server,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("default", UserWarning)  # the suite's filter hides it
        code, text = run_cli("run", cases, "-m", "context-precision", "--judge",
                             f"{server.base_url}#m", "--no-store", "-q")  # fmt: skip
    assert code == 0, text
    notes = [x for x in text.splitlines() if "at a time" in x]
    assert len(notes) == 1 and notes[0].startswith("note: ")
    assert "is asked 2 calls at a time: found by a ramp" in notes[0]
    assert "--concurrency" in notes[0]
    assert server.peak_in_flight > 2  # it was tried with more, and they were slower


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_a_frame_with_a_row_without_chunks_reads_the_same_in_every_format(run_cli, tmp_path, kind):
    """pandas writes a row's missing chunks as a blank CSV cell, or as null in JSON lines
    and Parquet: each is a case without chunks ("not applicable"), not a refused file."""
    pd = pytest.importorskip("pandas")
    if kind == "parquet":
        pytest.importorskip("pyarrow")
    frame = pd.DataFrame(
        {
            "question": ["Where is Paris?", "Hi!"],
            "contexts": [["Paris is in France."], None],
            "answer": ["In France.", "Hello."],
        }
    )
    path = tmp_path / f"cases.{kind}"
    if kind == "csv":
        frame.to_csv(path)
    elif kind == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    out = tmp_path / "out"
    code, text = run_cli("run", path, "-m", "contextual-relevancy", "--out", out, "--no-store")
    assert code == 0, text
    results = sorted(
        (json.loads(x) for x in (out / "latest" / "results.jsonl").open()),
        key=lambda r: r["case_id"],
    )
    assert [r["not_applicable"] is not None for r in results] == [False, True]
    assert results[0]["score"] is not None and results[1]["error"] is None
