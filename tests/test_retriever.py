import json

import pytest

from contextlens import Batch, Dataset, InputError, JsonlRetriever, Retriever


def session(**over):
    base = {
        "session_id": "s1",
        "assistant_id": "bot",
        "context": "Be helpful.",
        "conversation": [
            {"qa_id": "q1", "query": "hi", "assistant": "hello", "ground_truth_assistant": ""},
            {"qa_id": "q2", "query": "bye", "assistant": "bye", "ground_truth_assistant": "bye"},
        ],
    }
    base.update(over)
    return base


def write(tmp_path, *lines):
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_reads_sessions_lazily_and_skips_blank_lines(tmp_path):
    path = write(tmp_path, session(), "", session(session_id="s2"))
    loaded = JsonlRetriever(path).load_dataset()
    assert not isinstance(loaded, list)
    sessions = list(loaded)
    assert [s.session_id for s in sessions] == ["s1", "s2"]
    assert sessions[0].conversation[0].ground_truth_assistant == ""
    assert sessions[0].language == "english"


def bad(tmp_path, *lines):
    with pytest.raises(InputError) as info:
        list(JsonlRetriever(write(tmp_path, *lines)).load_dataset())
    return info.value


def test_missing_field_names_file_line_and_field(tmp_path):
    row = session()
    del row["conversation"][1]["assistant"]
    err = bad(tmp_path, session(session_id="s0"), row)
    assert err.line == 2 and err.field == "conversation[1].assistant"
    assert "sessions.jsonl:2" in str(err) and "conversation[1].assistant" in str(err)


def test_wrong_type(tmp_path):
    row = session()
    row["conversation"][0]["qa_id"] = 7
    err = bad(tmp_path, row)
    assert err.field == "conversation[0].qa_id" and "valid string" in str(err)


@pytest.mark.parametrize("weight", [-0.5, "NaN", float("inf")])
def test_bad_weights(tmp_path, weight):
    row = session()
    row["conversation"][0]["weight"] = weight
    text = json.dumps(row).replace('"NaN"', "NaN")
    err = bad(tmp_path, text)
    assert err.field == "conversation[0].weight"


def test_duplicate_qa_id(tmp_path):
    row = session()
    row["conversation"][1]["qa_id"] = "q1"
    err = bad(tmp_path, row)
    assert "duplicate qa_id 'q1'" in str(err) and err.line == 1


def test_empty_conversation_is_read_and_has_no_score(tmp_path):
    # gaussia takes a session without interactions; it is read, and scored as nothing to score
    [empty] = JsonlRetriever(write(tmp_path, session(conversation=[]))).load_dataset()
    assert empty.conversation == []
    err = bad(tmp_path, session(conversation=None))
    assert err.field == "conversation" and "null is not allowed" in str(err)


def test_malformed_json_line(tmp_path):
    err = bad(tmp_path, session(), '{"session_id": "s2", ')
    assert err.line == 2 and "malformed JSON" in str(err)


def test_not_an_object(tmp_path):
    assert "expected a JSON object" in str(bad(tmp_path, "[1, 2]"))


def test_duplicate_session(tmp_path):
    err = bad(tmp_path, session(), session())
    assert err.line == 2 and err.field == "session_id"


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot open"):
        list(JsonlRetriever(tmp_path / "nope.jsonl").load_dataset())


def test_retriever_keeps_constructor_kwargs():
    class Mine(Retriever):
        def load_dataset(self):
            return [Dataset(**session(context=self.kwargs["context"]))]

    assert Mine(context="X").load_dataset()[0].context == "X"


def test_batch_defaults_match_gaussia():
    b = Batch(qa_id="q", query="q", assistant="a", ground_truth_assistant="")
    assert b.observation is None and b.agentic == {} and b.logprobs == {} and b.weight is None
