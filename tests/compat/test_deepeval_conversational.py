"""DeepEval's ConversationalTestCase of Turns, read as a session the turn metrics score."""

import pytest
from pydantic import ValidationError

from contextlens import evaluate
from contextlens.compat.deepeval import ConversationalTestCase, Turn

CASE = ConversationalTestCase(
    name="museum",
    chatbot_role="a museum guide",
    turns=[
        Turn(role="user", content="Hello."),
        Turn(role="user", content="When does the museum open?"),
        Turn(
            role="assistant",
            content="The museum opens at 9am.",
            retrieval_context=["The museum opens at 9am on weekdays."],
            tools_called=[{"name": "search"}],
        ),
        Turn(role="user", content="Thanks."),
        Turn(role="assistant", content="You are welcome."),
    ],
)


def test_each_assistant_turn_is_an_interaction_with_its_own_chunks():
    session = CASE.to_dataset()
    assert (session.session_id, session.context) == ("museum", "a museum guide")
    first, second = session.conversation
    assert (first.qa_id, first.query) == ("turn-2", "Hello.\nWhen does the museum open?")
    assert first.retrieval_context == ["The museum opens at 9am on weekdays."]
    assert [call.name for call in first.tools_called] == ["search"]  # read as tool calls
    assert (second.query, second.retrieval_context) == ("Thanks.", None)


def test_the_turn_metrics_score_it_and_count_the_turn_without_chunks():
    [result] = evaluate([CASE.to_dataset()], ["turn-faithfulness"], progress=False).results
    assert result.details.n_turns == 2 and result.details.n_not_applicable == 1
    assert result.details.turns[0].score is not None


def test_a_wrong_role_or_a_conversation_without_an_assistant_is_refused():
    with pytest.raises(ValidationError, match="role"):
        Turn(role="system", content="x")
    with pytest.raises(ValueError, match="no assistant turn"):
        ConversationalTestCase(turns=[Turn(role="user", content="Hi")]).to_dataset()
