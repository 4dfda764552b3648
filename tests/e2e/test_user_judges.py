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
from pathlib import Path

import openai
import pytest
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

from contextlens import (
    Batch,
    Context,
    ContextPrecision,
    ContextualRelevancyMetric,
    Dataset,
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
