"""Judge faults end to end: a server that goes away and comes back, timeouts, replies that
are not numbers. Nothing is lost, every attempt is counted, nothing invalid is accepted."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from contextlens import ModelTestCase, evaluate
from contextlens.engine.retry import RetryPolicy
from contextlens.judges import LLMJudge, OpenAICompatBackend
from contextlens.testing import FakeOpenAIServer

CASES = [
    ModelTestCase(
        name=f"c{i}", input=f"question {i}", actual_output="answer", expected_output="answer"
    )
    for i in range(48)
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def judge(url: str, **policy: float) -> LLMJudge:
    return LLMJudge(OpenAICompatBackend("m", base_url=url), retry=RetryPolicy(**policy))


def test_a_server_that_is_down_then_restarts_loses_no_item():
    port = free_port()
    server = FakeOpenAIServer(port=port, latency=0.02)
    url = f"http://127.0.0.1:{port}/v1"

    up = threading.Event()

    def outage() -> None:  # up; down for 2 s mid-run (dropping what is in flight); up again
        server.start()
        up.set()
        deadline = time.monotonic() + 10
        while server.calls < 8 and time.monotonic() < deadline:
            time.sleep(0.005)
        server.stop()
        time.sleep(2.0)
        server.start()

    thread = threading.Thread(target=outage)
    thread.start()
    try:
        up.wait(5)
        run = evaluate(
            CASES,
            ["context-precision"],
            judge=judge(url),
            cache=False,
            max_concurrency=4,
            progress=False,
        )
    finally:
        thread.join()
        server.stop()
    summary = run.summaries["context-precision"]
    assert summary.n_failed == 0 and summary.n_scored == 48
    acct = summary.accounting
    assert acct.retries > 0  # the outage was met, and outlasted
    # Calls answered are counted; calls whose connection the outage dropped may or may not
    # have reached the server, and are counted apart.
    assert acct.calls <= server.calls <= acct.calls + acct.dropped


def test_connection_failures_do_not_use_up_the_attempts_but_the_budget_ends_them():
    url = f"http://127.0.0.1:{free_port()}/v1"  # nobody listens
    started = time.monotonic()
    run = evaluate(
        CASES[:1],
        ["context-precision"],
        judge=judge(url, budget=1.5, initial_delay=0.1, max_attempts=2),
        cache=False,
        progress=False,
    )
    [item] = run.results
    assert item.failed and "ConnectionError" in item.error
    assert 0.5 <= time.monotonic() - started < 5  # retried past two attempts, within budget
    assert run.summaries["context-precision"].accounting.retries >= 3


def test_every_attempt_is_counted_timeouts_included():
    with FakeOpenAIServer(timeout_rate=0.3, hang_time=0.5, seed=3) as server:
        run = evaluate(
            CASES[:24],
            ["context-precision"],
            judge=judge(server.base_url, timeout=0.2, initial_delay=0.01),
            cache=False,
            max_concurrency=8,
            progress=False,
        )
        time.sleep(0.6)  # the hung calls end on the server's side too
        received = server.calls
    summary = run.summaries["context-precision"]
    assert summary.n_failed == 0
    assert summary.accounting.calls == received > 24


def test_the_timeout_does_not_run_while_a_call_waits_for_a_slot():
    # One call in flight at a time, 0.3 s each: the last of four waits 0.9 s for its slot.
    with FakeOpenAIServer(latency=0.3) as server:
        run = evaluate(
            CASES[:4],
            ["context-precision"],
            judge=judge(server.base_url, timeout=0.6, max_attempts=1),
            cache=False,
            max_concurrency=1,
        )
    assert run.summaries["context-precision"].n_failed == 0 and server.calls == 4


@pytest.mark.parametrize("score", ['"0.9"', "true", "null", '"high"'])
def test_a_score_that_is_not_a_number_is_refused(score):
    with FakeOpenAIServer(reply=lambda r: '{"reason": "fine", "score": ' + score + "}") as server:
        run = evaluate(CASES[:1], ["context-precision"], judge=judge(server.base_url), cache=False)
    [item] = run.results
    assert item.failed and "valid number" in item.error and server.calls == 2  # re-asked once


def test_an_integer_score_is_a_number():
    with FakeOpenAIServer(reply=lambda r: json.dumps({"reason": "fine", "score": 1})) as server:
        run = evaluate(CASES[:1], ["context-precision"], judge=judge(server.base_url), cache=False)
    assert run.results[0].score == 1.0
