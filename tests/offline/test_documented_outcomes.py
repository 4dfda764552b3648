"""Documented outcomes of the offline faithfulness and precision scorers (issue 13).

Each follows from the bundled model and the library's features: nothing in the code knows
these strings.
"""

import asyncio

import pytest

from contextlens import ContextPrecision
from contextlens.embeddings.minilm import default_embedder
from contextlens.offline.support import SupportItem, score_support

TECHSTORE = """You are a helpful customer service assistant for TechStore.
        Key policies:
        - Returns accepted within 30 days with receipt
        - Free shipping on orders over $50
        - Support hours: Mon-Fri 9am-5pm EST
        Always be polite and offer to help further."""
OPIK_CONTEXT = [
    "France is a country in Western Europe. Its capital is Paris, which is known for "
    "landmarks like the Eiffel Tower."
]


def support(reply: str, evidence: list[str], question: str = "") -> float:
    item = SupportItem(reply, evidence, question=question)
    [result] = asyncio.run(score_support([item], default_embedder()))
    return result.score


def test_techstore_q2_restates_its_context_and_passes_09():
    score = support(
        "Yes, free shipping on orders over $50.",
        [TECHSTORE, "Free shipping on orders over $50.", ""],
        "Do you offer free shipping?",
    )
    assert score >= 0.9


def test_techstore_q3_contradicting_the_hours_stays_under_01():
    score = support(
        "We're open 24/7!", [TECHSTORE, "Mon-Fri 9am-5pm EST.", ""], "What are your hours?"
    )
    assert score < 0.1


@pytest.mark.parametrize(
    "context",
    [
        "Free shipping on orders over $50.",
        "Refunds are issued within 14 days of receiving the returned item.",
        "The museum opens at ten in the morning and closes at six in the evening.",
    ],
)
def test_a_reply_that_restates_its_context_scores_at_least_09(context):
    assert support(context, [context]) >= 0.9


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
