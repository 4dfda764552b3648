"""An error raised through any seed's sync method is the real error alone: nothing in its
chain is a ``RuntimeError: no running event loop`` left over from looking for a loop, so a
pytest failure or a user's traceback starts with what went wrong. Outside and inside a
running loop (Jupyter), for the sync method of each seed surface and for ``evaluate``."""

from __future__ import annotations

import asyncio
import traceback

import pytest

from contextlens import (
    Batch,
    Context,
    ContextPrecision,
    ContextSimilarityEvaluator,
    ContextualRelevancyMetric,
    Dataset,
    HuggingFaceEmbedding,
    InputError,
    ModelTestCase,
    Retriever,
    evaluate,
)


class Sessions(Retriever):
    def load_dataset(self):
        return self.kwargs["sessions"]


def session(sid: str, context: str) -> Dataset:
    return Dataset(
        session_id=sid,
        assistant_id="bot",
        context=context,
        conversation=[Batch(qa_id=f"q-{context}", query="q", assistant="a")],
    )


class ProviderDown(Exception):
    """The user's own model failing."""


class DownModel:
    """An Opik-shaped model that always fails."""

    model_name = "down"

    def generate_string(self, input, **kwargs):
        raise ProviderDown("the provider is down")

    def generate_provider_response(self, messages, **kwargs):
        raise NotImplementedError


def gaussia_run():
    Context.run(Sessions, sessions=[session("s", "one"), session("s", "two")])


def gaussia_on_process_complete():
    context = Context(Sessions, sessions=[])
    context.batch(session_id="s", context="   ", assistant_id="bot", batch=[])
    context.on_process_complete()


def deepeval_measure():
    ContextualRelevancyMetric().measure(ModelTestCase(input="q"))


def opik_score():
    ContextPrecision().score(input="q", output=None, expected_output="e", context=["c"])


def opik_score_with_a_failing_model():
    ContextPrecision(model=DownModel()).score(
        input="q", output="a", expected_output="e", context=["c"]
    )


def novastack_evaluate():
    ContextSimilarityEvaluator().evaluate(query="q", generated_text=None, contexts=["c"])


def novastack_embed_text():
    HuggingFaceEmbedding().embed_text([None])  # type: ignore[list-item]


def run_evaluate():
    evaluate(
        [ModelTestCase(input="q", name="a"), ModelTestCase(input="q", name="a")],
        ["context-precision"],
    )


CALLS = {
    "gaussia Context.run": (gaussia_run, InputError),
    "gaussia on_process_complete": (gaussia_on_process_complete, InputError),
    "DeepEval measure": (deepeval_measure, InputError),
    "Opik score": (opik_score, InputError),
    "Opik score, the model failing": (opik_score_with_a_failing_model, ProviderDown),
    "novastack evaluate": (novastack_evaluate, ValueError),
    "novastack embed_text": (novastack_embed_text, Exception),
    "evaluate": (run_evaluate, InputError),
}


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it carries as cause or context."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__]
    return seen


def assert_alone(exc: BaseException) -> None:
    for e in chain(exc):
        assert "no running event loop" not in str(e), f"{type(e).__name__}: {e}"
    text = "".join(traceback.format_exception(exc))
    assert "no running event loop" not in text
    assert "During handling of the above exception" not in text.split("\n\n")[0]


@pytest.mark.parametrize("name", list(CALLS))
def test_the_error_of_a_sync_call_carries_no_event_loop_lookup(name):
    call, kind = CALLS[name]
    with pytest.raises(kind) as info:
        call()
    assert_alone(info.value)


@pytest.mark.parametrize("name", list(CALLS))
def test_inside_a_running_loop_too(name):
    call, kind = CALLS[name]

    async def notebook_cell():
        call()

    with pytest.raises(kind) as info:
        asyncio.run(notebook_cell())
    assert_alone(info.value)
