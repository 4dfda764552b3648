"""Model classes written for DeepEval (``DeepEvalBaseLLM``) or Opik (``OpikBaseModel``) judge
every metric: recognised by their methods, their replies validated like any other, their
reported cost counted, their exceptions mapped onto the backend contract with the original as
the cause. Neither library is imported."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any
from unittest import mock

import pytest
from pydantic import BaseModel

from contextlens import (
    ContextPrecision,
    ContextualRelevancyMetric,
    LLMTestCase,
    MetricComputationError,
    ModelTestCase,
    evaluate,
)
from contextlens.backend import FatalError, InvalidReply, RateLimited, TransientError
from contextlens.engine.retry import RetryPolicy
from contextlens.judges import DeepEvalModelBackend, OpikModelBackend, as_backend
from contextlens.judges.foreign import is_deepeval_model, is_opik_model
from contextlens.judges.langchain import LangChainBackend
from contextlens.metrics.context_precision import PrecisionVerdict

CASE = dict(
    input="What is the capital of France?",
    output="The capital of France is Paris.",
    expected_output="Paris",
    context=["Paris is the capital and largest city of France."],
)
VERDICT = json.dumps({"reason": "matches the expected output", "score": 0.9})
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.05, jitter=False)


class DeepEvalModel:
    """What DeepEval's docs tell users to write: a DeepEvalBaseLLM subclass, duck-typed."""

    def __init__(self, reply=VERDICT, *, cost=None, instance=False):
        self.reply, self.cost, self.instance = reply, cost, instance
        self.prompts: list[str] = []
        self.schemas: list[type | None] = []
        self.model = self.load_model()

    def load_model(self):
        return self

    def get_model_name(self):
        return "my-deepeval-model"

    def generate(self, prompt: str, schema: type[BaseModel] | None = None):
        self.prompts.append(prompt)
        self.schemas.append(schema)
        reply = self.reply(prompt) if callable(self.reply) else self.reply
        if isinstance(reply, Exception):
            raise reply
        if self.instance and schema is not None:
            reply = schema.model_validate_json(reply)
        return reply if self.cost is None else (reply, self.cost)

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None):
        return self.generate(prompt, schema)


class OpikModel:
    """What Opik's docs tell users to write: an OpikBaseModel subclass, duck-typed."""

    def __init__(self, reply=VERDICT):
        self.model_name = "my-opik-model"
        self.reply = reply
        self.inputs: list[str] = []
        self.formats: list[object] = []

    def generate_string(self, input: str, **kwargs) -> str:
        self.inputs.append(input)
        self.formats.append(kwargs.get("response_format"))
        reply = self.reply(input) if callable(self.reply) else self.reply
        if isinstance(reply, Exception):
            raise reply
        return reply

    def generate_provider_response(self, messages, **kwargs):
        raise NotImplementedError

    async def agenerate_string(self, input: str, **kwargs) -> str:
        return self.generate_string(input, **kwargs)

    async def agenerate_provider_response(self, messages, **kwargs):
        raise NotImplementedError


class HTTPStatusError(Exception):
    """An SDK's error: a status and the response headers."""

    def __init__(self, status: int, retry_after: str | None = None):
        super().__init__(f"HTTP {status} from the provider")
        self.status_code = status
        self.headers = {"retry-after": retry_after} if retry_after else {}


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    """Every call reaches the model: the stubs of one class answer differently."""
    monkeypatch.setenv("CONTEXTLENS_CACHE", "off")


def complete(backend, schema=PrecisionVerdict):
    messages = [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "USER"}]
    return asyncio.run(backend.complete(messages, schema=schema))


# -- recognised by their methods ------------------------------------------------------------


def test_each_shape_is_recognised_by_its_methods_and_nothing_else():
    assert isinstance(as_backend(DeepEvalModel()), DeepEvalModelBackend)
    assert isinstance(as_backend(OpikModel()), OpikModelBackend)
    assert is_deepeval_model(DeepEvalModel()) and not is_opik_model(DeepEvalModel())
    assert is_opik_model(OpikModel()) and not is_deepeval_model(OpikModel())

    class OnlyAsync:
        def get_model_name(self):
            return "a"

        async def a_generate(self, prompt):
            return VERDICT

    assert isinstance(as_backend(OnlyAsync()), DeepEvalModelBackend)

    class ChatModel:  # a LangChain model has invoke (and a generate), not get_model_name
        def invoke(self, messages):
            return VERDICT

        def generate(self, prompts):
            return VERDICT

    assert isinstance(as_backend(ChatModel()), LangChainBackend)
    with pytest.raises(TypeError, match=r"DeepEval-shaped model .*Opik-shaped model"):
        as_backend(object())
    assert "deepeval" not in sys.modules and "opik" not in sys.modules


def test_the_backend_names_the_model_and_keeps_one_limiter_per_object():
    one, other = as_backend(DeepEvalModel()), as_backend(DeepEvalModel())
    assert one.model == "my-deepeval-model" and one.name == "deepeval-model"
    assert one.key != other.key and one.params == other.params
    assert as_backend(OpikModel()).model == "my-opik-model"
    assert not as_backend(DeepEvalModel(), use_structured_output=False).use_structured_output


# -- replies --------------------------------------------------------------------------------


def test_a_deepeval_model_is_handed_the_schema_and_its_text_is_validated():
    model = DeepEvalModel()
    result = ContextPrecision(model=model).score(**CASE)
    assert (result.value, result.reason) == (0.9, "matches the expected output")
    assert model.schemas == [PrecisionVerdict]
    [prompt] = model.prompts
    assert prompt.startswith("You are an impartial evaluator")  # system and user, joined
    assert (
        CASE["output"] in prompt and result.metadata["judge"] == "deepeval-model:my-deepeval-model"
    )


def test_a_schema_instance_is_taken_as_the_parsed_reply():
    reply = complete(as_backend(DeepEvalModel(instance=True)))
    assert reply.parsed == PrecisionVerdict(reason="matches the expected output", score=0.9)
    assert json.loads(reply.text) == json.loads(VERDICT)
    result = ContextPrecision(model=DeepEvalModel(instance=True)).score(**CASE)
    assert result.value == 0.9


def test_a_model_without_a_schema_argument_gets_the_prompt_alone():
    class Plain:
        def __init__(self):
            self.calls = []

        def get_model_name(self):
            return "plain"

        def generate(self, prompt):
            self.calls.append(prompt)
            return "```json\n" + VERDICT + "\n```"

    model = Plain()
    assert ContextPrecision(model=model).score(**CASE).value == 0.9
    assert len(model.calls) == 1


def test_an_async_only_model_is_awaited_and_a_blocking_one_not_implemented_falls_back():
    class AsyncOnly:
        def get_model_name(self):
            return "async-only"

        def generate(self, prompt, schema=None):
            raise NotImplementedError

        async def a_generate(self, prompt, schema=None):
            await asyncio.sleep(0)
            return VERDICT

    assert ContextPrecision(model=AsyncOnly()).score(**CASE).value == 0.9


def test_an_invalid_reply_is_re_asked_once_then_the_item_fails_with_the_reply():
    replies = iter(["I think it is fine.", VERDICT])
    model = DeepEvalModel(reply=lambda prompt: next(replies))
    assert ContextPrecision(model=model).score(**CASE).value == 0.9
    assert len(model.prompts) == 2 and "could not be used" in model.prompts[1]
    with pytest.raises(MetricComputationError, match="no JSON object"):
        ContextPrecision(model=DeepEvalModel(reply="still no JSON")).score(**CASE)
    with pytest.raises(InvalidReply, match="returned a int"):
        complete(as_backend(DeepEvalModel(reply=42)))


# -- cost -------------------------------------------------------------------------------------


def test_the_cost_a_model_reports_is_counted():
    metric = ContextualRelevancyMetric(model=DeepEvalModel(reply=relevancy_reply, cost=0.0021))
    assert metric.measure(ModelTestCase(input="q", retrieval_context=["a"])) == 1.0
    assert metric.evaluation_cost == pytest.approx(0.0021)
    cases = [
        ModelTestCase(name=f"c{i}", input="q", actual_output="a", expected_output="e")
        for i in range(3)
    ]
    run = evaluate(
        cases, [ContextPrecision(model=DeepEvalModel(cost=0.01))], cache=False, progress=False
    )
    accounting = run.summaries["context-precision"].accounting
    assert accounting.calls == 3 and accounting.unpriced_calls == 0
    assert accounting.cost == pytest.approx(0.03)
    unpriced = evaluate(cases, [ContextPrecision(model=DeepEvalModel())], cache=False)
    assert unpriced.summaries["context-precision"].accounting.unpriced_calls == 3


def relevancy_reply(prompt: str) -> str:
    """Contextual relevancy's reply for a prompt of one chunk: one relevant statement."""
    return json.dumps({"verdicts": ["yes"], "irrelevant": [], "reason": "all relevant"})


def test_a_provider_response_gives_its_text_usage_and_cost():
    class Response:
        def __init__(self):
            self.choices = [{"message": {"content": VERDICT}}]
            self.usage = {"prompt_tokens": 120, "completion_tokens": 30}
            self._hidden_params = {"response_cost": 0.0004}

    class ProviderOnly:
        model_name = "provider"

        def __init__(self):
            self.messages = []

        def generate_string(self, input, **kwargs):
            raise NotImplementedError

        def generate_provider_response(self, messages, **kwargs):
            self.messages.append(messages)
            return Response()

        async def agenerate_provider_response(self, messages, **kwargs):
            return self.generate_provider_response(messages, **kwargs)

    model = ProviderOnly()
    reply = complete(as_backend(model))
    assert reply.text == VERDICT and reply.cost == pytest.approx(0.0004)
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (120, 30)
    assert model.messages == [
        [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "USER"}]
    ]


def test_an_opik_model_gets_one_prompt_string_and_the_schema_as_response_format():
    model = OpikModel()
    assert ContextPrecision(model=model).score(**CASE).value == 0.9
    assert model.formats == [PrecisionVerdict]
    assert CASE["input"] in model.inputs[0] and "JSON schema" in model.inputs[0]
    plain = OpikModel()
    ContextPrecision(model=as_backend(plain, use_structured_output=False)).score(**CASE)
    assert plain.formats == [None]


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (HTTPStatusError(429, "0.2"), RateLimited),
        (HTTPStatusError(503), RateLimited),
        (HTTPStatusError(500), TransientError),
        (TimeoutError("read timed out"), TransientError),
        (ConnectionError("reset by peer"), TransientError),
        (HTTPStatusError(401), FatalError),
        (ValueError("bad prompt"), FatalError),
    ],
)
@pytest.mark.parametrize("shape", [DeepEvalModel, OpikModel])
def test_exceptions_become_the_backend_kinds_with_the_original_as_cause(shape, raised, kind):
    with pytest.raises(kind) as info:
        complete(as_backend(shape(reply=raised)))
    assert info.value.__cause__ is raised
    if isinstance(raised, HTTPStatusError) and raised.headers:
        assert info.value.retry_after == pytest.approx(0.2)


def test_a_validation_error_of_the_models_own_parsing_is_an_invalid_reply():
    def parse_fails(prompt):
        return PrecisionVerdict.model_validate_json('{"reason": "x", "score": 7}')

    with pytest.raises(InvalidReply) as info:
        complete(as_backend(DeepEvalModel(reply=lambda p: _raising(parse_fails, p))))
    assert type(info.value.__cause__).__name__ == "ValidationError"


def _raising(fn, arg):
    try:
        fn(arg)
    except Exception as exc:
        return exc
    raise AssertionError("expected an error")


def test_a_rate_limit_is_retried_and_the_item_scored():
    replies = iter([HTTPStatusError(429, "0.01"), VERDICT])
    model = DeepEvalModel(reply=lambda prompt: next(replies))
    case = LLMTestCase(input="q", actual_output="a", expected_output="e")
    run = evaluate([case], [ContextPrecision(model=model)], cache=False, retry=FAST)
    [item] = run.results
    assert item.score == 0.9 and len(model.prompts) == 2
    assert run.summaries["context-precision"].accounting.retries == 1


def _raise(exc: Exception):
    raise exc


def test_behind_opik_a_fatal_error_of_the_users_model_is_raised_as_it_is(rule_model):
    class QuotaExceeded(Exception):
        pass

    raised = QuotaExceeded("monthly quota used up")
    for model in (OpikModel(reply=raised), DeepEvalModel(reply=raised)):
        metric = ContextPrecision(model=model)
        with pytest.raises(QuotaExceeded) as info:
            metric.score(**CASE)
        assert info.value is raised
        with pytest.raises(QuotaExceeded):
            asyncio.run(metric.ascore(**CASE))
    # a LangChain model's own exception too
    with pytest.raises(QuotaExceeded):
        ContextPrecision(model=rule_model(lambda prompt: _raise(raised))).score(**CASE)
    # an HTTP status the provider gave is fatal too: the SDK's own exception
    denied = HTTPStatusError(401)
    with pytest.raises(HTTPStatusError) as info:
        ContextPrecision(model=OpikModel(reply=denied)).score(**CASE)
    assert info.value is denied
    # the other surfaces keep their own errors, with the reason
    with pytest.raises(MetricComputationError, match="QuotaExceeded: monthly quota") as info:
        ContextualRelevancyMetric(model=DeepEvalModel(reply=raised)).measure(
            ModelTestCase(input="q", retrieval_context=["a"])
        )
    assert info.value.__cause__ is raised  # DeepEval's error, the user's own kept as its cause


def test_a_cached_lenient_reply_is_read_the_same_way_again(tmp_path):
    reply = json.dumps({"verdicts": ["Yes."], "irrelevant": [], "reason": "r"})
    cases = [ModelTestCase(name="c", input="q", retrieval_context=["a"])]
    for calls in (1, 0):  # the second run is served from the cache, and reads it alike
        model = DeepEvalModel(reply=reply)
        run = evaluate(
            cases, [ContextualRelevancyMetric(model=model)], cache=tmp_path / "cache.sqlite3"
        )
        [item] = run.results
        assert item.score == 1.0 and item.details.attempts == 1
        assert len(model.prompts) == calls


class NewerOpikModel:
    """Opik's newer base class: chat completions with a ``{"role", "content"}`` reply,
    beside the string and provider-response methods."""

    model_name = "newer"

    def generate_string(self, input: str, **kwargs) -> str:
        raise AssertionError("the chat completion comes first")

    def generate_provider_response(self, messages, **kwargs):
        raise NotImplementedError

    def generate_chat_completion(self, messages, response_format=None, **kwargs):
        raise NotImplementedError

    async def agenerate_string(self, input: str, **kwargs) -> str:
        raise NotImplementedError  # Opik's base class's own: the blocking one is asked then

    async def agenerate_provider_response(self, messages, **kwargs):
        raise NotImplementedError

    async def agenerate_chat_completion(self, messages, response_format=None, **kwargs):
        raise NotImplementedError


def test_a_newer_opik_model_is_asked_for_a_chat_completion_with_the_messages():
    sent = []

    class Model(NewerOpikModel):
        def generate_chat_completion(self, messages, response_format=None, **kwargs):
            sent.append((messages, response_format))
            return {"role": "assistant", "content": VERDICT}

    assert ContextPrecision(model=Model()).score(**CASE).value == 0.9
    [(messages, response_format)] = sent
    assert [m["role"] for m in messages] == ["system", "user"]
    assert CASE["output"] in messages[1]["content"] and response_format is PrecisionVerdict

    class StringOnly(NewerOpikModel):  # a chat completion not implemented: the string way
        def generate_string(self, input: str, **kwargs) -> str:
            return VERDICT

    assert ContextPrecision(model=StringOnly()).score(**CASE).value == 0.9


class Captured(Exception):
    """Stops a call once the prompt has reached the model."""


def test_a_mock_of_the_base_class_gets_the_prompt_sync_and_async():
    sent: list[str] = []

    def record(messages, **kwargs):
        sent.append(str(messages))
        raise Captured()

    model = mock.Mock(spec=NewerOpikModel)
    model.generate_chat_completion.side_effect = record
    model.agenerate_chat_completion.side_effect = record
    metric = ContextPrecision(model=model, track=False)
    with pytest.raises(Captured):
        metric.score(**CASE)
    with pytest.raises(Captured):
        asyncio.run(metric.ascore(**CASE))
    assert len(sent) == 2 and all(CASE["input"] in prompt for prompt in sent)


class Deployment(DeepEvalModel):
    """DeepEval's docs' Azure example: a fixed ``get_model_name()``, the deployment and key
    given to the constructor."""

    def __init__(self, deployment: str, api_key: str = "sk-one"):
        super().__init__(reply=lambda prompt: json.dumps({"reason": deployment, "score": 0.9}))
        self.deployment, self.api_key = deployment, api_key

    def get_model_name(self):
        return "Custom Azure OpenAI Model"


def test_two_user_models_of_one_name_do_not_share_cached_replies(monkeypatch):
    """With the persistent cache on, a second deployment is asked, not served the first's
    reply; the same deployment again is served from the cache, whatever its key."""
    monkeypatch.delenv("CONTEXTLENS_CACHE", raising=False)  # the default: on
    big, small = Deployment("gpt-4o"), Deployment("gpt-4o-mini")
    assert ContextPrecision(model=big).score(**CASE).reason == "gpt-4o"
    assert ContextPrecision(model=small).score(**CASE).reason == "gpt-4o-mini"
    assert len(big.prompts) == len(small.prompts) == 1
    again = Deployment("gpt-4o", api_key="sk-two")
    assert ContextPrecision(model=again).score(**CASE).reason == "gpt-4o"
    assert again.prompts == []  # a new key is not a new judge


class _Unprintable(Exception):
    """An error class of the user's whose message cannot be built."""

    def __str__(self) -> str:
        raise ValueError("its __str__ raises")

    def __repr__(self) -> str:
        raise ValueError("its __repr__ raises")


class _Failing:
    """A DeepEval-shaped model whose calls raise an unprintable error."""

    def get_model_name(self) -> str:
        return "mine"

    def load_model(self) -> _Failing:
        return self

    def generate(self, prompt: str, schema: Any = None) -> str:
        raise _Unprintable()

    async def a_generate(self, prompt: str, schema: Any = None) -> str:
        raise _Unprintable()

    def __repr__(self) -> str:
        raise ValueError("its __repr__ raises")


def test_an_error_whose_message_cannot_be_read_fails_the_item_naming_its_type():
    case = LLMTestCase(input="q", actual_output="a", retrieval_context=["c"])
    run = evaluate([case], ["contextual-relevancy"], judge=_Failing(), progress=False, cache="off")
    [item] = run.results
    assert item.failed and "_Unprintable: (its message could not be read" in (item.error or "")


def test_a_model_whose_name_raises_is_refused_naming_the_method():
    class NoName(_Failing):
        def get_model_name(self) -> str:
            raise _Unprintable()

    case = LLMTestCase(input="q", actual_output="a", retrieval_context=["c"])
    with pytest.raises(TypeError, match=r"NoName: get_model_name\(\) raised _Unprintable"):
        evaluate([case], ["contextual-relevancy"], judge=NoName(), progress=False, cache="off")
