"""The judge and embedding objects users already have, used for any number of calls.

A real langchain-openai ``ChatOpenAI`` and ``OpenAIEmbeddings``, LiteLLM and the ``openai`` SDK
clients, each pointed at a real OpenAI-compatible server on 127.0.0.1, reused across repeated
sync calls, ``asyncio.run`` in a loop, threads and a running event loop (as in Jupyter). Their
async HTTP clients are bound to the first event loop that used them; none of this may fail the
second time.
"""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

from contextlens import (
    Batch,
    BayesianMode,
    Context,
    ContextPrecision,
    ContextualRelevancyMetric,
    Dataset,
    JsonlRetriever,
    ModelTestCase,
    Retriever,
    evaluate,
)
from contextlens.judges import LiteLLMBackend, OpenAIClientBackend
from contextlens.sync import home_loop
from contextlens.testing import FakeOpenAIServer
from support.relevancy import all_relevant

EXAMPLES = Path(__file__).parents[2] / "examples"
RUNS = 10


def judge_reply(request: dict) -> str:
    """A valid verdict for whichever metric's prompt this is."""
    prompt = request["messages"][-1]["content"]
    if "Chunk 1:" in prompt:
        verdict = all_relevant(prompt)
    else:
        verdict = {"reason": "Follows the context.", "score": 0.9}
    if request.get("response_format"):  # structured output: bare JSON, as real servers send
        return json.dumps(verdict)
    return "```json\n" + json.dumps(verdict) + "\n```"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("CONTEXTLENS_CACHE", "off")  # every run must reach the server
    with FakeOpenAIServer(reply=judge_reply) as srv:
        yield srv


@pytest.fixture
def chat(server):
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
    )


def run_example(name: str, old: str, new: str, capsys, **names) -> str:
    """The example's code with one expression replaced by a name given here; its output."""
    path = EXAMPLES / name
    source = path.read_text(encoding="utf-8")
    assert source.count(old) == 1, f"{name} no longer holds {old!r}"
    exec(compile(source.replace(old, new), str(path), "exec"), {"__name__": "__main__", **names})
    return capsys.readouterr().out


GETENV = 'os.getenv("CONTEXTLENS_JUDGE")'


def test_opik_example_ten_times_with_one_chat_model(server, chat, capsys):
    for _ in range(RUNS):
        out = run_example("context_precision_opik.py", GETENV, "JUDGE", capsys, JUDGE=chat)
        assert out.splitlines()[0] == "0.9"
    assert server.calls == RUNS


def test_deepeval_example_ten_times_with_one_chat_model(server, chat, capsys):
    for _ in range(RUNS):
        out = run_example("contextual_relevancy_deepeval.py", GETENV, "JUDGE", capsys, JUDGE=chat)
        assert out.splitlines()[0] == "1.0"
    assert server.calls == RUNS


def test_gaussia_techstore_example_ten_times_with_one_chat_model(server, chat, capsys):
    for _ in range(RUNS):
        out = run_example("context_techstore.py", GETENV, "JUDGE", capsys, JUDGE=chat)
        assert out.count("PASS  score=0.90") == 3 and "nan" not in out
    assert server.calls == 3 * RUNS


def test_novastack_example_ten_times_with_one_embeddings_object(server, capsys):
    embeddings = OpenAIEmbeddings(
        model="text-embedding-3-small",
        base_url=server.base_url,
        api_key="sk-test",
        check_embedding_ctx_length=False,
        max_retries=0,
    )
    for _ in range(RUNS):
        out = run_example(
            "context_similarity_novastack.py",
            "embedding = HuggingFaceEmbedding()",
            "embedding = EMBED",
            capsys,
            EMBED=embeddings,
        )
        assert re.search(r"Combined Score: 0\.\d+", out)
    assert server.embedding_calls == RUNS


CASE = dict(
    input="What is the capital of France?",
    output="The capital of France is Paris.",
    expected_output="Paris",
    context=["Paris is the capital and largest city of France."],
)


def test_asyncio_run_in_a_loop_threads_and_a_running_loop(server, chat):
    metric = ContextPrecision(model=chat)
    for _ in range(3):  # a new event loop each time
        assert asyncio.run(metric.ascore(**CASE)).value == 0.9
    with ThreadPoolExecutor(4) as pool:  # several threads at once
        assert {r.value for r in pool.map(lambda _: metric.score(**CASE), range(8))} == {0.9}

    async def notebook_cell() -> list[float]:  # a running loop, as in Jupyter
        return [metric.score(**CASE).value for _ in range(3)] + [
            (await metric.ascore(**CASE)).value
        ]

    assert asyncio.run(notebook_cell()) == [0.9] * 4
    assert server.calls == 3 + 8 + 4


def test_the_same_chat_model_judges_two_evaluate_runs_and_two_context_runs(server, chat):
    cases = [
        ModelTestCase(
            name=f"c{i}", input="q", actual_output="a", expected_output="e", retrieval_context=["c"]
        )
        for i in range(5)
    ]
    for _ in range(2):
        run = evaluate(cases, ["context-precision", "contextual-relevancy"], judge=chat)
        assert all(
            s.n_failed == 0 and s.judge == "langchain:gpt-4o-mini" for s in run.summaries.values()
        )

    class Sessions(Retriever):
        def load_dataset(self):
            return [
                Dataset(
                    session_id=f"s{i}",
                    assistant_id="bot",
                    context="ctx",
                    conversation=[Batch(qa_id="q1", query="q", assistant="a")],
                )
                for i in range(3)
            ]

    for _ in range(2):
        metrics = Context.run(Sessions, model=chat)
        assert [m.n_failed for m in metrics] == [0, 0, 0]
    measure = ContextualRelevancyMetric(model=chat)
    for _ in range(2):
        assert measure.measure(ModelTestCase(input="q", retrieval_context=["a", "b"])) == 1.0
    assert server.calls == 2 * 10 + 2 * 3 + 2


def test_litellm_and_openai_sdk_clients_across_loops(server):
    sync_client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
    async_client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    judges = [
        LiteLLMBackend("openai/judge-model", api_base=server.base_url, api_key="sk-test"),
        OpenAIClientBackend(sync_client, "m"),
        OpenAIClientBackend(async_client, "m"),
    ]
    for judge in judges:
        metric = ContextPrecision(model=judge)
        for _ in range(3):
            assert metric.score(**CASE).value == 0.9
            assert asyncio.run(metric.ascore(**CASE)).value == 0.9
    assert server.calls == len(judges) * 6
    # The clients are the user's to close; the async one lives on contextlens's loop.
    sync_client.close()
    asyncio.run_coroutine_threadsafe(async_client.close(), home_loop()).result(timeout=10)


def test_a_chat_openai_against_a_server_without_json_schema_gets_its_json_object_mode(
    monkeypatch,
):
    """llama-cpp-python's server refuses OpenAI's json_schema: the user's ChatOpenAI is then
    asked with the server's own ``{"type": "json_object", "schema": ...}``, every item scored."""
    monkeypatch.setenv("CONTEXTLENS_CACHE", "off")
    with FakeOpenAIServer(reply=judge_reply, formats=("text", "json_object")) as server:
        chat = ChatOpenAI(model="local", base_url=server.base_url, api_key="-", max_retries=0)
        metric = ContextPrecision(model=chat)
        results = [metric.score(**CASE) for _ in range(3)]
        kinds = [r.get("response_format", {}).get("type") for r in server.requests]
    assert [r.value for r in results] == [0.9] * 3
    assert kinds[0] == "json_schema" and kinds[1:] == ["json_object"] * 3
    assert (
        server.requests[-1]["response_format"]["schema"]["properties"]["score"]["enum"][-1] == 1.0
    )


# -- model classes written for DeepEval and for Opik -------------------------------------------


class CustomDeepEvalModel:
    """A custom model as DeepEval's docs have users write one (a ``DeepEvalBaseLLM``): a
    provider client made by ``load_model``, JSON mode when handed a schema, and the cost of
    each call reported with the reply."""

    PRICE = 1e-6  # USD per token

    def __init__(self, base_url: str):
        self.base_url = base_url
        self.model = self.load_model()

    def load_model(self):
        return openai.OpenAI(base_url=self.base_url, api_key="sk-test", max_retries=0)

    def get_model_name(self) -> str:
        return "my-gpt"

    def generate(self, prompt: str, schema=None):
        kwargs = {"response_format": {"type": "json_object"}} if schema is not None else {}
        reply = self.model.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}], **kwargs
        )
        text = reply.choices[0].message.content
        cost = reply.usage.total_tokens * self.PRICE
        return (schema.model_validate_json(text) if schema is not None else text), cost

    async def a_generate(self, prompt: str, schema=None):
        return self.generate(prompt, schema)


class CustomOpikModel:
    """A custom model as Opik's docs have users write one (an ``OpikBaseModel``), over
    plain HTTP."""

    def __init__(self, base_url: str):
        self.model_name = "my-opik-judge"
        self.base_url = base_url

    def generate_string(self, input: str, **kwargs) -> str:
        response = self.generate_provider_response([{"role": "user", "content": input}])
        return response["choices"][0]["message"]["content"]

    def generate_provider_response(self, messages, **kwargs):
        reply = httpx.post(
            f"{self.base_url}/chat/completions",
            json={"model": self.model_name, "messages": messages},
            timeout=30,
        )
        reply.raise_for_status()
        return reply.json()

    async def agenerate_string(self, input: str, **kwargs) -> str:
        async with httpx.AsyncClient(timeout=30) as client:
            reply = await client.post(
                f"{self.base_url}/chat/completions",
                json={"model": self.model_name, "messages": [{"role": "user", "content": input}]},
            )
        return reply.json()["choices"][0]["message"]["content"]

    async def agenerate_provider_response(self, messages, **kwargs):
        raise NotImplementedError


def test_a_deepeval_shaped_model_ten_times_through_the_deepeval_example(server, capsys):
    model = CustomDeepEvalModel(server.base_url)
    for _ in range(RUNS):
        out = run_example("contextual_relevancy_deepeval.py", GETENV, "JUDGE", capsys, JUDGE=model)
        assert out.splitlines()[0] == "1.0"
    assert server.calls == RUNS
    assert all(r.get("response_format") == {"type": "json_object"} for r in server.requests)
    metric = ContextualRelevancyMetric(model=model)
    before = server.prompt_tokens + server.completion_tokens
    metric.measure(ModelTestCase(input="q", retrieval_context=["a"]))
    tokens = server.prompt_tokens + server.completion_tokens - before
    assert metric.evaluation_model == "deepeval-model:my-gpt"
    assert metric.evaluation_cost == pytest.approx(tokens * model.PRICE)  # the model's own
    model.model.close()  # the client is the user's to close


def test_an_opik_shaped_model_ten_times_through_the_opik_example(server, capsys):
    model = CustomOpikModel(server.base_url)
    for _ in range(RUNS):
        out = run_example("context_precision_opik.py", GETENV, "JUDGE", capsys, JUDGE=model)
        assert out.splitlines()[0] == "0.9"
    assert server.calls == RUNS
    metric = ContextPrecision(model=model)
    for _ in range(3):  # asyncio.run in a loop, and a running loop
        assert asyncio.run(metric.ascore(**CASE)).value == 0.9

    async def notebook_cell() -> float:
        return metric.score(**CASE).value

    assert asyncio.run(notebook_cell()) == 0.9
    assert server.calls == RUNS + 4


def test_both_shapes_judge_every_metric_in_one_evaluate_run(server):
    cases = [
        ModelTestCase(
            name=f"c{i}", input="q", actual_output="a", expected_output="e", retrieval_context=["c"]
        )
        for i in range(4)
    ]
    deepeval_model = CustomDeepEvalModel(server.base_url)
    metrics = [
        ContextPrecision(model=CustomOpikModel(server.base_url)),
        ContextualRelevancyMetric(model=deepeval_model),
    ]
    run = evaluate(cases, metrics, progress=False)
    deepeval_model.model.close()
    assert run.summaries["context-precision"].judge == "opik-model:my-opik-judge"
    assert run.summaries["contextual-relevancy"].judge == "deepeval-model:my-gpt"
    assert all(s.n_failed == 0 for s in run.summaries.values())
    assert run.summaries["contextual-relevancy"].accounting.cost > 0
    assert server.calls == 8


def test_gaussias_instance_api_over_the_techstore_sessions_ten_times(server, chat):
    techstore = resources.files("contextlens.demo").joinpath("techstore.jsonl")
    for _ in range(RUNS):
        context = Context(
            JsonlRetriever,
            model=chat,
            statistical_mode=BayesianMode(mc_samples=500),
            path=techstore,
        )
        for session in context.dataset:  # a gaussia user's own loop over the retriever's data
            context.batch(
                session_id=session.session_id,
                context=session.context,
                assistant_id=session.assistant_id,
                batch=session.conversation,
                language=session.language,
            )
        context.on_process_complete()
        assert [(m.session_id, m.n_interactions) for m in context.metrics] == [
            ("context-eval-001", 3),
            ("context-eval-002", 4),
        ]
        for metric in context.metrics:
            assert metric.n_failed == 0 and metric.context_awareness == pytest.approx(0.9)
            assert metric.context_awareness_ci_low <= 0.9 <= metric.context_awareness_ci_high
            assert all(i.context_awareness == 0.9 for i in metric.interactions)
    assert server.calls == 7 * RUNS
