"""Context precision: a handmade case and the judge's verdict, shared by
tests/metrics/test_context_precision.py and tests/compat/test_opik.py."""

import json

# A small handmade case (a library's rules), not the shared data.
LIBRARY = {
    "input": "When is the library open and how many books can I borrow?",
    "expected_output": "Weekdays 9am to 6pm; members may borrow 5 books.",
    "context": [
        "Opening hours: Monday to Friday, 9am-6pm. Closed on weekends.",
        "Members can borrow up to five books for three weeks.",
    ],
}
GOOD = "The library opens at 9am and closes at 6pm on weekdays. Members can borrow up to 5 books."


def verdict(score, reason="r"):
    """A judge's reply: the verdict as JSON inside the default ```json fence."""
    return "```json\n" + json.dumps({"reason": reason, "score": score}) + "\n```"


def precision_case(output=None, input="", expected_output="", context=()):
    """A test case in Opik's terms: ``output`` is the answer, ``context`` the chunks."""
    from contextlens.schemas import ModelTestCase

    chunks = [context] if isinstance(context, str) else list(context)
    return ModelTestCase(
        input=input, actual_output=output, expected_output=expected_output, context=chunks
    )
