import asyncio
import json

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.runnables import RunnableLambda
from pydantic import BaseModel, Field

from contextlens.backend import Completion, Usage
from contextlens.errors import JudgeError
from contextlens.judges import LLMJudge, OpenAICompatBackend, as_backend, resolve_judge
from contextlens.testing import FakeOpenAIServer


class Verdict(BaseModel):
    reason: str
    score: float = Field(ge=0, le=1, allow_inf_nan=False)


class Scripted:
    """A chat backend that answers from a list and records what it was sent."""

    name = "scripted"
    model = "m"
    use_structured_output = False

    @property
    def key(self):
        return f"scripted:{id(self)}"

    def __init__(self, replies, delay=0.0):
        self.params = {}
        self.replies = list(replies)
        self.sent = []
        self.delay = delay
        self.in_flight = self.peak = 0

    async def complete(self, messages, *, schema=None):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            self.sent.append(list(messages))
            return Completion(self.replies.pop(0), Usage(10, 5), 0.01)
        finally:
            self.in_flight -= 1


MSGS = [{"role": "user", "content": "judge this"}]


async def test_valid_reply_first_time():
    backend = Scripted(['{"reason": "ok", "score": 0.8}'])
    out = await LLMJudge(backend).judge(MSGS, Verdict)
    assert out.output.score == 0.8 and out.attempts == 1 and out.usage == Usage(10, 5)


async def test_one_reask_with_the_validation_error():
    backend = Scripted(['{"reason": "ok", "score": 8}', '{"reason": "ok", "score": 0.8}'])
    out = await LLMJudge(backend).judge(MSGS, Verdict)
    assert out.attempts == 2 and out.output.score == 0.8
    assert out.usage == Usage(20, 10)
    reask = backend.sent[1][-1]["content"]
    assert "less than or equal to 1" in reask


async def test_two_bad_replies_fail_with_the_reason():
    backend = Scripted(["no idea", '{"reason": "x", "score": NaN}'])
    with pytest.raises(JudgeError, match="after one re-ask") as info:
        await LLMJudge(backend).judge(MSGS, Verdict)
    assert "NaN" in info.value.raw
    assert len(backend.sent) == 2


async def test_transport_errors_become_judge_errors():
    class Broken(Scripted):
        async def complete(self, messages, *, schema=None):
            raise ConnectionError("refused")

    with pytest.raises(JudgeError, match="refused"):
        await LLMJudge(Broken([])).judge(MSGS, Verdict)


async def test_concurrency_bound_is_shared_by_all_callers():
    backend = Scripted(['{"reason": "ok", "score": 1}'] * 30, delay=0.01)
    judge = LLMJudge(backend, max_concurrency=4)
    await asyncio.gather(*(judge.judge(MSGS, Verdict) for _ in range(30)))
    assert backend.peak == 4


async def test_langchain_fake_chat_model():
    model = FakeListChatModel(responses=['```json\n{"reason": "fine", "score": 0.6}\n```'])
    judge = resolve_judge(model)
    out = await judge.judge(MSGS, Verdict)
    assert out.output.score == 0.6 and judge.name.startswith("langchain:")


async def test_langchain_structured_output_is_used_and_validated():
    calls = []

    class StructuredFake(FakeListChatModel):
        def with_structured_output(self, schema, include_raw=False):
            calls.append((schema, include_raw))

            def call(messages):
                raw = self.invoke(messages)
                return {"raw": raw, "parsed": json.loads(raw.content), "parsing_error": None}

            return RunnableLambda(call)

    model = StructuredFake(
        responses=['{"reason": "a", "score": 2}', '{"reason": "b", "score": 0.3}']
    )
    out = await resolve_judge(as_backend(model, use_structured_output=True)).judge(MSGS, Verdict)
    assert calls == [(Verdict, True)]  # built once, used for the ask and the re-ask
    assert out.attempts == 2 and out.output == Verdict(reason="b", score=0.3)


def test_resolve_specs():
    assert resolve_judge(None) is None and resolve_judge("offline") is None
    j = resolve_judge("http://127.0.0.1:9/v1#tiny")
    assert j.name == "openai-compat:tiny"
    assert resolve_judge("openai:gpt-4o-mini").name == "openai-compat:gpt-4o-mini"
    assert resolve_judge("gpt-4o").name == "openai-compat:gpt-4o"
    with pytest.raises(ValueError, match="unknown kind"):
        resolve_judge("foo:bar")
    with pytest.raises(TypeError, match="cannot judge"):
        resolve_judge(42)


def test_litellm_without_the_extra_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_litellm(name, *args, **kwargs):
        if name == "litellm":
            raise ImportError("No module named 'litellm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_litellm)
    with pytest.raises(ImportError, match=r"contextlens\[litellm\]"):
        resolve_judge("litellm:anthropic/claude-3-5-haiku")
    with pytest.raises(ImportError, match=r"contextlens\[litellm\]"):
        resolve_judge("anthropic/claude-3-5-haiku")


def test_spec_settings_configure_the_backend_and_the_judge():
    j = resolve_judge(
        "http://127.0.0.1:9/v1#tiny?timeout=240&max_tokens=400&concurrency=3&structured=json_object"
    )
    b = j.backend
    assert (b.timeout, b.max_tokens, b.concurrency, b.formats.current) == (
        240.0,
        400,
        3,
        "json_object",
    )
    assert j.retry.timeout == 240.0 and j.limiter.max_limit == 3
    assert j.limiter.origin == "set to 3"
    # a local server waits longer than a remote API by default
    assert resolve_judge("http://localhost:9/v1#m").retry.timeout == 300.0
    assert resolve_judge("https://api.example.com/v1#m").retry.timeout == 60.0


async def test_a_local_server_sets_the_limit_from_its_slots_or_a_ramp_starting_at_one():
    with (
        # calls long enough that those sent together are in flight together on a busy machine
        FakeOpenAIServer(slots=3, latency=0.3) as reporting,
        FakeOpenAIServer(latency=0.3) as silent,
    ):
        j = LLMJudge(OpenAICompatBackend("m", base_url=reporting.base_url))
        await asyncio.gather(*(j.judge(MSGS, Verdict) for _ in range(6)))
        assert (j.limiter.max_limit, reporting.peak_in_flight) == (3, 3)
        assert j.limiter.origin == "reported by the server"
        # no slots said: the first four calls go one at a time (the first warms the
        # server up, the next three are timed), then two at a time
        j = LLMJudge(OpenAICompatBackend("m", base_url=silent.base_url))
        await asyncio.gather(*(j.judge(MSGS, Verdict) for _ in range(6)))
        assert (j.limiter.max_limit, silent.peak_in_flight, j.limiter.origin) == (2, 2, "ramping")


async def test_a_timed_out_call_lowers_the_limit():
    with FakeOpenAIServer(slots=4, script=["timeout"], hang_time=2.0) as server:
        backend = OpenAICompatBackend("slow", base_url=server.base_url, timeout=0.3)
        j = LLMJudge(backend)
        out = await j.judge(MSGS, Verdict)
        assert out.output.score == 1.0
        assert (j.limiter.timeouts, j.limiter.lowest) == (1, 2)


async def test_a_cached_reply_is_read_not_written_again(tmp_path):
    from contextlens.engine.cache import Cache

    cache = Cache(tmp_path / "c.sqlite3")
    backend = Scripted(['{"reason": "bad", "score": 8}', '{"reason": "ok", "score": 0.8}'])
    judge = LLMJudge(backend, cache=cache)
    first = await judge.judge(MSGS, Verdict)
    assert first.attempts == 2 and cache.writes == 2  # the invalid reply and the re-ask
    again = await LLMJudge(backend, cache=cache).judge(MSGS, Verdict)
    assert again.output.score == 0.8 and again.attempts == 2
    assert cache.writes == 2 and cache.hits == 2 and backend.replies == []
