"""How many calls at once a local server is asked: as many as it says it serves (llama.cpp's
``/props`` or ``/slots``, TGI's ``/info``), else as many as a ramp over the run's first calls
finds it serves without slowing down. A probe that fails is a server that did not say;
``--concurrency`` (or a spec's ``concurrency=``) wins; a remote API keeps the default.

Every server here is a real HTTP server on 127.0.0.1 that works on ``serves`` requests at once
and queues the others, so a call's latency grows when more are in flight than it serves; the
calls in flight are counted on the server's side."""

from __future__ import annotations

import asyncio
import json
import time
import warnings
from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from contextlens import ModelTestCase, evaluate
from contextlens.backend import ChatBackend, Completion, Message, Usage
from contextlens.engine.limiter import DEFAULT_LIMIT, FOUND_BY_RAMP, REPORTED, limiter_for
from contextlens.judges import LLMJudge, OpenAICompatBackend, llm, openai_compat
from contextlens.testing import FakeOpenAIServer
from support.relevancy import all_relevant

MSGS: list[Message] = [{"role": "user", "content": "judge this"}]
LATENCY = 0.15  # long beside the client's and the server's own overhead, even on a busy machine


class Verdict(BaseModel):
    reason: str
    score: float


@pytest.fixture(autouse=True)
def _limits_not_said_yet(monkeypatch):
    """Each test hears its judge's limit said: the note is said once per backend key, and an
    earlier test's server may have had the same port."""
    monkeypatch.setattr(llm, "_said", set())


def judge_of(server: FakeOpenAIServer, **settings: object) -> LLMJudge:
    return LLMJudge(OpenAICompatBackend("m", base_url=server.base_url, **settings))


async def ask(judge: LLMJudge, n: int) -> None:
    outs = await asyncio.gather(*(judge.judge(MSGS, Verdict) for _ in range(n)))
    assert [o.output.score for o in outs] == [1.0] * n


# --- a server that does not say: the ramp -----------------------------------------------


async def test_a_server_serving_eight_at_once_is_found_to_and_then_asked_eight_at_a_time():
    with FakeOpenAIServer(serves=8, latency=LATENCY) as server:
        judge = judge_of(server)
        with pytest.warns(UserWarning, match="is asked 8 calls at a time: found by a ramp") as w:
            await ask(judge, 100)
        said = [str(x.message) for x in w if "at a time" in str(x.message)]
        assert len(said) == 1 and "16 at once were" in said[0] and "--concurrency" in said[0]
        assert (judge.limiter.max_limit, judge.limiter.origin) == (8, FOUND_BY_RAMP)
        # the ramp tried 16 at once and stepped back; its calls were the run's own
        assert server.peak_in_flight == 16 and server.calls == 100
        server.reset()
        await ask(judge, 40)
        assert server.peak_in_flight == 8


async def test_a_server_serving_one_at_a_time_is_found_to_and_asked_so():
    with FakeOpenAIServer(serves=1, latency=0.1) as server:
        judge = judge_of(server)
        await ask(judge, 12)
        assert (judge.limiter.max_limit, judge.limiter.origin) == (1, FOUND_BY_RAMP)
        assert "2 at once were" in judge.limiter.ramp.reason
        assert server.peak_in_flight == 2  # tried, and slower by twice
        server.reset()
        await ask(judge, 4)
        assert server.peak_in_flight == 1


async def test_a_server_that_serves_everything_is_asked_the_engines_default_at_most():
    with FakeOpenAIServer(latency=LATENCY) as server:
        judge = judge_of(server)
        await ask(judge, 80)
        assert (judge.limiter.max_limit, judge.limiter.origin) == (DEFAULT_LIMIT, FOUND_BY_RAMP)
        assert "the most a ramp tries" in judge.limiter.ramp.reason
        assert server.peak_in_flight == DEFAULT_LIMIT


async def test_a_rate_limit_ends_the_ramp_at_the_level_below():
    with FakeOpenAIServer(max_in_flight=4, latency=LATENCY, retry_after="0.01") as server:
        judge = judge_of(server)
        await ask(judge, 40)  # every call answered in the end
        assert (judge.limiter.max_limit, judge.limiter.origin) == (4, FOUND_BY_RAMP)
        assert judge.limiter.ramp.reason == "a rate limit at 8 at once"
        assert server.status_counts[429] >= 1


# --- a server that says ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("via", "path"), [("props", "/props"), ("slots", "/slots"), ("info", "/info")]
)
async def test_a_reported_slot_count_is_used_exactly(via, path):
    with FakeOpenAIServer(slots=3, slots_via=via, serves=8, latency=0.05) as server:
        judge = judge_of(server)
        with pytest.warns(UserWarning, match="is asked 3 calls at a time: reported by the server"):
            await ask(judge, 30)
        assert (judge.limiter.max_limit, judge.limiter.origin) == (3, REPORTED)
        assert judge.limiter.ramp is None
        assert server.peak_in_flight == 3  # from the first call: never more, never fewer
        assert server.probes == [path]  # asked once, where that server says it


async def test_the_probe_carries_the_judges_credentials():
    with FakeOpenAIServer(slots=2, slots_via="info") as server:
        backend = OpenAICompatBackend("m", base_url=server.base_url, api_key="sk-local")
        assert await backend.server_slots() == 2
        await backend.aclose()
        assert server.probes == ["/info"]  # after /props and /slots answered 404
        assert server.probe_headers[0]["Authorization"] == "Bearer sk-local"


# --- a probe that fails ---------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["500", "garbage", "hang"])
async def test_a_failing_probe_does_not_fail_the_run(fault, monkeypatch):
    monkeypatch.setattr(openai_compat, "PROBE_TIMEOUT", 0.5)
    with FakeOpenAIServer(
        slots=8, probe_fault=fault, hang_time=20.0, serves=2, latency=0.1
    ) as server:
        judge = judge_of(server)
        started = time.monotonic()
        await ask(judge, 24)
        assert time.monotonic() - started < 10  # the hang was not waited out
        assert server.probes  # it was asked, and its answer was not believed
        assert (judge.limiter.max_limit, judge.limiter.origin) == (2, FOUND_BY_RAMP)


async def test_a_probe_that_raises_in_a_users_backend_does_not_fail_the_run():
    class Probing(ChatBackend):
        name, model, local = "probing", "m", True
        in_flight = peak = 0

        @property
        def key(self) -> str:
            return f"probing:{id(self)}"

        async def server_slots(self) -> int | None:
            raise ConnectionError("the server's status page is down")

        async def complete(
            self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
        ) -> Completion:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                await asyncio.sleep(0.02)
                return Completion(json.dumps({"reason": "ok", "score": 1.0}), Usage(1, 1))
            finally:
                self.in_flight -= 1

    backend = Probing()
    judge = LLMJudge(backend)
    await ask(judge, 20)
    assert judge.limiter.ramp is not None and backend.peak > 1


# --- what is set wins; a remote API keeps the default ---------------------------------------


def cases(n: int) -> list[ModelTestCase]:
    return [
        ModelTestCase(
            input=f"When do you open on day {i}?",
            actual_output="At 9 am.",
            expected_output="9 am.",
            retrieval_context=["We open at 9 am."],
        )
        for i in range(n)
    ]


def precision(request: dict) -> str:
    prompt = "\n".join(m["content"] for m in request["messages"])
    if "Chunk 1:" in prompt:
        return json.dumps(all_relevant(request["messages"][-1]["content"]))
    return json.dumps({"reason": "Matches.", "score": 0.8})


def test_the_runs_concurrency_and_the_specs_win_over_what_the_server_says_or_a_ramp(
    run_cli, tmp_path
):
    data = tmp_path / "cases.jsonl"
    data.write_text(
        "".join(json.dumps(c.model_dump(exclude_none=True)) + "\n" for c in cases(40)),
        encoding="utf-8",
    )
    for slots in (5, None):
        with FakeOpenAIServer(reply=precision, slots=slots, serves=8, latency=0.05) as server:
            code, text = run_cli("run", data, "-m", "context-precision", "--judge",
                                 f"{server.base_url}#m", "--concurrency", "3", "--no-store",
                                 "-q")  # fmt: skip
            assert code == 0, text
            assert server.peak_in_flight == 3 and server.probes == []
            assert "at a time" not in text
    with FakeOpenAIServer(reply=precision, slots=5, serves=8, latency=0.05) as server:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # nothing to say: it was set
            run = evaluate(
                cases(40), ["context-precision"], judge=f"{server.base_url}#m?concurrency=2",
                cache=False, progress=False,
            )  # fmt: skip
        assert run.summaries["context-precision"].n_failed == 0
        assert server.peak_in_flight == 2 and server.probes == []


def test_a_run_without_a_concurrency_gets_more_than_one_call_in_flight_on_a_server_of_eight():
    with FakeOpenAIServer(reply=precision, serves=8, latency=LATENCY) as server:
        run = evaluate(
            cases(90), ["context-precision"], judge=f"{server.base_url}#m", cache=False,
            progress=False,
        )  # fmt: skip
        assert run.summaries["context-precision"].n_failed == 0
        assert server.calls == run.accounting.total.calls == 90
        assert server.peak_in_flight > 1
        limiter = limiter_for(OpenAICompatBackend("m", base_url=server.base_url).key)
        assert (limiter.max_limit, limiter.origin) == (8, FOUND_BY_RAMP)


async def test_a_remote_api_keeps_the_engines_default():
    remote = OpenAICompatBackend("m", base_url="https://api.example.com/v1", api_key="sk-x")
    assert not remote.local and await remote.server_slots() is None  # nothing is sent

    class Remote(ChatBackend):
        name, model = "remote", "m"
        in_flight = peak = 0

        @property
        def key(self) -> str:
            return f"remote:{id(self)}"

        async def complete(
            self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None
        ) -> Completion:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                await asyncio.sleep(0.02)
                return Completion(json.dumps({"reason": "ok", "score": 1.0}), Usage(1, 1))
            finally:
                self.in_flight -= 1

    backend = Remote()
    judge = LLMJudge(backend)
    await ask(judge, 40)
    assert (judge.limiter.origin, judge.limiter.ramp, backend.peak) == ("default", None, 16)
