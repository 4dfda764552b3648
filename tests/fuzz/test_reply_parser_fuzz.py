"""Property-based fuzzing of the judge-reply parser: any text either yields a validated object
or a ReplyError with a reason; a verdict is found wherever the judge puts it; nothing that is
not a number becomes a score."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from contextlens.judges.base import Reply
from contextlens.judges.parsing import ReplyError, extract_json, parse_reply, reask_messages


class Verdict(Reply):
    reason: str
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)


FUZZ = settings(max_examples=100, deadline=None)
noise = st.text(alphabet=st.characters(blacklist_characters="`{}"), max_size=200)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers()
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,
)


@FUZZ
@given(st.text(max_size=500))
def test_any_text_gives_an_object_or_a_reply_error(text: str) -> None:
    try:
        out = parse_reply(text, Verdict)
    except ReplyError as exc:
        assert str(exc)  # always a reason
    else:
        assert 0.0 <= out.score <= 1.0


@FUZZ
@given(noise, noise, st.text(max_size=80), st.floats(0.0, 1.0, allow_nan=False))
def test_a_fenced_verdict_is_found_among_any_prose(before, after, reason, score) -> None:
    reply = f"{before}\n```json\n{json.dumps({'reason': reason, 'score': score})}\n```\n{after}"
    out = parse_reply(reply, Verdict)
    assert out.reason == reason and out.score == score


@FUZZ
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=5), noise)
def test_the_last_object_wins_over_one_quoted_earlier(quoted, prose) -> None:
    verdict = {"reason": "mine", "score": 0.25}
    reply = f"{json.dumps(quoted)} {prose} {json.dumps(verdict)}"
    assert extract_json(reply) == verdict


@FUZZ
@given(json_values.filter(lambda v: not isinstance(v, (int, float)) or isinstance(v, bool)))
def test_a_score_that_is_not_a_json_number_is_refused(value) -> None:
    reply = json.dumps({"reason": "r", "score": value})
    try:
        parse_reply(reply, Verdict)
    except ReplyError as exc:
        assert "score" in str(exc)
    else:  # pragma: no cover - the property under test
        raise AssertionError(f"accepted score {value!r}")


@FUZZ
@given(st.text(max_size=200), st.text(max_size=100))
def test_a_reask_keeps_the_conversation_and_adds_the_error(reply, error) -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    again = reask_messages(messages, reply, error)
    assert again[:2] == messages and again[2] == {"role": "assistant", "content": reply}
    assert error in again[3]["content"] and again[3]["role"] == "user"
