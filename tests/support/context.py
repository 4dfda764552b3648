"""Context awareness: a pizza assistant's session and judge rules, shared by
tests/metrics/test_context.py and tests/compat/test_gaussia.py."""

import json

from contextlens import Batch, Dataset

CONTEXT = (
    "You are the assistant of Bella Pizza. Opening hours: Tuesday to Sunday, noon to 10pm. "
    "Closed on Mondays. Delivery within 5 km for orders over 20 euros."
)
QUERIES = {
    "hours": "When are you open?",
    "delivery": "Do you deliver?",
    "monday": "Open on Monday?",
}


def make_session(sid="s1", weights=(None, None, None), context=CONTEXT):
    """A session of three interactions; the "monday" reply leaves the context."""
    replies = [
        ("hours", "We are open Tuesday to Sunday from noon to 10pm."),
        ("delivery", "Yes, we deliver within 5 km for orders over 20 euros."),
        ("monday", "Yes, Monday we are open all night until 4am."),
    ]
    return Dataset(
        session_id=sid,
        assistant_id="pizza-bot",
        context=context,
        conversation=[
            Batch(qa_id=q, query=QUERIES[q], assistant=a, ground_truth_assistant="", weight=w)
            for (q, a), w in zip(replies, weights, strict=True)
        ],
    )


def verdict(score, reason="r"):
    """A judge's reply: the verdict as bare JSON."""
    return json.dumps({"reason": reason, "score": score})


def by_query(replies):
    """A judge rule: the reply for the interaction whose query is in the prompt; anything
    else (an unknown query, the re-ask after an invalid reply) gets no JSON."""
    return lambda prompt: next(
        (replies[q] for q, text in QUERIES.items() if q in replies and text in prompt),
        "no JSON here",
    )
