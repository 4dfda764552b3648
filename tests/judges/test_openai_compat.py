"""OpenAICompatBackend against the real fake server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import aiohttp
import httpx
import pytest
from aiohttp import web
from pydantic import BaseModel

from contextlens.backend import (
    BackendConnectionError,
    BackendError,
    BackendTimeout,
    ChatBackend,
    FatalError,
    FormatRefused,
    Message,
    RateLimited,
    TransientError,
    http_error,
    parse_retry_after,
)
from contextlens.judges.openai_compat import OpenAICompatBackend, _env_proxy
from contextlens.judges.schema import DEFAULT_REPLY_TOKENS, wire_schema
from contextlens.testing import DEFAULT_REPLY, FakeOpenAIServer

MESSAGES: list[Message] = [
    {"role": "system", "content": "You are a judge."},
    {"role": "user", "content": "Rate this."},
]
SECRET = "sk-test-very-secret-0123456789"


class Verdict(BaseModel):
    reason: str
    score: float


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
async def backend(server: FakeOpenAIServer) -> AsyncIterator[OpenAICompatBackend]:
    async with OpenAICompatBackend("fake-model", base_url=server.base_url, api_key="") as b:
        yield b


async def test_normal_call_returns_text_usage_and_latency(
    server: FakeOpenAIServer, backend: OpenAICompatBackend
) -> None:
    assert isinstance(backend, ChatBackend)
    completion = await backend.complete(MESSAGES)
    assert completion.text == DEFAULT_REPLY
    assert completion.usage.prompt_tokens > 0
    assert completion.usage.completion_tokens > 0
    assert completion.usage.prompt_tokens == server.prompt_tokens
    assert completion.latency > 0
    assert completion.parsed is None
    sent = server.requests[-1]
    assert sent["model"] == "fake-model"
    assert sent["messages"] == MESSAGES
    assert sent["temperature"] == 0.0
    assert "seed" not in sent and "max_tokens" not in sent
    assert "response_format" not in sent


async def test_options_and_extra_body_are_sent(server: FakeOpenAIServer) -> None:
    async with OpenAICompatBackend(
        "m",
        base_url=server.base_url + "/",
        temperature=None,
        seed=7,
        max_tokens=64,
        extra_body={"top_p": 0.5},
        headers={"X-Trace": "abc"},
    ) as backend:
        await backend.complete(MESSAGES)
    sent = server.requests[-1]
    assert "temperature" not in sent
    assert (sent["seed"], sent["max_tokens"], sent["top_p"]) == (7, 64, 0.5)
    assert server.request_headers[-1]["X-Trace"] == "abc"


async def test_the_reply_schema_is_sent_as_json_schema_by_default(server: FakeOpenAIServer) -> None:
    async with OpenAICompatBackend("m", base_url=server.base_url) as backend:
        await backend.complete(MESSAGES, schema=Verdict)
        await backend.complete(MESSAGES)  # no schema: no response_format
    async with OpenAICompatBackend("m", base_url=server.base_url, structured_output="off") as off:
        await off.complete(MESSAGES, schema=Verdict)
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Verdict" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == wire_schema(Verdict)
    assert [("response_format" in r) for r in server.requests] == [True, False, False]
    # with a schema, max_tokens is sized from it; without one, nothing caps the reply
    assert [r.get("max_tokens") for r in server.requests] == [DEFAULT_REPLY_TOKENS, None, 512]


async def test_a_server_that_refuses_json_schema_gets_json_object_then_the_prompt_alone() -> None:
    with FakeOpenAIServer(formats=("text", "json_object")) as llama_like:
        async with OpenAICompatBackend("m", base_url=llama_like.base_url) as backend:
            with pytest.raises(FormatRefused, match="json_schema refused"):
                await backend.complete(MESSAGES, schema=Verdict)
            await backend.complete(MESSAGES, schema=Verdict)
            await backend.complete(MESSAGES, schema=Verdict)  # remembered: no new refusal
        sent = [r["response_format"]["type"] for r in llama_like.requests]
        assert sent == ["json_schema", "json_object", "json_object"]
        assert llama_like.requests[1]["response_format"]["schema"] == wire_schema(Verdict)
    with FakeOpenAIServer(formats=("text",)) as plain:
        async with OpenAICompatBackend("m", base_url=plain.base_url) as backend:
            for _ in range(2):
                with pytest.raises(FormatRefused):
                    await backend.complete(MESSAGES, schema=Verdict)
            await backend.complete(MESSAGES, schema=Verdict)
        assert [r.get("response_format", {}).get("type") for r in plain.requests] == [
            "json_schema",
            "json_object",
            None,
        ]


async def test_a_refused_format_is_an_error_when_it_was_asked_for_explicitly() -> None:
    with FakeOpenAIServer(formats=("text", "json_object")) as server:
        async with OpenAICompatBackend(
            "m", base_url=server.base_url, structured_output="json_schema"
        ) as backend:
            for _ in range(2):
                with pytest.raises(TransientError) as caught:
                    await backend.complete(MESSAGES, schema=Verdict)
                assert not isinstance(caught.value, FormatRefused)
        assert {r["response_format"]["type"] for r in server.requests} == {"json_schema"}


async def test_api_key_given_from_env_or_absent(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with OpenAICompatBackend("m", base_url=server.base_url, api_key=SECRET) as given:
        await given.complete(MESSAGES)
    assert server.request_headers[-1]["Authorization"] == f"Bearer {SECRET}"

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    async with OpenAICompatBackend("m", base_url=server.base_url) as from_env:
        await from_env.complete(MESSAGES)
    assert server.request_headers[-1]["Authorization"] == "Bearer sk-from-env"

    monkeypatch.delenv("OPENAI_API_KEY")
    async with OpenAICompatBackend("m", base_url=server.base_url) as anonymous:
        await anonymous.complete(MESSAGES)
    assert "Authorization" not in server.request_headers[-1]


def test_base_url_from_env_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:1234/v1/")
    assert OpenAICompatBackend("m").base_url == "http://localhost:1234/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    backend = OpenAICompatBackend("gpt-x")
    assert backend.base_url == "https://api.openai.com/v1"
    assert backend.key == "openai-compat:https://api.openai.com/v1#gpt-x"
    assert backend.name == "openai-compat"


def test_repr_hides_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = OpenAICompatBackend("m", base_url="http://127.0.0.1:1/v1", api_key=SECRET)
    assert SECRET not in repr(backend)
    assert SECRET not in str(backend)
    assert "m" in repr(backend)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert SECRET not in repr(OpenAICompatBackend("m"))


async def test_429_is_rate_limited_with_retry_after() -> None:
    with FakeOpenAIServer(script=["429"], retry_after="0.05") as server:
        async with OpenAICompatBackend("m", base_url=server.base_url, api_key=SECRET) as b:
            with pytest.raises(RateLimited) as info:
                await b.complete(MESSAGES)
            assert (await b.complete(MESSAGES)).text == DEFAULT_REPLY
    error = info.value
    assert error.status == 429
    assert error.retry_after == pytest.approx(0.05)
    assert error.retryable
    assert isinstance(error, BackendError)
    assert "rate limit" in str(error)
    assert SECRET not in str(error)


async def test_500_is_transient(server: FakeOpenAIServer, backend: OpenAICompatBackend) -> None:
    server.script = ["500"]
    with pytest.raises(TransientError) as info:
        await backend.complete(MESSAGES)
    assert info.value.status == 500
    assert info.value.retryable
    assert info.value.retry_after is None


def test_http_error_kinds() -> None:
    kinds = {s: type(http_error(s, "x")) for s in (408, 409, 429, 500, 503, 529, 400, 401, 422)}
    assert [s for s, k in kinds.items() if k is RateLimited] == [429, 503, 529]
    assert [s for s, k in kinds.items() if k is TransientError] == [408, 409, 500]
    assert [s for s, k in kinds.items() if k is FatalError] == [400, 401, 422]
    assert all(http_error(s, "x").retryable == (k is not FatalError) for s, k in kinds.items())


def test_parse_retry_after() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.25 ") == 0.25
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("-1") is None
    when = datetime.now(timezone.utc) + timedelta(seconds=30)
    parsed = parse_retry_after(format_datetime(when, usegmt=True))
    assert parsed is not None and 25 <= parsed <= 31
    past = format_datetime(datetime(2000, 1, 1, tzinfo=timezone.utc), usegmt=True)
    assert parse_retry_after(past) == 0.0


async def test_timeout_gives_backend_timeout() -> None:
    with FakeOpenAIServer(timeout_rate=1.0, hang_time=2.0) as server:
        async with OpenAICompatBackend("m", base_url=server.base_url, timeout=0.1) as b:
            with pytest.raises(BackendTimeout) as info:
                await b.complete(MESSAGES)
    assert info.value.retryable
    assert isinstance(info.value, BackendError)


async def test_connection_refused_gives_connection_error() -> None:
    with FakeOpenAIServer() as server:
        base_url = server.base_url  # the port is free again once the server stops
    async with OpenAICompatBackend("m", base_url=base_url, api_key=SECRET, timeout=2) as b:
        with pytest.raises(BackendConnectionError) as info:
            await b.complete(MESSAGES)
    assert info.value.retryable
    assert SECRET not in str(info.value)


@pytest.fixture
async def odd_server() -> AsyncIterator[str]:
    """A real HTTP server on 127.0.0.1 whose 200 replies are unusable in three ways."""
    bodies = {
        "a": {"choices": []},
        "b": {"choices": [{"message": {"content": None, "refusal": "no"}}]},
    }

    async def handler(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name in bodies:
            return web.json_response(bodies[name])
        return web.Response(text="<html>", content_type="text/html")

    app = web.Application()
    app.router.add_post("/{name}/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_reply_without_content_is_not_retryable(odd_server: str) -> None:
    for prefix, expected in (("a", "no choices"), ("b", "refusal"), ("c", "not JSON")):
        async with OpenAICompatBackend("m", base_url=f"{odd_server}/{prefix}") as backend:
            with pytest.raises(BackendError) as info:
                await backend.complete(MESSAGES)
        assert not info.value.retryable
        assert expected in str(info.value)


async def test_peak_in_flight_under_concurrent_calls() -> None:
    with FakeOpenAIServer(latency=0.05) as server:
        async with OpenAICompatBackend("m", base_url=server.base_url) as backend:
            results = await asyncio.gather(*(backend.complete(MESSAGES) for _ in range(20)))
    assert all(r.text == DEFAULT_REPLY for r in results)
    assert server.calls == 20
    assert server.peak_in_flight > 1


async def test_max_in_flight_makes_excess_visible() -> None:
    with FakeOpenAIServer(latency=0.05, max_in_flight=4) as server:
        async with OpenAICompatBackend("m", base_url=server.base_url) as backend:
            results = await asyncio.gather(
                *(backend.complete(MESSAGES) for _ in range(20)), return_exceptions=True
            )
    rejected = [r for r in results if isinstance(r, RateLimited)]
    assert rejected and all(r.status == 429 for r in rejected)
    assert server.status_counts[429] == len(rejected)
    assert server.peak_in_flight > 4


def test_embeddings_endpoint(server: FakeOpenAIServer) -> None:
    response = httpx.post(f"{server.base_url}/embeddings", json={"model": "e", "input": ["a"]})
    assert response.status_code == 200
    assert len(response.json()["data"][0]["embedding"]) == 384
    assert server.embedding_calls == 1


def test_same_backend_from_two_event_loops(server: FakeOpenAIServer) -> None:
    backend = OpenAICompatBackend("m", base_url=server.base_url)
    sessions: list[aiohttp.ClientSession] = []

    async def once(close: bool) -> str:
        completion = await backend.complete(MESSAGES)
        sessions.append(backend._sessions.get().session)
        if close:
            await backend.aclose()
        return completion.text

    assert asyncio.run(once(close=True)) == asyncio.run(once(close=True)) == DEFAULT_REPLY
    # No aclose: the loop's shutdown closes the session, and the next loop gets its own.
    assert asyncio.run(once(close=False)) == asyncio.run(once(close=False)) == DEFAULT_REPLY
    assert len({id(s) for s in sessions}) == 4
    assert all(s.closed for s in sessions)
    assert server.calls == 4


def test_proxy_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert _env_proxy("https://api.openai.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.local:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert _env_proxy("https://api.openai.com/v1") == "http://proxy.local:3128"
    assert _env_proxy("https://internal.example/v1") is None
    assert _env_proxy("http://127.0.0.1:8000/v1") is None  # no HTTP_PROXY set


def test_a_base_url_with_a_query_keeps_it_after_the_path() -> None:
    """A gateway's ``?api-version=`` stays a query: the call goes to ``.../v1/chat/completions``
    with it, not to ``/v1?api-version=.../chat/completions`` (a 404)."""
    from contextlens import ModelTestCase, evaluate

    with FakeOpenAIServer(reply=lambda body: '{"reason": "r", "score": 0.5}') as server:
        judge = f"{server.base_url}?api-version=2024-06-01#m"
        run = evaluate(
            [ModelTestCase(input="q", actual_output="a", expected_output="a", context=["c"])],
            ["context-precision"],
            judge=judge,
            cache=False,
            progress=False,
        )
    [item] = run.iter_results()
    assert not item.failed, item.error
    assert item.score == 0.5
