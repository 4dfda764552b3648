"""The engine end to end: evaluate() against a real fake judge server."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from contextlens import Batch, Context, ContextPrecision, Dataset, InputError
from contextlens.runner import evaluate
from contextlens.schemas import ModelTestCase
from contextlens.testing import FakeOpenAIServer


def sessions(n, turns=1, prefix="s"):
    return [
        Dataset(
            session_id=f"{prefix}{i}",
            assistant_id="bot",
            context=f"Context number {i}: the shop opens at {i % 12 + 1} am.",
            conversation=[
                Batch(qa_id=f"q{j}", query=f"question {i}.{j}", assistant=f"answer {i}.{j}")
                for j in range(turns)
            ],
        )
        for i in range(n)
    ]


def scored(score, reason="ok"):
    return "```json\n" + json.dumps({"reason": reason, "score": score}) + "\n```"


def judge_spec(server, model="m"):
    return f"{server.base_url}#{model}"


def test_mixed_metrics_results_per_case_and_failures_kept_apart(tmp_path):
    def reply(request):
        text = " ".join(m["content"] for m in request["messages"])
        return "not json at all" if "answer 1.0" in text else scored(0.5)

    cases = [*sessions(3), ModelTestCase(input="q", actual_output="a", retrieval_context=["c"])]
    with FakeOpenAIServer(reply=reply) as server:
        run = evaluate(
            cases,
            [Context(), ContextPrecision()],
            judge=judge_spec(server),
            cache=False,
            progress=False,
            out=tmp_path,
        )
    ctx = run.summaries["context"]
    assert (ctx.n, ctx.n_scored, ctx.n_failed) == (3, 2, 1)
    assert ctx.mean == pytest.approx(0.5)
    failed = run.failures()
    assert [f.case_id for f in failed] == ["s1"] and "failed" in failed[0].error
    prec = run.summaries["context-precision"]
    assert (prec.n, prec.n_scored) == (1, 1)
    assert Path(run.out_dir).parent == tmp_path  # the run's own folder
    lines = (Path(run.out_dir) / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4
    summary = json.loads((Path(run.out_dir) / "summary.json").read_text())
    assert summary["summaries"]["context"]["n_failed"] == 1


def test_concurrency_is_bounded_in_judge_calls_not_cases():
    with FakeOpenAIServer(latency=0.05) as server:
        evaluate(
            sessions(10, turns=6),
            [Context()],
            judge=judge_spec(server, "bound"),
            max_concurrency=8,
            cache=False,
            progress=False,
        )
        assert server.calls == 60
        assert server.peak_in_flight == 8


def test_rate_limits_are_retried_honouring_retry_after_and_counted():
    script = ["429", "429", "500", "ok"]
    with FakeOpenAIServer(script=script, retry_after="0.2") as server:
        start = time.perf_counter()
        run = evaluate(
            sessions(1),
            [Context()],
            judge=judge_spec(server, "rl"),
            cache=False,
            progress=False,
        )
        elapsed = time.perf_counter() - start
        assert server.calls == 4
    assert run.summaries["context"].n_failed == 0
    assert run.accounting.total.retries == 3
    assert run.accounting.total.calls == 4
    assert elapsed >= 0.4  # two Retry-After waits of 0.2 s, one after the other


def test_cache_hits_and_invalidation(tmp_path):
    cache = tmp_path / "cache.sqlite3"
    with FakeOpenAIServer() as server:
        kw = {"cache": cache, "progress": False}
        evaluate(sessions(4, 2), [Context()], judge=judge_spec(server), **kw)
        assert server.calls == 8
        again = evaluate(sessions(4, 2), [Context()], judge=judge_spec(server), **kw)
        assert server.calls == 8  # zero new calls
        assert again.accounting.total.cache_hits == 8
        evaluate(sessions(4, 2), [Context()], judge=judge_spec(server, "other-model"), **kw)
        assert server.calls == 16  # a new model is a new key
        changed = sessions(4, 2)
        changed[0].conversation[0].assistant = "a different answer"
        evaluate(changed, [Context()], judge=judge_spec(server), **kw)
        assert server.calls == 17  # only the changed prompt is asked


def test_repeats_ask_k_times_and_report_the_judge_spread(tmp_path):
    seen: dict[str, int] = {}

    def reply(request):  # the k-th ask of the same prompt gets the k-th score
        prompt = request["messages"][-1]["content"]
        seen[prompt] = seen.get(prompt, -1) + 1
        return scored([0.2, 0.6, 1.0][seen[prompt] % 3])

    cache = tmp_path / "c.sqlite3"
    with FakeOpenAIServer(reply=reply) as server:
        run = evaluate(
            sessions(5),
            [Context()],
            judge=judge_spec(server),
            repeats=3,
            cache=cache,
            progress=False,
        )
        assert server.calls == 15
        evaluate(
            sessions(5),
            [Context()],
            judge=judge_spec(server),
            repeats=3,
            cache=cache,
            progress=False,
        )
        assert server.calls == 15  # repeats are cached by repeat index
    summary = run.summaries["context"]
    assert summary.judge_spread == pytest.approx(np.std([0.2, 0.6, 1.0]))
    assert summary.mean == pytest.approx(0.6)
    items = run.results
    assert all(len(i.repeats) == 3 for i in items)
    assert summary.ci_low < summary.mean < summary.ci_high


def test_accounting_matches_the_server():
    with FakeOpenAIServer() as server:
        run = evaluate(
            sessions(6, 2),
            [Context()],
            judge=judge_spec(server, "gpt-4o-mini"),
            cache=False,
            progress=False,
        )
        total = run.accounting.total
        assert total.calls == server.calls == 12
        assert total.prompt_tokens == server.prompt_tokens
        assert total.completion_tokens == server.completion_tokens
        assert total.cost > 0
        assert run.summaries["context"].accounting.calls == 12


def test_streaming_keeps_finished_results_when_the_input_breaks(tmp_path):
    def cases():
        yield from sessions(5)
        yield {"session_id": "bad", "assistant_id": "bot", "context": "c", "conversation": None}
        yield from sessions(5, prefix="never")

    with FakeOpenAIServer() as server, pytest.raises(InputError, match="case 5") as info:
        evaluate(
            cases(),
            [Context()],
            judge=judge_spec(server),
            cache=False,
            out=tmp_path,
            progress=False,
        )
    assert info.value.field == "conversation"
    lines = next(tmp_path.glob("*/results.jsonl")).read_text().splitlines()
    written = [json.loads(x)["case_id"] for x in lines]
    assert sorted(written) == [f"s{i}" for i in range(5)]


def test_offline_run_needs_no_judge_and_scores_everything():
    run = evaluate(sessions(3, 2), [Context()], cache=False, progress=False)
    assert run.judge == "offline" and run.summaries["context"].n_scored == 3
    assert run.accounting.total.calls == 0


class CountingEmbedder:
    """An async embedder that records how many of its calls overlap."""

    name = "counting"

    def __init__(self, batches: bool) -> None:
        self.batches_concurrent_calls = batches
        self.active = self.peak = 0

    async def embed(self, texts):
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        rows = np.ones((len(texts), 4), np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize(("batches", "most"), [(False, 32), (True, 512)])
def test_offline_cases_in_flight_grow_only_for_an_embedder_that_batches(batches, most):
    embedder = CountingEmbedder(batches)
    evaluate(sessions(600), [Context()], embedder=embedder, cache=False, progress=False)
    assert embedder.peak == most  # twice max_concurrency (16), or OFFLINE_CASES_IN_FLIGHT


RESUME = textwrap.dedent(
    """
    import sys
    from contextlens import Batch, Context, Dataset
    from contextlens.runner import evaluate
    sessions = [Dataset(session_id=f"s{i}", assistant_id="b", context="c",
                        conversation=[Batch(qa_id="q", query=f"q{i}", assistant=f"a{i}")])
                for i in range(40)]
    evaluate(sessions, [Context()], judge=sys.argv[1], cache=sys.argv[2], max_concurrency=4,
             progress=False)
    """
)


def test_a_killed_run_resumes_with_only_the_unfinished_calls(tmp_path):
    cache = tmp_path / "cache.sqlite3"
    script = tmp_path / "run.py"
    script.write_text(RESUME)
    with FakeOpenAIServer(latency=0.05) as server:
        spec = judge_spec(server, "resume")
        proc = subprocess.Popen([sys.executable, str(script), spec, str(cache)])
        deadline = time.time() + 30
        while server.calls < 15 and time.time() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        first = server.calls
        assert 15 <= first < 40
        run = subprocess.run([sys.executable, str(script), spec, str(cache)], timeout=60)
        assert run.returncode == 0
        second = server.calls - first
    # Everything answered before the kill was cached; at most the calls in flight
    # at the kill (4) are asked again.
    assert 40 - first <= second <= 40 - first + 4


def test_failed_items_are_asked_afresh_and_reasked_items_replay_from_cache(tmp_path):
    cache = tmp_path / "c.sqlite3"
    kw = {"cache": cache, "progress": False}
    with FakeOpenAIServer(script=["garbage", "garbage"]) as server:
        run = evaluate(sessions(1), [Context()], judge=judge_spec(server), **kw)
        assert run.summaries["context"].n_failed == 1 and server.calls == 2
        run = evaluate(sessions(1), [Context()], judge=judge_spec(server), **kw)
        assert run.summaries["context"].n_failed == 0 and server.calls == 3
    with FakeOpenAIServer(script=["garbage"]) as server:
        evaluate(sessions(1, prefix="r"), [Context()], judge=judge_spec(server, "x"), **kw)
        assert server.calls == 2  # the invalid reply and the re-ask
        evaluate(sessions(1, prefix="r"), [Context()], judge=judge_spec(server, "x"), **kw)
        assert server.calls == 2  # both replayed from the cache


def test_a_new_concurrency_applies_at_once_on_a_known_backend():
    with FakeOpenAIServer(latency=0.05) as server:
        spec = judge_spec(server, "limits")
        evaluate(
            sessions(2), [Context()], judge=spec, max_concurrency=2, cache=False, progress=False
        )
        evaluate(
            sessions(10, 4, prefix="t"),
            [Context()],
            judge=spec,
            max_concurrency=16,
            cache=False,
            progress=False,
        )
        assert server.peak_in_flight == 16
