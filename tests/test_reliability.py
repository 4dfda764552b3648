"""Reliability and security, second campaign: secrets, hostile judges, broken storage, data
that used to pass the first check and kill the run later, signals, terminals. Each test is a
fault as an attacker or an unlucky operator brings it."""

from __future__ import annotations

import errno
import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from contextlens import MetricResult, ModelTestCase, evaluate, metric
from contextlens.engine.cache import Cache
from contextlens.metrics import registry
from contextlens.metrics.base import Services
from contextlens.report import write_report
from contextlens.schemas import Batch, Dataset
from contextlens.store import RunStore
from contextlens.testing import FakeOpenAIServer
from support.hostile import HostileServer, chat_body

URL_KEY = "sk-urlkey-1111111111"
ENV_KEY = "sk-envkey-2222222222"
MARKED = "gw-marked-3333333333"
SPEC_KEY = "sk-speckey-444444444"
CODE_KEY = "sk-codekey-555555555"
PRECISION = json.dumps({"reason": "Matches.", "score": 0.8})


def rows(n: int = 3, **extra: object) -> list[dict]:
    return [
        {
            "id": f"c{i}",
            "input": f"When do you open on day {i}?",
            "actual_output": "At 9 am.",
            "expected_output": "9 am.",
            "retrieval_context": ["We open at 9 am."],
            **extra,
        }
        for i in range(n)
    ]


def write(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items), encoding="utf-8")
    return path


def every_byte(root: Path) -> bytes:
    """Every file under ``root`` (folders recursed, SQLite journals included)."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def echo_headers(body: dict, headers: dict) -> tuple[int, dict, bytes]:
    """A gateway's 400 that quotes the request's headers and its own token."""
    message = f"bad request; headers were {headers}; gateway credential {MARKED}"
    return 400, {"Content-Type": "application/json"}, json.dumps({"error": message}).encode()


# --- secrets --------------------------------------------------------------------------------


def test_a_key_planted_anywhere_reaches_no_file_no_store_and_no_stream(
    run_cli, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("MY_GATEWAY_CRED", MARKED)
    monkeypatch.setenv("CONTEXTLENS_SECRET_VARS", "MY_GATEWAY_CRED")
    cases = write(tmp_path / "cases.jsonl", rows())
    store, out = tmp_path / "runs.sqlite3", tmp_path / "out"
    outputs = []
    with HostileServer(echo_headers) as server:
        with_url_key = server.base_url.replace("http://", f"http://user:{URL_KEY}@") + "#m"
        for judge in (with_url_key, f"{server.base_url}#m"):
            code, text = run_cli(
                "run", cases, "-m", "context-precision", "--judge", judge, "--out", out,
                "--store", store, "--max-failures", "100%",
            )  # fmt: skip
            assert code == 0, text
            outputs.append(text)
        assert {h.get("Authorization", "")[:6] for h in server.headers} == {"Basic ", "Bearer"}
    code, text = run_cli("runs", "--store", store)
    outputs.append(text)
    bad_spec = f"openai:gpt-4o?api_key={SPEC_KEY}"
    code, text = run_cli("run", cases, "-m", "context-precision", "--judge", bad_spec, "--no-store")
    assert code == 2 and "unknown setting 'api_key'" in text
    outputs.append(text)
    written = every_byte(out) + every_byte(tmp_path.joinpath("runs.sqlite3").parent)
    for key in (URL_KEY, ENV_KEY, MARKED, SPEC_KEY):
        assert key.encode() not in written, key
        assert all(key not in o for o in outputs), key
    results = [json.loads(line) for p in out.glob("*/results.jsonl") for line in p.open()]
    assert results and all("***" in r["error"] for r in results)  # masked, not dropped


@pytest.mark.parametrize("backend", ["langchain", "litellm", "openai-sdk"])
def test_other_libraries_errors_are_masked_too(backend, tmp_path, capfd):
    from contextlens.judges import LiteLLMBackend, OpenAIClientBackend

    with HostileServer(echo_headers) as server:
        if backend == "langchain":
            from langchain_openai import ChatOpenAI

            judge = ChatOpenAI(model="m", base_url=server.base_url, api_key=CODE_KEY, max_retries=0)
        elif backend == "litellm":
            judge = LiteLLMBackend("openai/m", api_base=server.base_url, api_key=CODE_KEY)
        else:
            import openai

            client = openai.OpenAI(base_url=server.base_url, api_key=CODE_KEY, max_retries=0)
            judge = OpenAIClientBackend(client, "m")
        run = evaluate(
            [ModelTestCase(**r) for r in rows(1)],
            ["context-precision"],
            judge=judge,
            cache=False,
            out=tmp_path / "out",
            progress=False,
        )
    [item] = run.iter_results()
    assert item.failed
    captured = capfd.readouterr()
    for key in (CODE_KEY, MARKED):
        assert key not in item.error and key not in captured.out + captured.err
        assert key.encode() not in every_byte(tmp_path / "out")


def test_the_opik_surface_masks_the_errors_of_contextlens_own_backends():
    """Opik's ``score`` lets the user's own model's exception through as it is; an error of
    a backend contextlens made (the ``litellm:`` spec, a ``LiteLLMBackend``) is not the
    user's, and reaches them as ``MetricComputationError`` with the key masked."""
    from contextlens import ContextPrecision
    from contextlens.errors import MetricComputationError
    from contextlens.judges import LiteLLMBackend

    case = dict(input="q?", output="a.", expected_output="a", context=["c."])
    with HostileServer(echo_headers) as server:
        judge = LiteLLMBackend("openai/m", api_base=server.base_url, api_key=CODE_KEY)
        with pytest.raises(MetricComputationError) as raised:
            ContextPrecision(model=judge, track=False).score(**case)
    chain, exc = [], raised.value
    while exc is not None:
        chain.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    for key in (CODE_KEY, MARKED):
        assert all(key not in text for text in chain), key


# --- hostile replies ------------------------------------------------------------------------


def test_a_gzip_bomb_is_cut_off_while_read_and_never_sent_back_whole():
    bomb = gzip.compress(chat_body("A" * 60_000_000), compresslevel=9)
    assert len(bomb) < 200_000

    def answer(body: dict, headers: dict) -> tuple[int, dict, bytes]:
        return 200, {"Content-Encoding": "gzip", "Content-Type": "application/json"}, bomb

    with HostileServer(answer) as server:
        tracemalloc.start()
        run = evaluate(
            [ModelTestCase(**rows(1)[0])],
            ["context-precision"],
            judge=f"{server.base_url}#m",
            cache=False,
            progress=False,
        )
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        sizes = server.raw_sizes
    [item] = run.results
    assert item.failed and "over the limit of 4,000,000 bytes" in item.error
    assert peak < 60_000_000  # the decoded 60 MB were never held
    assert len(sizes) == 2 and sizes[1] < sizes[0] + 8_000  # the re-ask quotes a prefix


def test_absurd_token_counts_are_not_believed_and_the_valid_reply_is_kept(tmp_path):
    usage = {"prompt_tokens": 1e30, "completion_tokens": -40}

    def answer(body: dict, headers: dict) -> tuple[int, dict, bytes]:
        return 200, {"Content-Type": "application/json"}, chat_body(PRECISION, usage)

    with HostileServer(answer) as server:
        run = evaluate(
            [ModelTestCase(**r) for r in rows(2)],
            ["context-precision"],
            judge=f"{server.base_url}#m",
            cache=tmp_path / "cache.sqlite3",
            progress=False,
        )
    assert [r.score for r in run.results] == [0.8, 0.8]
    total = run.accounting.total
    assert total.prompt_tokens == total.completion_tokens == 0
    assert total.cost >= 0


def test_a_redirect_is_named_as_such_and_not_followed():
    def answer(body: dict, headers: dict) -> tuple[int, dict, bytes]:
        return 302, {"Location": "http://elsewhere.example/v1/chat/completions"}, b""

    with HostileServer(answer) as server:
        run = evaluate(
            [ModelTestCase(**rows(1)[0])],
            ["context-precision"],
            judge=f"{server.base_url}#m",
            cache=False,
            progress=False,
        )
        calls = len(server.requests)
    [item] = run.results
    assert "302" in item.error and "redirects to http://elsewhere.example/" in item.error
    assert "not JSON" not in item.error and calls == 1  # fatal: not retried, not followed


# --- storage faults -------------------------------------------------------------------------


class _FullDisk:
    """A disk with ``room`` bytes left: a write takes what fits, the next one fails with
    ENOSPC, as a file system does."""

    def __init__(self, write, room: int) -> None:
        self.real, self.room = write, room

    def __call__(self, fd: int, data: bytes) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        taken = min(len(data), self.room)
        self.room -= taken
        return self.real(fd, bytes(data[:taken]))


def test_a_full_disk_stops_the_calls_keeps_the_lines_and_the_run_resumes(
    run_cli, tmp_path, monkeypatch
):
    from contextlens import files

    real = files._write
    monkeypatch.setattr(files, "_write", _FullDisk(real, room=6_000))
    cases = write(tmp_path / "cases.jsonl", rows(40))
    store, out, cache = tmp_path / "runs.sqlite3", tmp_path / "out", tmp_path / "c.sqlite3"
    args = ["run", cases, "-m", "context-precision", "--out", out, "--store", store]
    args += ["--cache", cache, "--concurrency", "2", "-q"]
    with FakeOpenAIServer(reply=lambda r: PRECISION, latency=0.05) as server:
        code, text = run_cli(*args, "--judge", f"{server.base_url}#m")
        assert code == 2 and "no space left on the device" in text, text
        assert "results.jsonl: no space" in text or "cases.jsonl: no space" in text  # the file
        assert "Traceback" not in text and "never retrieved" not in text
        assert server.calls < 20  # the feed stopped: the rest was never paid for
        [run_folder] = out.iterdir()
        for name in ("results.jsonl", "cases.jsonl"):  # cut back to the last whole line
            text = (run_folder / name).read_text()
            assert text.endswith("\n"), name
            assert all(json.loads(line) for line in text.splitlines())
        lines = (run_folder / "results.jsonl").read_text().splitlines()
        assert lines and all(json.loads(line)["score"] == 0.8 for line in lines)
        [info] = RunStore(store).list_runs()
        assert info.status == "failed" and "no space left" in info.error
        monkeypatch.setattr(files, "_write", real)  # space is freed
        paid = server.calls
        code, text = run_cli(*args, "--judge", f"{server.base_url}#m")
        assert code == 0, text
        assert server.calls - paid == 40 - paid  # what was paid for comes from the cache


def test_a_report_is_written_whole_and_never_through_a_planted_link(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    planted = tmp_path / "report.html"
    planted.symlink_to(target)
    run = evaluate([ModelTestCase(**r) for r in rows(1)], ["context-similarity"], progress=False)
    write_report(run, planted)
    assert target.read_text() == "keep me"
    assert not planted.is_symlink() and "<html" in planted.read_text()
    assert not list(tmp_path.glob(".*.tmp"))


def test_cache_faults_are_bypassed_never_an_items_failure(tmp_path):
    cases = [ModelTestCase(**r) for r in rows(3)]
    path = tmp_path / "cache.sqlite3"
    clean = evaluate(cases, ["context-similarity"], cache=False, progress=False)
    # a damaged vector (NaN) for one text is a miss, embedded again
    cache = Cache(path)
    evaluate(cases, ["context-similarity"], cache=path, progress=False)
    conn = sqlite3.connect(path)
    blob = np.full(384, np.nan, dtype="<f4").tobytes()
    conn.execute("UPDATE embeddings SET vector = ?", (blob,))
    conn.commit()
    again = evaluate(cases, ["context-similarity"], cache=path, progress=False)
    assert [r.score for r in again.results] == pytest.approx([r.score for r in clean.results])
    # page damage: the file is not a database any more
    cache.close()
    conn.close()
    path.write_bytes(b"this is not an SQLite file" * 1000)
    with pytest.warns(RuntimeWarning, match="cannot be used"):
        damaged = evaluate(cases, ["context-similarity"], cache=path, progress=False)
    assert not any(r.failed for r in damaged.results)


def test_a_cache_that_cannot_be_opened_is_said_once(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("CONTEXTLENS_CACHE_DIR", str(tmp_path / "file-not-folder" / "x"))
    (tmp_path / "file-not-folder").write_text("a file where the cache folder would go")
    cases = write(tmp_path / "cases.jsonl", rows(2))
    code, text = run_cli("run", cases, "-m", "context-similarity", "--no-store", "-q",
                         "--out", tmp_path / "out")  # fmt: skip
    assert code == 0, text
    said = [line for line in text.splitlines() if "cannot be used" in line]
    assert len(said) == 1 and said[0].startswith("warning: the default cache cannot be used")


def test_a_locked_cache_keeps_every_paid_reply(tmp_path):
    path = tmp_path / "cache.sqlite3"
    Cache(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process writing for a long time
    try:
        with FakeOpenAIServer(reply=lambda r: PRECISION) as server:
            started = time.monotonic()
            with pytest.warns(RuntimeWarning, match="cannot be used"):
                run = evaluate(
                    [ModelTestCase(**r) for r in rows(4)],
                    ["context-precision"],
                    judge=f"{server.base_url}#m",
                    cache=path,
                    progress=False,
                )
            assert time.monotonic() - started < 30
        assert [r.score for r in run.results] == [0.8] * 4 and server.calls == 4
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_embeddings_are_cached_by_everything_that_changes_a_vector(tmp_path):
    class Embeddings:
        """Two servers serving one model name, with their own vectors."""

        def __init__(self, base_url: str, sign: float) -> None:
            self.model, self.base_url, self.sign, self.calls = "same-name", base_url, sign, 0

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            self.calls += 1
            return [[self.sign, 1.0, float(len(t) % 5)] for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    cases = [ModelTestCase(**r) for r in rows(2)]
    one, two = Embeddings("http://a.example/v1", 1.0), Embeddings("http://b.example/v1", -1.0)
    first = evaluate(
        cases, ["context-similarity"], embedder=one, cache=tmp_path / "c", progress=False
    )
    second = evaluate(
        cases, ["context-similarity"], embedder=two, cache=tmp_path / "c", progress=False
    )
    assert two.calls >= 1  # not answered with the other server's vectors
    again = evaluate(
        cases, ["context-similarity"], embedder=one, cache=tmp_path / "c", progress=False
    )
    assert one.calls == 1 and [r.score for r in again.results] == [r.score for r in first.results]
    assert second.results[0].details.query_context_similarity is not None


def test_a_locked_store_is_waited_on_briefly_and_the_run_still_completes(
    run_cli, tmp_path, monkeypatch
):
    from contextlens.store import runs

    monkeypatch.setattr(runs, "STORE_BUSY_TIMEOUT", 0.3)
    store = tmp_path / "runs.sqlite3"
    RunStore(store).close()
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        cases = write(tmp_path / "cases.jsonl", rows(2))
        code, text = run_cli("run", cases, "-m", "context-similarity", "--out",
                             tmp_path / "out", "--store", store, "-q")  # fmt: skip
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 0 and "not recorded in the run store" in text and "locked" in text, text
    assert "Traceback" not in text
    assert (tmp_path / "out" / "latest" / "summary.json").is_file()


def test_a_latest_that_cannot_be_replaced_does_not_fail_a_completed_run(run_cli, tmp_path):
    out = tmp_path / "out"
    (out / "latest" / "in-the-way").mkdir(parents=True)  # a folder where the link goes
    store = tmp_path / "runs.sqlite3"
    cases = write(tmp_path / "cases.jsonl", rows(2))
    code, text = run_cli("run", cases, "-m", "context-similarity", "--out", out,
                         "--store", store, "-q")  # fmt: skip
    assert code == 0 and "could not be made to name this run" in text, text
    [info] = RunStore(store).list_runs()
    assert info.status == "completed"


# --- late crashes moved early ---------------------------------------------------------------


def test_text_that_cannot_be_written_is_refused_before_the_first_call(run_cli, tmp_path):
    path = tmp_path / "cases.jsonl"
    good = json.dumps(rows(1)[0])
    path.write_text(good + "\n" + good.replace('"c0"', '"\\ud800"') + "\n", encoding="utf-8")
    with FakeOpenAIServer(reply=lambda r: PRECISION) as server:
        code, text = run_cli("run", path, "-m", "context-precision", "--judge",
                             f"{server.base_url}#m", "--no-store")  # fmt: skip
        assert server.calls == 0
    assert code == 2 and "cases.jsonl:2" in text and "not valid Unicode" in text, text


def test_a_score_that_is_no_probability_fails_its_item_and_the_run_ends_well(tmp_path):
    @metric("wild-score", reads=("input",))
    class Wild:
        """Scores NaN, infinity and 1.5 in turn."""

        case_type = ModelTestCase

        async def score(self, case: ModelTestCase, services: Services) -> MetricResult:
            value = {"c0": float("nan"), "c1": float("inf"), "c2": 1.5}.get(case.name, 0.5)
            return MetricResult(metric="wild-score", score=value)

    try:
        cases = [ModelTestCase(**r) for r in rows(4)]
        run = evaluate(cases, ["wild-score"], out=tmp_path / "out", progress=False)
    finally:
        registry.unregister("wild-score")
    failed = [r for r in run.iter_results() if r.failed]
    assert [r.case_id for r in failed] == ["c0", "c1", "c2"]
    assert all("not a number in [0, 1]" in r.error for r in failed)
    assert run.summaries["wild-score"].mean == 0.5
    assert (Path(run.out_dir) / "summary.json").is_file()


@pytest.mark.parametrize(("weight", "why"), [(1e308, "less than or equal"), (True, "true")])
def test_weights_that_would_fail_later_are_refused_first(run_cli, tmp_path, weight, why):
    session = {
        "session_id": "s",
        "assistant_id": "a",
        "context": "Open at 9.",
        "conversation": [{"qa_id": "q", "query": "When?", "assistant": "9", "weight": weight}],
    }
    path = write(tmp_path / "s.jsonl", [session])
    code, text = run_cli("run", path, "-m", "context", "--no-store")
    assert code == 2 and "weight" in text and why in text, text


def test_files_that_used_to_end_in_a_traceback_are_usage_errors(run_cli, tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"input": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    code, text = run_cli("run", deep, "-m", "context-similarity", "--no-store")
    assert code == 2 and "nested too deeply" in text
    long_name = tmp_path / ("x" * 300 + ".jsonl")
    code, text = run_cli("run", long_name, "-m", "context-similarity", "--no-store")
    assert code == 2 and "too long" in text.lower()
    cases = write(tmp_path / "cases.jsonl", rows(1))
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    code, text = run_cli("run", cases, "-m", "context-similarity", "--out", a_file, "--no-store")
    assert code == 2 and "not a folder" in text
    code, text = run_cli(
        "run", cases, "-m", "context-similarity", "--out", "/sys/clx", "--no-store"
    )
    assert code == 2 and "/sys/clx" in text
    assert "Traceback" not in text


def test_a_long_csv_cell_is_scored_or_refused_by_its_size_not_by_the_reader(run_cli, tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text(
        "id,input,retrieval_context\n" + f'big,"What is it?","[""{"w " * 100_000}""]"\n',
        encoding="utf-8",
    )
    with FakeOpenAIServer(reply=lambda r: PRECISION) as server:
        code, text = run_cli("run", path, "-m", "contextual-relevancy", "--judge",
                             f"{server.base_url}#m", "--no-store", "-q")  # fmt: skip
        assert server.calls == 0
    assert code == 3 and "over the budget" in text and "Traceback" not in text, text


def test_standard_input_and_named_pipes_are_read(tmp_path):
    data = "".join(json.dumps(r) + "\n" for r in rows(2))
    command = [sys.executable, "-m", "contextlens", "run", "-", "-m", "context-similarity"]
    command += ["--out", str(tmp_path / "o1"), "--no-store", "-q"]
    done = subprocess.run(command, input=data, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "o1" / "latest" / "results.jsonl").read_text().splitlines()) == 2
    fifo = tmp_path / "cases.pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(data))
    writer.start()
    command[4] = str(fifo)
    command[command.index("--out") + 1] = str(tmp_path / "o2")
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    writer.join()
    assert done.returncode == 0, done.stderr


# --- signals and terminals ------------------------------------------------------------------


def test_sigterm_is_taken_as_ctrl_c(tmp_path):
    cases = write(tmp_path / "cases.jsonl", rows(40))
    store = tmp_path / "runs.sqlite3"
    with FakeOpenAIServer(reply=lambda r: PRECISION, latency=0.2) as server:
        command = [sys.executable, "-m", "contextlens", "run", str(cases)]
        command += ["-m", "context-precision", "--judge", f"{server.base_url}#m"]
        command += ["--out", str(tmp_path / "out"), "--store", str(store), "-q"]
        env = {**os.environ, "CONTEXTLENS_CACHE": "off"}
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while server.calls < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert "stopped by SIGTERM" in stderr and "Traceback" not in stderr
    [info] = RunStore(store).list_runs()
    assert info.status == "interrupted" and info.error == "stopped by SIGTERM"
    assert info.command is not None and str(cases) in info.command


def test_data_cannot_forge_lines_or_reorder_text_in_the_terminal(run_cli, tmp_path):
    evil = "evil\nFORGED: all passed\u202egnp.exe"
    path = write(tmp_path / "cases.jsonl", [{**rows(1)[0], "id": evil}])
    with FakeOpenAIServer(reply=lambda r: "not a verdict") as server:
        code, text = run_cli("run", path, "-m", "context-precision", "--judge",
                             f"{server.base_url}#m", "--no-store", "-q")  # fmt: skip
    assert code == 3 and "failed" in text  # the failed item is listed by its case id
    assert "\nFORGED" not in text and "\u202e" not in text
    assert "evil\\x0aFORGED" in text and "\\u202e" in text


def test_a_context_interaction_keeps_the_judges_unusable_reply():
    session = Dataset(
        session_id="s",
        assistant_id="a",
        context="Open at 9.",
        conversation=[Batch(qa_id="q1", query="When?", assistant="At 9.")],
    )
    with FakeOpenAIServer(reply=lambda r: "no idea, sorry") as server:
        run = evaluate([session], ["context"], judge=f"{server.base_url}#m", cache=False)
    [item] = run.results
    assert item.failed and item.details.interactions[0].raw_reply == "no idea, sorry"
    assert item.details.raw_reply == "no idea, sorry"
