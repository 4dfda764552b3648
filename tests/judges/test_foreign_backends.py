"""LangChain and LiteLLM under the backend contract: their exceptions become rate limits,
transient faults and fatal errors, so retries, Retry-After and the adaptive limiter behave as
for the built-in backend. Against a real server on 127.0.0.1 injecting 429s and 500s."""

from __future__ import annotations

import json

import httpx
import litellm
import openai
import pytest
from langchain_core.exceptions import OutputParserException
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, ValidationError

from contextlens import ModelTestCase, evaluate
from contextlens.backend import (
    BackendConnectionError,
    BackendTimeout,
    FatalError,
    RateLimited,
    TransientError,
)
from contextlens.engine.limiter import limiter_for
from contextlens.judges import LangChainBackend, LiteLLMBackend, OpenAIClientBackend
from contextlens.judges.errors import as_backend_error, is_reply_error
from contextlens.judges.schema import DEFAULT_REPLY_TOKENS
from contextlens.testing import FakeOpenAIServer

URL = "http://127.0.0.1:9/v1/chat/completions"


def response(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers, request=httpx.Request("POST", URL))


def test_openai_sdk_exceptions_map_to_the_three_kinds():
    limited = as_backend_error(
        openai.RateLimitError(
            "slow down", response=response(429, **{"retry-after": "0.3"}), body=None
        )
    )
    assert isinstance(limited, RateLimited) and limited.retry_after == pytest.approx(0.3)
    millis = as_backend_error(
        openai.RateLimitError("x", response=response(429, **{"retry-after-ms": "250"}), body=None)
    )
    assert millis.retry_after == pytest.approx(0.25)
    overloaded = as_backend_error(
        openai.InternalServerError("busy", response=response(503), body=None)
    )
    assert isinstance(overloaded, RateLimited)
    broken = as_backend_error(openai.InternalServerError("oops", response=response(500), body=None))
    assert isinstance(broken, TransientError) and broken.status == 500
    denied = as_backend_error(openai.AuthenticationError("no", response=response(401), body=None))
    assert isinstance(denied, FatalError) and not denied.retryable
    request = httpx.Request("POST", URL)
    assert isinstance(as_backend_error(openai.APITimeoutError(request)), BackendTimeout)
    assert isinstance(
        as_backend_error(openai.APIConnectionError(request=request)), BackendConnectionError
    )
    assert isinstance(as_backend_error(httpx.ConnectError("refused")), BackendConnectionError)
    assert isinstance(as_backend_error(KeyError("x")), FatalError)


def test_litellm_exceptions_map_to_the_three_kinds():
    limited = as_backend_error(
        litellm.RateLimitError(
            "slow down", "openai", "m", response=response(429, **{"retry-after": "0.4"})
        )
    )
    assert isinstance(limited, RateLimited) and limited.retry_after == pytest.approx(0.4)
    timeout = as_backend_error(litellm.Timeout("late", model="m", llm_provider="openai"))
    assert isinstance(timeout, TransientError)
    down = as_backend_error(
        litellm.ServiceUnavailableError("down", "openai", "m", response=response(503))
    )
    assert isinstance(down, RateLimited)


def test_parse_failures_of_structured_output_are_reply_errors_not_transport_errors():
    class Shape(BaseModel):
        score: float

    with pytest.raises(ValidationError) as info:
        Shape.model_validate_json("not json")
    assert is_reply_error(info.value)
    assert is_reply_error(OutputParserException("bad"))
    assert not is_reply_error(openai.APITimeoutError(httpx.Request("POST", URL)))


CASES = [
    ModelTestCase(
        name=f"c{i}",
        input=f"question {i}",
        actual_output="answer",
        expected_output="answer",
        retrieval_context=["context"],
    )
    for i in range(40)
]


def backends(server: FakeOpenAIServer) -> dict[str, object]:
    return {
        "langchain": LangChainBackend(
            ChatOpenAI(model="m", base_url=server.base_url, api_key="sk-test", max_retries=0)
        ),
        "litellm": LiteLLMBackend("openai/m", api_base=server.base_url, api_key="sk-test"),
    }


@pytest.mark.parametrize("fault", ["429", "503"])
@pytest.mark.parametrize("kind", ["langchain", "litellm"])
def test_rate_limits_are_retried_after_retry_after_and_lower_the_limit(kind, fault):
    rates = {"fail_429_rate" if fault == "429" else "fail_503_rate": 0.2}
    with FakeOpenAIServer(retry_after="0.05", latency=0.01, seed=7, **rates) as server:
        backend = backends(server)[kind]
        run = evaluate(
            CASES,
            ["context-precision"],
            judge=backend,
            max_concurrency=8,
            cache=False,
            progress=False,
        )
        summary = run.summaries["context-precision"]
        limited = server.status_counts.get(int(fault), 0)
    assert summary.n_failed == 0 and summary.n_scored == len(CASES)
    assert limited >= 3  # 20% of the calls or so
    assert summary.accounting.retries == limited  # each one retried once, by the engine
    assert summary.accounting.calls == len(CASES) + limited
    limiter = limiter_for(backend.key, 8)  # the run's own bound
    assert limiter.rate_limited == limited and limiter.peak <= 8
    assert limiter.lowest < 8  # it backed off (and climbs back by 1/limit per success)


@pytest.mark.parametrize("kind", ["langchain", "litellm"])
def test_server_errors_are_retried_and_bad_requests_are_not(kind):
    with FakeOpenAIServer(script=["500", "500"]) as server:
        run = evaluate(CASES[:1], ["context-precision"], judge=backends(server)[kind], cache=False)
        assert run.summaries["context-precision"].n_failed == 0 and server.calls == 3
    with FakeOpenAIServer() as server:
        # A 404 is a fatal error: no retry, and the item fails with the reason.
        url = server.base_url.replace("/v1", "/nowhere")
        backend = (
            LangChainBackend(ChatOpenAI(model="m", base_url=url, api_key="k", max_retries=0))
            if kind == "langchain"
            else LiteLLMBackend("openai/m", api_base=url, api_key="k")
        )
        run = evaluate(CASES[:1], ["context-precision"], judge=backend, cache=False)
        [item] = run.results
        assert item.failed and "404" in item.error and server.calls == 0
        assert run.summaries["context-precision"].accounting.retries == 0


@pytest.mark.parametrize("kind", ["langchain", "litellm", "openai-sdk"])
def test_the_reply_schema_goes_as_response_format_and_steps_down_when_refused(kind):
    with FakeOpenAIServer(formats=("text", "json_object"), latency=0.01) as server:
        backend = (
            OpenAIClientBackend(openai.OpenAI(base_url=server.base_url, api_key="sk-test"), "m")
            if kind == "openai-sdk"
            else backends(server)[kind]
        )
        run = evaluate(
            CASES[:4],
            ["context-precision"],
            judge=backend,
            max_concurrency=1,
            cache=False,
            progress=False,
        )
        kinds = [(r.get("response_format") or {}).get("type") for r in server.requests]
        last = server.requests[-1]
    assert run.summaries["context-precision"].n_failed == 0
    assert kinds == ["json_schema", "json_object", "json_object", "json_object", "json_object"]
    assert last["response_format"]["schema"]["properties"]["score"]["enum"][0] == 0.0
    if kind != "langchain":  # sized from the schema; a LangChain model keeps its own setting
        assert last["max_tokens"] == DEFAULT_REPLY_TOKENS


def test_a_bound_langchain_model_is_asked_with_its_bound_arguments(monkeypatch):
    """``chat.bind(model=..., temperature=...)`` judges with what it binds (a binding passes
    ``with_structured_output`` to the bare model, which would drop them), is named by it, and
    is cached apart from the bare model."""
    monkeypatch.delenv("CONTEXTLENS_CACHE", raising=False)  # the default cache: on
    from contextlens import ContextPrecision

    asked: list[tuple[str, float]] = []

    def reply(body):
        asked.append((body.get("model"), body.get("temperature")))
        score = 0.2 if body.get("model") == "gpt-4o-mini" else 0.9
        return json.dumps({"reason": "r", "score": score})

    case = dict(input="q?", output="a.", expected_output="a", context=["c."])
    with FakeOpenAIServer(reply=reply) as server:
        chat = ChatOpenAI(
            base_url=server.base_url,
            api_key="sk-fake",
            model="gpt-4o",
            temperature=0,
            max_retries=0,
        )
        assert ContextPrecision(model=chat).score(**case).value == 0.9
        bound = chat.bind(model="gpt-4o-mini", temperature=1.0)
        assert ContextPrecision(model=bound).score(**case).value == 0.2
        assert LangChainBackend(bound).model == "gpt-4o-mini"
    assert asked == [("gpt-4o", 0.0), ("gpt-4o-mini", 1.0)]
