"""The turn metrics (contextlens.metrics.turns): every turn of a session scored with its
own retrieved chunks by the single-case metric, once, with the earlier turns shown."""

import json

import pytest

from contextlens import evaluate
from contextlens.errors import InputError
from contextlens.loaders import load_cases
from contextlens.metrics.turns import (
    NO_CHUNKS,
    NO_EVIDENCE,
    TurnContextRecall,
    TurnFaithfulness,
)
from contextlens.schemas import Batch, Dataset
from contextlens.stats import FrequentistMode
from contextlens.testing import FakeOpenAIServer
from support import blocks
from support.rag import rule_reply

MUSEUM = "The museum opens at 9am on weekdays."
TICKET = "A ticket costs 5 euros for adults."


def turn(qa_id, query, reply, chunks=None, **extra):
    found = {"qa_id": qa_id, "query": query, "assistant": reply, **extra}
    if chunks is not None:
        found["retrieval_context"] = chunks
    return found


SESSIONS = [
    {
        "session_id": "museum",
        "assistant_id": "guide",
        "context": "You answer questions about the town museum.",
        "conversation": [
            turn("t1", "When does the museum open?", "The museum opens at 9am.", [MUSEUM]),
            # "The museum opens at 9am." refers back to t1: no chunk of t2 holds it
            turn(
                "t2",
                "And how much is it?",
                "The museum opens at 9am. A ticket costs 5 euros.",
                [TICKET],
            ),
            turn("t3", "Thanks!", "You are welcome."),  # retrieved nothing
        ],
    },
    {
        "session_id": "cafe",
        "assistant_id": "guide",
        "context": "You answer questions about the town museum.",
        "conversation": [
            turn("c1", "Is there a cafe?", "The museum has a rooftop cafe.", [MUSEUM]),
            turn("c2", "What does a ticket cost?", "A ticket costs 5 euros.", [TICKET]),
        ],
    },
    {
        "session_id": "tickets",
        "assistant_id": "guide",
        "context": "You answer questions about the town museum.",
        "conversation": [
            turn("k1", "Ticket price?", "A ticket costs 5 euros.", [TICKET, MUSEUM]),
        ],
    },
]
N_JUDGED = 5  # the turns with chunks


@pytest.fixture
def sessions_file(tmp_path):
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SESSIONS))
    return path


def run_judged(sessions, names, **options):
    with FakeOpenAIServer(reply=rule_reply) as server:
        run = evaluate(sessions, names, judge=f"{server.base_url}#judge", progress=False, **options)
        return run, server.calls, list(server.requests)


def by_session(run):
    return {r.case_id: r for r in run.results}


def test_a_sessions_file_is_judged_once_per_turn_with_chunks(sessions_file):
    kind, sessions = load_cases(sessions_file)
    sessions = list(sessions)
    assert kind == "sessions" and sessions[0].conversation[1].retrieval_context == [TICKET]
    run, calls, _ = run_judged(sessions, [TurnFaithfulness(statistical_mode=FrequentistMode())])
    assert calls == N_JUDGED
    found = by_session(run)
    museum = found["museum"]
    t1, t2, t3 = museum.details.turns
    assert (t1.score, t2.score) == (1.0, 1.0)
    assert t3.score is None and t3.not_applicable == NO_EVIDENCE
    assert (museum.details.n_turns, museum.details.n_not_applicable) == (3, 1)
    assert "1 of 3 turns not applicable, first t3" in museum.reason
    cafe = found["cafe"]
    assert [t.score for t in cafe.details.turns] == [0.0, 1.0]
    assert cafe.score == pytest.approx(0.5) and cafe.reason.startswith("lowest turn c1 (0.00)")
    assert "rooftop cafe" in cafe.reason


def test_a_claim_that_refers_back_to_an_earlier_turn_is_not_unsupported():
    session = Dataset.model_validate(SESSIONS[0])
    run, _, requests = run_judged([session], ["turn-faithfulness"])
    prompts = [r["messages"][1]["content"] for r in requests]
    [second] = [p for p in prompts if TICKET in p]
    [question] = blocks(second, "input")
    assert "assistant (t1): The museum opens at 9am." in question
    assert question.endswith("The user's message now:\nAnd how much is it?")
    [result] = run.results
    t2 = result.details.turns[1]
    back, own = t2.details.claims
    assert back.verdict == "yes" and back.chunk is None and "earlier turn" in back.reason
    assert own.verdict == "yes" and own.chunk == 0


def test_the_session_score_is_the_weighted_mean_of_its_turns():
    session = Dataset.model_validate(SESSIONS[0])
    wrong = session.model_copy(
        update={
            "conversation": [
                session.conversation[0].model_copy(update={"weight": 0.25}),
                session.conversation[1].model_copy(
                    update={"assistant": "It is free.", "weight": 0.75}
                ),
            ]
        }
    )
    run, _, _ = run_judged([wrong], [TurnFaithfulness(statistical_mode=FrequentistMode())])
    [result] = run.results
    assert [t.weight for t in result.details.turns] == [0.25, 0.75]
    assert result.score == pytest.approx(0.25)
    assert result.reason.startswith("lowest turn t2 (0.00)")


def test_a_session_without_any_chunks_is_not_applicable_never_zero():
    session = Dataset(
        session_id="s",
        assistant_id="a",
        context="c",
        conversation=[Batch(qa_id="q", query="Hi", assistant="Hello!")],
    )
    run, calls, _ = run_judged([session], ["turn-contextual-relevancy"])
    [result] = run.results
    assert calls == 0 and result.score is None and result.not_applicable == NO_CHUNKS


def test_recall_of_a_turn_without_a_reference_reply_is_not_applicable():
    session = Dataset.model_validate(
        {
            **SESSIONS[1],
            "conversation": [
                {**SESSIONS[1]["conversation"][1], "ground_truth_assistant": "5 euros."},
                SESSIONS[1]["conversation"][0],
            ],
        }
    )
    run, calls, _ = run_judged([session], [TurnContextRecall()])
    [result] = run.results
    assert calls == 1
    assert result.details.turns[1].not_applicable == (
        "not applicable: the turn has no ground_truth_assistant"
    )


@pytest.mark.parametrize(
    "name",
    [
        "turn-faithfulness",
        "turn-contextual-relevancy",
        "turn-context-precision-ranked",
        "turn-context-recall",
    ],
)
def test_each_turn_metric_runs_offline_and_counts_the_turn_without_chunks(name):
    sessions = [Dataset.model_validate(s) for s in SESSIONS]
    run = evaluate(sessions, [name], progress=False)
    museum = by_session(run)["museum"]
    assert museum.details.n_not_applicable >= 1
    claims = name in ("turn-faithfulness", "turn-context-recall")
    assert museum.details.turns[2].not_applicable == (NO_EVIDENCE if claims else NO_CHUNKS)
    assert museum.details.judge == "offline"
    scored = [t for t in museum.details.turns if t.score is not None]
    for t in scored:
        assert 0.0 <= t.score <= 1.0 and t.details is not None


def test_a_turn_whose_chunks_are_not_a_list_is_refused_naming_file_line_and_field(tmp_path):
    bad = {**SESSIONS[2], "conversation": [{**SESSIONS[2]["conversation"][0]}]}
    bad["conversation"][0]["retrieval_context"] = {"not": "a list"}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(SESSIONS[1]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(InputError) as caught:
        list(load_cases(path)[1])
    message = str(caught.value)
    assert "bad.jsonl:2" in message and "retrieval_context" in message


def test_schema_lists_the_turn_fields_and_metrics(run_cli):
    code, text = run_cli("schema")
    assert code == 0
    interactions = text.split("Interactions")[1]
    assert "retrieval_context" in interactions and "tools_called" in interactions
    for name in ("turn-faithfulness", "turn-contextual-relevancy", "turn-context-recall"):
        assert name in text


def test_flat_rows_carry_each_turns_chunks_and_a_repeated_id_is_refused(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(
        "session_id,assistant_id,context,qa_id,query,assistant,retrieval_context\n"
        's,a,c,q1,When?,At 9am.,"[""Opens at 9am.""]"\n'
        "s,a,c,q2,Thanks!,Welcome.,\n"
    )
    [session] = list(load_cases(path)[1])
    first, second = session.conversation
    assert (first.retrieval_context, second.retrieval_context) == (["Opens at 9am."], [])
    [result] = evaluate([session], ["turn-contextual-relevancy"], progress=False).results
    assert result.details.turns[1].not_applicable == NO_CHUNKS  # an empty cell: none retrieved
    with pytest.raises(ValueError, match="listed twice"):
        Batch(qa_id="q", assistant="a", retrieval_context=["x", "y"], retrieved_ids=["c1", "c1"])


WEATHER = {
    "type": "function",
    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
    "output": "Paris is sunny at 18 degrees.",
}


def test_a_turns_tool_outputs_are_its_evidence(tmp_path):
    path = tmp_path / "agent.jsonl"
    session = {
        "session_id": "trip",
        "assistant_id": "agent",
        "context": "You plan trips.",
        "conversation": [
            turn(
                "w1", "Weather in Paris?", "Paris is sunny at 18 degrees.", tools_called=[WEATHER]
            ),
            turn("w2", "And Rome?", "Rome is rainy.", tools_called=[{"name": "weather"}]),
        ],
    }
    path.write_text(json.dumps(session) + "\n")
    _, found = load_cases(path)
    [loaded] = list(found)
    assert loaded.conversation[0].tools_called[0].output == WEATHER["output"]
    run, calls, requests = run_judged([loaded], ["turn-faithfulness"])
    assert calls == 1  # w2's tool has no output: no evidence, not judged
    assert (
        "the output of the tool call tools_called[0] (weather)"
        in requests[0]["messages"][1]["content"]
    )
    [result] = run.results
    w1, w2 = result.details.turns
    [claim] = w1.details.claims
    assert w1.score == 1.0 and claim.tool == "tools_called[0] (weather)" and claim.chunk is None
    assert w2.score is None and w2.not_applicable == NO_EVIDENCE


def test_a_turns_tool_call_that_is_not_one_names_its_line(tmp_path):
    path = tmp_path / "agent.jsonl"
    session = {
        "session_id": "trip",
        "assistant_id": "agent",
        "context": "c",
        "conversation": [turn("w1", "q", "a", tools_called=[{"output": "18 degrees"}])],
    }
    path.write_text(json.dumps(session) + "\n")
    with pytest.raises(InputError) as error:
        list(load_cases(path)[1])
    message = str(error.value)
    assert "agent.jsonl:1: field 'conversation[0].tools_called'" in message
    assert "tools_called[0] is not a tool call: name" in message
