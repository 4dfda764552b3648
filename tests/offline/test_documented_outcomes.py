"""Documented outcomes of the offline faithfulness and precision scorers (issue 13).

Each follows from the bundled model and the library's features: nothing in the code knows
these strings.
"""

import asyncio
import runpy
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextlens import Context, ContextPrecision
from contextlens.embeddings.minilm import default_embedder
from contextlens.offline.support import SupportItem, score_support

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OPIK_CONTEXT = [
    "France is a country in Western Europe. Its capital is Paris, which is known for "
    "landmarks like the Eiffel Tower."
]


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[None]:
    """The example reads its judge from CONTEXTLENS_JUDGE: unset, it runs offline."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CONTEXTLENS_JUDGE", raising=False)
        yield


def support(reply: str, evidence: list[str], question: str = "") -> float:
    item = SupportItem(reply, evidence, question=question)
    [result] = asyncio.run(score_support([item], default_embedder()))
    return result.score


@pytest.fixture(scope="module")
def techstore(monkeypatch_module: None) -> dict[str, float]:
    """gaussia's TechStore example as its users run it (``Context.run`` on the example's
    retriever, no judge): each interaction's score."""
    retriever = runpy.run_path(str(EXAMPLES / "context_techstore.py"), run_name="example")
    [session] = Context.run(retriever["ContextTestRetriever"])
    return {i.qa_id: i.context_awareness for i in session.interactions}


def test_techstore_q2_restates_its_context_and_passes_08(techstore):
    assert techstore["q2"] >= 0.8  # "Yes, free shipping on orders over $50."


def test_techstore_q3_contradicting_the_hours_stays_under_01(techstore):
    assert techstore["q3"] < 0.1  # "We're open 24/7!" against Mon-Fri 9am-5pm


@pytest.mark.parametrize(
    "context",
    [
        "Free shipping on orders over $50.",
        "Refunds are issued within 14 days of receiving the returned item.",
        "The museum opens at ten in the morning and closes at six in the evening.",
    ],
)
def test_a_reply_that_restates_its_context_scores_at_least_085(context):
    assert support(context, [context]) >= 0.85


def test_opik_capital_of_france_passes_05_offline():
    metric = ContextPrecision(model=None)
    result = metric.score(
        input="What's the capital of France?",
        output="The capital of France is Paris.",
        expected_output="Paris",
        context=OPIK_CONTEXT,
    )
    assert result.value >= 0.5
    wrong = metric.score(
        input="What's the capital of France?",
        output="The capital of France is Lyon.",
        expected_output="Paris",
        context=OPIK_CONTEXT,
    )
    assert wrong.value < result.value - 0.2
