"""Batch judging against a real batch server on 127.0.0.1: the same results as a live run at
half the price, failed and expired lines retried, and a killed run that pays nothing twice."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextlens import evaluate
from contextlens.engine.accounting import PRICES
from contextlens.engine.batchlog import BatchLog
from contextlens.judges import OpenAICompatBackend
from contextlens.judges.anthropic import AnthropicBackend
from contextlens.judges.batching import BatchBackend, request_id
from contextlens.judges.resolve import batched
from contextlens.testing import FakeBatchServer, FakeOpenAIServer
from support.rag import CASES, rule_reply

MODEL = "batch-judge"
RANKED = "context-precision-ranked"
PRICES.register(MODEL, 1.0, 4.0)

CASES_20 = [
    {**case, "id": f"{case['id']}-{i}", "input": f"{case['input']} ({i})"}
    for i in range(10)
    for case in CASES
]


def _scores(run) -> dict[tuple[str, str], float | None]:
    return {(r.case_id, r.metric): r.score for r in run.results}


def _run(judge: str, metrics: list[str], **options):
    return evaluate(CASES_20, metrics, judge=judge, cache=False, progress=False, **options)


def test_a_batched_run_scores_as_a_live_run_at_half_the_price():
    metrics = ["faithfulness", RANKED]
    with FakeOpenAIServer(reply=rule_reply) as live:
        live_run = _run(f"{live.base_url}#{MODEL}", metrics)
    with FakeBatchServer(delay=0.1, reply=rule_reply) as server:
        batch_run = _run(f"{server.base_url}#{MODEL}", metrics, batch=True)
    assert _scores(batch_run) == _scores(live_run)
    assert all(s.n_failed == 0 for s in batch_run.summaries.values())
    total = batch_run.accounting.total
    assert total.calls == len(server.requests) == live_run.accounting.total.calls
    full = PRICES.cost(MODEL, _usage(total))
    assert full is not None and total.cost == pytest.approx(full / 2)
    assert len(server.batches) == 1  # one call per case and metric, all in one batch


def _usage(counts):
    from contextlens.backend import Usage

    return Usage(counts.prompt_tokens, counts.completion_tokens)


def test_a_dry_run_prices_batched_calls_at_the_batch_rate():
    with FakeBatchServer() as server:
        judge = f"{server.base_url}#{MODEL}"
        live = evaluate(CASES_20, [RANKED], judge=judge, dry_run=True, cache=False)
        batch = evaluate(
            CASES_20,
            [RANKED],
            judge=judge,
            dry_run=True,
            cache=False,
            batch=True,
        )
    assert live.cost is not None and batch.cost == pytest.approx(live.cost / 2)
    assert server.batches == [] and server.files == 0


def test_failed_and_expired_lines_are_asked_again_in_a_later_batch():
    with FakeBatchServer(
        delay=0.1, reply=rule_reply, fail_requests={0, 5}, expire_batches={0}, expire_after=12
    ) as server:
        run = _run(f"{server.base_url}#{MODEL}", [RANKED], batch=True)
    summary = run.summaries[RANKED]
    assert summary.n == 20 and summary.n_failed == 0
    assert len(server.batches) == 2
    asked = [r["custom_id"] for r in server.requests]
    assert len(asked) == 20 + 10  # 2 failed lines, 8 expired (the first 12 of 20 answered)
    assert len(set(asked)) == 20 and run.accounting.total.retries == 10


def test_only_calls_missing_from_the_cache_are_submitted(tmp_path):
    cache = tmp_path / "cache.sqlite3"
    with FakeBatchServer(delay=0.05, reply=rule_reply) as server:
        judge = f"{server.base_url}#{MODEL}"
        evaluate(CASES_20[:6], [RANKED], judge=judge, cache=cache, batch=True)
        run = evaluate(CASES_20, [RANKED], judge=judge, cache=cache, batch=True)
    assert len(server.requests) == 20 and len(server.batches) == 2
    assert run.accounting.total.cache_hits == 6 and run.summaries[RANKED].n == 20


_CHILD = """
import sys
from contextlens import evaluate
sys.path.insert(0, {tests!r})
from support.rag import CASES
cases = [{{**c, "id": f"{{c['id']}}-{{i}}", "input": f"{{c['input']}} ({{i}})"}}
         for i in range(10) for c in CASES]
evaluate(cases, ["context-precision-ranked"], judge={judge!r}, cache=False, batch=True,
         progress=False)
"""


def test_a_run_killed_mid_batch_and_run_again_submits_nothing_twice(tmp_path):
    env = {**os.environ, "CONTEXTLENS_CACHE_DIR": str(tmp_path)}
    tests = str(Path(__file__).parents[1])
    with FakeBatchServer(delay=3600, reply=rule_reply) as server:
        judge = f"{server.base_url}#{MODEL}"
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD.format(tests=tests, judge=judge)],
            env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        deadline = time.monotonic() + 60
        while not server.batches and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert server.batches, "the child made no batch"
        time.sleep(0.2)  # the batch is written in the log as it is created
        child.kill()
        child.wait(10)
        submitted = len(server.requests)
        server.delay = 0.0  # the batch ends at the provider while nobody waits
        os.environ["CONTEXTLENS_CACHE_DIR"] = str(tmp_path)
        try:
            run = _run(judge, [RANKED], batch=True)
        finally:
            os.environ["CONTEXTLENS_CACHE_DIR"] = env["CONTEXTLENS_CACHE_DIR"]
    assert len(server.batches) == 1 and len(server.requests) == submitted == 20
    assert run.summaries[RANKED].n_failed == 0
    assert server.downloads >= 1


def test_the_batches_command_lists_and_cancels_what_a_stopped_run_left(tmp_path):
    with FakeBatchServer(delay=3600) as server:
        log = BatchLog(tmp_path / "batches.sqlite3")
        live = OpenAICompatBackend(MODEL, base_url=server.base_url, api_key="")
        backend = batched(live, log=log)
        import asyncio

        batch_id = asyncio.run(backend.api.submit([("r1", backend.api.request(_MSGS, None))]))
        log.record(backend.key, batch_id, ["r1"])
        states = asyncio.run(backend.logged())
        assert [(s.batch_id, s.ended) for s in states] == [(batch_id, False)]
        cancelled = asyncio.run(backend.cancel_logged())
        assert [s.status for s in cancelled] == ["cancelled"] and server.cancelled == 1
        assert log.batches(backend.key) == [] and log.batch_of(backend.key, "r1") is None


_MSGS = [{"role": "user", "content": "judge this"}]


def test_anthropic_message_batches_score_as_the_openai_shape(monkeypatch):
    def reply(params: dict) -> str:  # the rule judge reads the system prompt as a message
        system = {"role": "system", "content": params["system"]}
        return rule_reply({"messages": [system, *params["messages"]]})

    with FakeBatchServer(delay=0.05, reply=reply, api_key="sk-ant-test") as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        run = _run(f"anthropic:{MODEL}", [RANKED], batch=True)
        body = server.requests[0]["body"]
    summary = run.summaries[RANKED]
    assert summary.n == 20 and summary.n_failed == 0
    assert body["max_tokens"] > 0 and "system" in body
    assert all(m["role"] != "system" for m in body["messages"])
    assert server.batches[0].startswith("msgbatch_")


def test_a_request_id_is_the_same_call_in_every_run_and_fits_every_provider():
    body = {"model": "m", "messages": _MSGS}
    rid = request_id("k", body)
    assert rid == request_id("k", dict(reversed(body.items()))) and len(rid) == 40
    assert rid != request_id("other", body) and rid.isalnum()


def test_a_backend_without_a_batch_api_is_refused_with_what_has_one():
    from contextlens.judges.litellm import LiteLLMBackend

    with pytest.raises(ValueError, match="openai:MODEL"):
        batched(LiteLLMBackend("openai/gpt-4o-mini"))
    assert isinstance(batched(AnthropicBackend("claude-x", api_key="k")), BatchBackend)


def test_a_batch_log_that_cannot_be_written_is_said_once_and_the_run_goes_on(tmp_path):
    log = BatchLog(tmp_path / "b.sqlite3")
    log.close()
    (tmp_path / "b.sqlite3").write_bytes(b"not a database, " * 64)  # damaged after opening
    with FakeBatchServer(delay=0.05, reply=rule_reply) as server:
        live = OpenAICompatBackend(MODEL, base_url=server.base_url, api_key="")
        judge = batched(live, log=log)
        from contextlens.judges import LLMJudge

        with pytest.warns(RuntimeWarning, match="batch log"):
            run = evaluate(
                CASES_20,
                [RANKED],
                judge=LLMJudge(judge),
                cache=False,
                progress=False,
            )
    assert run.summaries[RANKED].n_failed == 0
    assert log.broken is not None and "not a database" in log.broken


def _contextlens(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(Path(__file__).parents[2] / "src"), *sys.path])
    return subprocess.run(
        [sys.executable, "-m", "contextlens", *args],
        env={**os.environ, **env, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(case) + "\n" for case in CASES_20[:4]))
    return data


def test_batch_with_a_judge_that_has_no_batch_api_is_a_usage_error_not_a_traceback(tmp_path):
    done = _contextlens(
        "run", str(_data(tmp_path)), "-m", RANKED, "--judge", "litellm:openai/gpt-4o-mini",
        "--batch", "--out", str(tmp_path / "out"),
        env={"CONTEXTLENS_CACHE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "error: batch judging goes through a provider's batch API" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("given", ["env", "url"])
def test_a_batched_run_writes_no_key_into_its_files(tmp_path, given):
    key = "sk-batchkey-0123456789abcdef"
    basic = base64.b64encode(f"me:{key}".encode())  # as the URL's credentials are sent
    env = {"CONTEXTLENS_CACHE_DIR": str(tmp_path / "cache")}
    with FakeBatchServer(
        delay=0.05, reply=rule_reply, api_key=key if given == "env" else None
    ) as server:
        url = server.base_url
        if given == "env":
            env["OPENAI_API_KEY"] = key
        else:
            url = url.replace("http://", f"http://me:{key}@")
        done = _contextlens(
            "run", str(_data(tmp_path)), "-m", RANKED, "--judge", f"{url}#{MODEL}",
            "--batch", "--out", str(tmp_path / "out"), env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(server.batches) == 1
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "batches.sqlite3" for p in written)
    assert [p for p in written if key.encode() in p.read_bytes()] == []
    assert [p for p in written if basic in p.read_bytes()] == []
    assert key not in done.stdout + done.stderr
    assert basic.decode() not in done.stdout + done.stderr


class _DeepEvalShaped:
    def __init__(self) -> None:
        self.calls = 0

    def get_model_name(self) -> str:
        return "my-model"

    def generate(self, prompt: str, schema=None) -> str:
        self.calls += 1
        return '{"reason": "-", "score": 1.0}'

    async def a_generate(self, prompt: str, schema=None) -> str:
        return self.generate(prompt, schema)


class _OpikShaped:
    def __init__(self) -> None:
        self.calls = 0

    def generate_string(self, input: str, response_format=None, **kwargs) -> str:
        self.calls += 1
        return '{"reason": "-", "score": 1.0}'

    async def agenerate_string(self, input: str, response_format=None, **kwargs) -> str:
        return self.generate_string(input, response_format)


@pytest.mark.parametrize("model", [_DeepEvalShaped(), _OpikShaped()], ids=["deepeval", "opik"])
def test_batch_with_a_users_model_object_is_an_error_before_any_call(model):
    with pytest.raises(ValueError, match="batch judging goes through a provider's batch API"):
        evaluate(CASES_20[:2], [RANKED], judge=model, batch=True, cache=False, progress=False)
    assert model.calls == 0


async def test_a_run_stopped_mid_batch_says_how_to_collect_or_cancel(caplog):
    import asyncio

    from contextlens.runner import aevaluate

    with FakeBatchServer(delay=3600) as server:
        task = asyncio.ensure_future(
            aevaluate(CASES_20, [RANKED], judge=f"{server.base_url}#{MODEL}", batch=True,
                      cache=False, progress=False)
        )  # fmt: skip
        while not server.batches:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        task.cancel()
        with (
            caplog.at_level("WARNING", logger="contextlens.judge"),
            pytest.raises(asyncio.CancelledError),
        ):
            await task
    said = [r.getMessage() for r in caplog.records if "keep running" in r.getMessage()]
    assert len(said) == 1 and server.batches[0] in said[0]
    assert "contextlens batches --judge JUDGE --cancel" in said[0]


def test_the_progress_of_a_batched_run_shows_the_batch_it_waits_for(tmp_path):
    with FakeBatchServer(delay=2.5, reply=rule_reply) as server:
        done = _contextlens(
            "run", str(_data(tmp_path)), "-m", RANKED, "--judge", f"{server.base_url}#{MODEL}",
            "--batch", "--out", str(tmp_path / "out"),
            env={"CONTEXTLENS_CACHE_DIR": str(tmp_path / "cache")},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (batch_id,) = server.batches
    waiting = [line for line in done.stderr.splitlines() if f"batch {batch_id}: " in line]
    assert waiting and "in_progress, 0/4 done" in waiting[0]  # said while no item was done
    assert "0 items" in waiting[0] or "0/4 items" in waiting[0]


def test_an_output_line_nested_too_deep_is_passed_over_and_the_run_scores(monkeypatch):
    from contextlens.testing import fake_batches

    plain = fake_batches._jsonl

    def with_a_hostile_line(lines):
        return plain(lines) + b"[" * 100_000 + b"\n"  # deeper than any JSON reader recurses

    monkeypatch.setattr(fake_batches, "_jsonl", with_a_hostile_line)
    with FakeBatchServer(delay=0.05, reply=rule_reply) as server:
        run = _run(f"{server.base_url}#{MODEL}", [RANKED], batch=True)
    summary = run.summaries[RANKED]
    assert summary.n == len(CASES_20) and summary.n_failed == 0
    assert len(server.batches) == 1
